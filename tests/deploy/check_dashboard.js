// deploy_grafana_dashboard: deploy/grafana/stagger-dashboard.json is valid
// JSON with the panels an operator needs (decisions by reason, the retry
// delay heatmap per attempt, breakers by state, RPC p50/p99, budget
// refusals, Retry-After); every query (panel targets and template
// variables) selects only metrics, labels and values in the metric catalog
// (stagger-metric-catalog's JSON, in STAGGER_METRIC_CATALOG), and
// parses as PromQL (promtool check rules over them as recording rules).
// Mutated dashboards prove each check rejects what it should.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const yaml = require("js-yaml");
const { checkExpr } = require("./lib/promql");

const REPO = path.resolve(__dirname, "..", "..");
const FILE = path.join(REPO, "deploy", "grafana", "stagger-dashboard.json");
const TEXT = fs.readFileSync(FILE, "utf8");

// Grafana's variables -> sample values, so the queries are plain PromQL.
function substitute(expr) {
  return expr
    .replace(/\$__rate_interval|\$__interval|\$__range/g, "5m")
    .replace(/\$\{?job\}?/g, "staggerd")
    .replace(/\$\{?attempt\}?/g, "2");
}

const flatPanels = (dash) => (dash.panels || []).flatMap((p) => (p.type === "row" ? [p, ...(p.panels || [])] : [p]));

// Every PromQL query of the dashboard: { where, expr } (variables substituted).
function queries(dash) {
  const out = [];
  for (const p of flatPanels(dash)) {
    for (const t of p.targets || []) out.push({ where: `panel "${p.title}" ${t.refId}`, expr: substitute(t.expr || "") });
  }
  for (const v of (dash.templating || {}).list || []) {
    if (v.type !== "query") continue;
    const q = typeof v.query === "string" ? v.query : (v.query || {}).query || "";
    const m = /^label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\)$/.exec(q.trim());
    out.push({ where: `variable ${v.name}`, expr: m ? substitute(m[1]) : `unsupported variable query: ${q}` });
  }
  return out;
}

// promtool's verdict on the queries' PromQL syntax: "" or its output.
function promtoolSyntax(qs) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stagger-dash-"));
  try {
    const doc = { groups: [{ name: "dashboard", rules: qs.map((q, i) => ({ record: `dashboard:query_${i}`, expr: q.expr })) }] };
    fs.writeFileSync(path.join(dir, "q.yml"), yaml.dump(doc, { lineWidth: -1 }));
    const r = spawnSync("promtool", ["check", "rules", path.join(dir, "q.yml")], { encoding: "utf8" });
    return r.status === 0 ? "" : (r.stdout + r.stderr).trim();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function dashboardErrors(dash) {
  const errors = [];
  const err = (m) => errors.push(m);
  if (!dash.uid || !dash.title) err("dashboard needs uid and title");
  if (!Number.isInteger(dash.schemaVersion)) err("schemaVersion must be an integer");
  const panels = flatPanels(dash);
  const ids = panels.map((p) => p.id);
  if (new Set(ids).size !== ids.length || ids.some((i) => !Number.isInteger(i))) err("panel ids must be unique integers");
  const vars = new Set(((dash.templating || {}).list || []).map((v) => v.name));
  for (const p of panels) {
    const g = p.gridPos || {};
    if (![g.x, g.y, g.w, g.h].every(Number.isInteger) || g.x + g.w > 24) err(`panel "${p.title}" gridPos invalid`);
    if (p.type === "row") continue;
    if (!(p.targets || []).length) err(`panel "${p.title}" has no query`);
    const refs = (p.targets || []).map((t) => t.refId);
    if (new Set(refs).size !== refs.length) err(`panel "${p.title}" has duplicate refIds`);
    for (const t of p.targets || []) {
      if (!t.expr) err(`panel "${p.title}" ${t.refId} has no expr`);
      for (const v of (t.expr || "").matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)/g)) {
        if (!v[1].startsWith("__") && !vars.has(v[1])) err(`panel "${p.title}" uses undefined variable $${v[1]}`);
      }
    }
    const dsUid = (p.datasource || {}).uid;
    if (dsUid !== "${datasource}") err(`panel "${p.title}" datasource must be \${datasource}`);
    if (p.repeat && !vars.has(p.repeat)) err(`panel "${p.title}" repeats over undefined variable ${p.repeat}`);
  }
  const qs = queries(dash);
  for (const q of qs) for (const e of checkExpr(q.expr)) err(`${q.where}: ${e}`);
  const syn = promtoolSyntax(qs);
  if (syn) err(`PromQL syntax: ${syn}`);

  // The panels the operator needs.
  const has = (pred, what) => { if (!panels.some(pred)) err(`missing panel: ${what}`); };
  const exprs = (p) => (p.targets || []).map((t) => t.expr || "");
  has((p) => exprs(p).some((e) => /stagger_decisions_total/.test(e) && /by \([^)]*\breason\b/.test(e) && /rate\(/.test(e)), "decisions by reason (rate)");
  has((p) => p.type === "heatmap" && p.repeat === "attempt" &&
    (p.targets || []).some((t) => /stagger_retry_delay_seconds_bucket\{[^}]*attempt=~"\$attempt"/.test(t.expr) && /by \(le\)/.test(t.expr) && t.format === "heatmap"),
  "retry delay heatmap per attempt");
  has((p) => exprs(p).some((e) => /stagger_endpoints\{/.test(e) && /by \(breaker_state\)/.test(e)), "endpoints by breaker state");
  has((p) => ["0.5", "0.99"].every((q) => exprs(p).some((e) => e.includes(`histogram_quantile(${q},`) && e.includes("stagger_rpc_duration_seconds_bucket"))), "RPC latency p50 and p99");
  has((p) => exprs(p).some((e) => /rate\(stagger_budget_refusals_total/.test(e)), "budget refusals");
  has((p) => exprs(p).some((e) => /rate\(stagger_retry_after_total/.test(e)), "Retry-After rate");
  return errors;
}

test("the dashboard is valid JSON", () => {
  assert.doesNotThrow(() => JSON.parse(TEXT));
});

test("the dashboard passes every check", () => {
  assert.deepEqual(dashboardErrors(JSON.parse(TEXT)), []);
});

test("the queries cover the server and client metrics", () => {
  const names = new Set(queries(JSON.parse(TEXT)).flatMap((q) => [...q.expr.matchAll(/\b(stagger_[a-z_]+)/g)].map((m) => m[1])));
  for (const n of ["stagger_decisions_total", "stagger_retry_delay_seconds_bucket", "stagger_endpoints",
    "stagger_rpc_duration_seconds_bucket", "stagger_budget_refusals_total", "stagger_retry_after_total",
    "stagger_client_coordinator_up", "stagger_client_fallback_decisions_total"]) {
    assert.ok(names.has(n), `no panel uses ${n}`);
  }
});

const mutants = [
  ["misspelled metric", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = "sum(rate(stagger_decision_total[5m]))"; }, /unknown metric stagger_decision_total/],
  ["unknown label", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = 'sum(rate(stagger_decisions_total{why="BACKOFF"}[5m]))'; }, /has no label why/],
  ["unknown label value", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = 'sum(stagger_endpoints{breaker_state="HALFOPEN"})'; }, /has no value "HALFOPEN"/],
  ["PromQL syntax error", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = "sum(rate(stagger_decisions_total[5m])"; }, /PromQL syntax/],
  ["duplicate panel id", (d) => { const ps = flatPanels(d).filter((p) => p.type !== "row"); ps[1].id = ps[0].id; }, /panel ids must be unique/],
  ["undefined variable", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = 'sum(rate(stagger_decisions_total{job=~"$cluster"}[5m]))'; }, /undefined variable \$cluster/],
  ["heatmap removed", (d) => { for (const p of flatPanels(d)) if (p.type === "heatmap") p.type = "timeseries"; }, /missing panel: retry delay heatmap per attempt/],
  ["variable on an unknown metric", (d) => { d.templating.list.find((v) => v.name === "job").query.query = "label_values(staggerd_up, job)"; }, /variable job: unknown metric staggerd_up/],
];
for (const [name, mutate, want] of mutants) {
  test(`rejects: ${name}`, () => {
    const d = JSON.parse(TEXT);
    mutate(d);
    const errors = dashboardErrors(d);
    assert.ok(errors.some((e) => want.test(e)), `no error matching ${want}; got:\n  ${errors.join("\n  ") || "(none)"}`);
  });
}
