// deploy_grafana_dashboard: deploy/grafana/stagger-dashboard.json is valid
// JSON with the panels an operator needs (decisions by reason, the retry
// delay heatmap per attempt, breakers by state, RPC p50/p99, budget
// refusals, Retry-After; the coordinators' cost per delivery, leases and
// revocations, agents' local decisions, lease streams and fallbacks); the
// cost per delivery panel computes what its description says (promtool
// evaluates it on made-up series, with and without agents); every query
// (panel targets and template
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
    .replace(/\$\{?agent_job\}?/g, "stagger-agent")
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
  // Leases and agents.
  const cost = costPanel(dash);
  if (!cost) err("missing panel: coordinator cost per delivery");
  else for (const e of costErrors(cost)) err(`panel "${cost.title}": ${e}`);
  has((p) => exprs(p).some((e) => /stagger_leases\{/.test(e)) && exprs(p).some((e) => /stagger_client_leases\{/.test(e)), "leases granted and held");
  has((p) => exprs(p).some((e) => /stagger_not_clear_entries\{/.test(e)), "the not-clear set");
  has((p) => exprs(p).some((e) => /rate\(stagger_client_lease_decisions_total/.test(e) && /by \([^)]*\bverdict\b/.test(e)), "agents' decisions under leases by verdict");
  has((p) => exprs(p).some((e) => /stagger_client_sync_streams_up/.test(e)), "agents' lease streams");
  has((p) => exprs(p).some((e) => /rate\(stagger_client_fallback_decisions_total\{[^}]*job=~"\$agent_job"/.test(e) && /by \([^)]*\binstance\b/.test(e)), "agents' fallback decisions per agent");
  return errors;
}

// The panel with the coordinators' cost per delivery: its first query is
// the total.
const costPanel = (dash) => flatPanels(dash).find((p) => p.title === "Coordinator cost per delivery");

// Two scenarios, 5 minutes of made-up counters each, and what the cost
// panel's first query must give on them (promtool evaluates it).
//  - No agents: every delivery an Admit and a success Report (60/min
//    each), no lease streams, no client lease series at all: 2.
//  - Leases: the coordinators answer 15/min of each, agents 45/min of each
//    under leases, 30 lease messages/min each way: deliveries 1/s, the
//    coordinators' messages 0.5/s decisions + 1/s sync = 1.5 per delivery.
const COST_SCENARIOS = [
  ["without agents", 2, [
    ['stagger_decisions_total{job="staggerd",instance="a",call="admit",verdict="PROCEED",reason="INITIAL_JITTER"}', "0+60x10"],
    ['stagger_decisions_total{job="staggerd",instance="a",call="report",verdict="DONE",reason="SUCCEEDED"}', "0+60x10"],
    ['stagger_sync_messages_total{job="staggerd",instance="a",direction="in"}', "0x10"],
    ['stagger_sync_messages_total{job="staggerd",instance="a",direction="out"}', "0x10"],
  ]],
  ["with agents answering under leases", 1.5, [
    ['stagger_decisions_total{job="staggerd",instance="a",call="admit",verdict="PROCEED",reason="INITIAL_JITTER"}', "0+15x10"],
    ['stagger_decisions_total{job="staggerd",instance="a",call="report",verdict="DONE",reason="SUCCEEDED"}', "0+15x10"],
    ['stagger_sync_messages_total{job="staggerd",instance="a",direction="in"}', "0+30x10"],
    ['stagger_sync_messages_total{job="staggerd",instance="a",direction="out"}', "0+30x10"],
    ['stagger_client_lease_decisions_total{job="stagger-agent",instance="node-a",call="admit",verdict="PROCEED"}', "0+45x10"],
    ['stagger_client_lease_decisions_total{job="stagger-agent",instance="node-a",call="report",verdict="DONE"}', "0+45x10"],
  ]],
];

// What is wrong with the cost panel's total (its query A): each scenario
// whose value promtool does not find, with what promtool says.
function costErrors(panel) {
  const a = (panel.targets || []).find((t) => t.refId === "A");
  if (!a || !a.expr) return ["no query A"];
  const expr = substitute(a.expr);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stagger-cost-"));
  try {
    fs.writeFileSync(path.join(dir, "rules.yml"), "groups: []\n");
    return COST_SCENARIOS.flatMap(([name, value, series]) => {
      const doc = {
        rule_files: ["rules.yml"],
        evaluation_interval: "1m",
        tests: [{
          interval: "1m",
          input_series: series.map(([s, values]) => ({ series: s, values })),
          promql_expr_test: [{ expr, eval_time: "10m", exp_samples: [{ labels: "{}", value }] }],
        }],
      };
      fs.writeFileSync(path.join(dir, "test.yml"), yaml.dump(doc, { lineWidth: -1 }));
      const r = spawnSync("promtool", ["test", "rules", path.join(dir, "test.yml")], { encoding: "utf8" });
      const got = /got: *(.*)/.exec(r.stdout + r.stderr);
      return r.status === 0 ? [] : [`cost per delivery ${name}: want ${value}, got ${got ? got[1].trim() : (r.stdout + r.stderr).trim()}`];
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
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
    "stagger_client_coordinator_up", "stagger_client_fallback_decisions_total",
    "stagger_sync_messages_total", "stagger_lease_grants_total", "stagger_not_clear_entries", "stagger_leases",
    "stagger_client_lease_decisions_total", "stagger_client_leases", "stagger_client_sync_streams_up",
    "stagger_client_sync_flushes_total", "stagger_client_sync_reconnects_total", "stagger_client_coordinator_errors_total"]) {
    assert.ok(names.has(n), `no panel uses ${n}`);
  }
});

// `text` with `from` replaced; throws if nothing was (a mutant that does
// not apply proves nothing).
function changed(text, from, to) {
  const out = text.replace(from, to);
  if (out === text) throw new Error(`mutation did not apply: ${from}`);
  return out;
}

const mutants = [
  ["misspelled metric", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = "sum(rate(stagger_decision_total[5m]))"; }, /unknown metric stagger_decision_total/],
  ["unknown label", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = 'sum(rate(stagger_decisions_total{why="BACKOFF"}[5m]))'; }, /has no label why/],
  ["unknown label value", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = 'sum(stagger_endpoints{breaker_state="HALFOPEN"})'; }, /has no value "HALFOPEN"/],
  ["PromQL syntax error", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = "sum(rate(stagger_decisions_total[5m])"; }, /PromQL syntax/],
  ["duplicate panel id", (d) => { const ps = flatPanels(d).filter((p) => p.type !== "row"); ps[1].id = ps[0].id; }, /panel ids must be unique/],
  ["undefined variable", (d) => { flatPanels(d).find((p) => p.targets).targets[0].expr = 'sum(rate(stagger_decisions_total{job=~"$cluster"}[5m]))'; }, /undefined variable \$cluster/],
  ["heatmap removed", (d) => { for (const p of flatPanels(d)) if (p.type === "heatmap") p.type = "timeseries"; }, /missing panel: retry delay heatmap per attempt/],
  ["cost per delivery without the agents' deliveries", (d) => {
    const a = costPanel(d).targets[0];
    a.expr = changed(a.expr, / \+ \(sum\(rate\(stagger_client_lease_decisions_total[^)]*\)\) or vector\(0\)\)/, "");
  }, /cost per delivery with agents answering under leases: want 1.5, got \{\} 6E\+00/],
  ["cost per delivery blank without agents (no `or vector(0)`)", (d) => {
    const a = costPanel(d).targets[0];
    a.expr = changed(a.expr, " or vector(0)", "");
  }, /cost per delivery without agents: want 2, got nil/],
  ["cost per delivery over decisions, not deliveries", (d) => {
    const a = costPanel(d).targets[0];
    a.expr = changed(a.expr, ',verdict=~"DONE|GIVE_UP"', "");
  }, /cost per delivery without agents: want 2, got \{\} 1E\+00/],
  ["no lease stream panel", (d) => { for (const p of flatPanels(d)) for (const t of p.targets || []) t.expr = t.expr.replace(/stagger_client_sync_streams_up/g, "stagger_client_leases"); }, /missing panel: agents' lease streams/],
  ["agents' fallbacks not per agent", (d) => { const p = flatPanels(d).find((x) => x.title === "Agents' fallback decisions"); p.targets[0].expr = p.targets[0].expr.replace("by (instance, ", "by ("); }, /missing panel: agents' fallback decisions per agent/],
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
