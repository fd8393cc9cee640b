// deploy_rules: checks deploy/prometheus beyond `promtool check/test rules`
// (registered separately): every alert has a unit test where it fires and
// one where it must not, and those tests bite (an alert whose expression is
// replaced by "always true" or "never true" makes promtool test rules
// fail); every rule, and every input series of the rules' unit tests, names
// only metrics, labels and values of the metric catalog (its JSON, from
// stagger-metric-catalog, in STAGGER_METRIC_CATALOG); every alert carries
// severity, summary and description; the operator component's
// PrometheusRule is the current rendering of rules.yml.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { execFileSync, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const yaml = require("js-yaml");
const { checkExpr } = require("./lib/promql");

const REPO = path.resolve(__dirname, "..", "..");
const PROM = path.join(REPO, "deploy", "prometheus");
const rulesText = fs.readFileSync(path.join(PROM, "rules.yml"), "utf8");
const rules = yaml.load(rulesText);
const tests = yaml.load(fs.readFileSync(path.join(PROM, "rules_test.yml"), "utf8"));
const allRules = rules.groups.flatMap((g) => g.rules);
const alerts = allRules.filter((r) => r.alert);
const recorded = new Set(allRules.filter((r) => r.record).map((r) => r.record));

// promtool test rules of `testsDoc` (default: rules_test.yml) against
// `rulesDoc`, both written to a scratch folder.
function promtoolTest(rulesDoc, testsDoc = tests) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stagger-rules-"));
  try {
    fs.writeFileSync(path.join(dir, "rules.yml"), yaml.dump(rulesDoc, { lineWidth: -1 }));
    fs.writeFileSync(path.join(dir, "rules_test.yml"), yaml.dump(testsDoc, { lineWidth: -1 }));
    return spawnSync("promtool", ["test", "rules", path.join(dir, "rules_test.yml")], { encoding: "utf8" });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// rules_test.yml reduced to the cases of one alert where it fires
// (firing=true) or stays silent (firing=false).
function onlyCases(alertName, firing) {
  const doc = structuredClone(tests);
  doc.tests = doc.tests
    .map((t) => {
      const keep = (t.alert_rule_test || []).filter(
        (c) => c.alertname === alertName && (c.exp_alerts || []).length > 0 === firing,
      );
      const { promql_expr_test, ...rest } = t;
      return { ...rest, alert_rule_test: keep };
    })
    .filter((t) => t.alert_rule_test.length > 0);
  return doc;
}

function withExpr(alertName, expr) {
  const doc = structuredClone(rules);
  for (const g of doc.groups) for (const r of g.rules) if (r.alert === alertName) r.expr = expr;
  return doc;
}

test("there are alerts for each required condition", () => {
  const names = alerts.map((a) => a.alert);
  for (const want of [
    "StaggerBreakerOpenTooLong", "StaggerBudgetRefusalsHigh", "StaggerRetryAfterRising",
    "StaggerCoordinatorUnreachable", "StaggerClientFallbackSustained",
    "StaggerConfigReloadFailed", "StaggerdDown", "StaggerStateNotSaved",
    "StaggerAgentLeaseStreamsDown", "StaggerAgentFallbackSustained",
  ]) assert.ok(names.includes(want), `missing alert ${want}`);
});

test("every alert has severity, summary and description", () => {
  for (const a of alerts) {
    assert.match((a.labels || {}).severity || "", /^(critical|warning|info)$/, a.alert);
    assert.ok(((a.annotations || {}).summary || "").length > 10, `${a.alert} summary`);
    assert.ok(((a.annotations || {}).description || "").length > 40, `${a.alert} description`);
  }
});

test("every rule references only exported metrics, labels and values", () => {
  for (const r of allRules) assert.deepEqual(checkExpr(r.expr, recorded), [], r.alert || r.record);
});

test("every input series of the rules' unit tests is a catalog series", () => {
  const series = tests.tests.flatMap((t) => (t.input_series || []).map((i) => i.series));
  assert.ok(series.length > 0, "rules_test.yml has no input series");
  for (const s of series) assert.deepEqual(checkExpr(s, recorded), [], s);
});

test("the known metrics are the catalog's, read from stagger-metric-catalog's JSON", () => {
  const { METRICS, loadCatalog } = require("./lib/metrics");
  assert.throws(() => loadCatalog(""), /STAGGER_METRIC_CATALOG is not set/);
  const catalog = loadCatalog();
  assert.deepEqual(Object.keys(METRICS).filter((n) => n !== "up").sort(), Object.keys(catalog).sort());
  assert.equal(catalog.stagger_decisions_total.type, "counter");
  assert.ok(catalog.stagger_decisions_total.labels.reason.includes("PAUSED"));
  assert.deepEqual(catalog.stagger_batch_size.labels.method, ["AdmitBatch", "ReportBatch"]);
  assert.equal(catalog.stagger_authz_denied_total.exporter, "staggerd");
  assert.equal(catalog.stagger_client_coordinator_up.exporter, "client");
});

test("the metric check rejects a misspelled metric, label or value", () => {
  assert.equal(checkExpr("rate(stagger_decision_total[5m])").length, 1);
  assert.equal(checkExpr('stagger_endpoints{state="OPEN"}').length, 1);
  assert.equal(checkExpr('stagger_endpoints{breaker_state=~"OPEN|HALFOPEN"}').length, 1);
  assert.equal(checkExpr('stagger_decisions_total{reason="BUDGET_EXHAUST"}').length, 1);
  assert.equal(checkExpr('stagger_batch_size_count{method="Admit"}').length, 1);
  assert.equal(checkExpr('stagger_client_coordinator_errors_total{code="OK"}').length, 1);
});

test("every alert has a firing and a not-firing unit test", () => {
  for (const a of alerts) {
    const cases = tests.tests.flatMap((t) => t.alert_rule_test || []).filter((c) => c.alertname === a.alert);
    assert.ok(cases.some((c) => (c.exp_alerts || []).length > 0), `${a.alert}: no test where it fires`);
    assert.ok(cases.some((c) => (c.exp_alerts || []).length === 0), `${a.alert}: no test where it stays silent`);
  }
});

test("every recording rule has a unit test", () => {
  const exprs = tests.tests.flatMap((t) => t.promql_expr_test || []).map((c) => c.expr);
  for (const r of recorded) assert.ok(exprs.some((e) => e.includes(r)), `${r} untested`);
});

test("control: promtool passes on the unmutated rules", () => {
  const r = promtoolTest(rules);
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

// Each alert's silent cases alone must catch an always-firing expression,
// and its firing cases alone a never-firing one; both pass unmutated.
for (const a of alerts) {
  test(`${a.alert}: its not-firing tests catch an always-firing expression`, () => {
    const cases = onlyCases(a.alert, false);
    const ok = promtoolTest(rules, cases);
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    const r = promtoolTest(withExpr(a.alert, "vector(1)"), cases);
    assert.notEqual(r.status, 0, "promtool test rules passed with expr vector(1)");
    assert.match(r.stdout + r.stderr, new RegExp(`alertname: ${a.alert}\\b`));
  });
  test(`${a.alert}: its firing tests catch a never-firing expression`, () => {
    const cases = onlyCases(a.alert, true);
    const ok = promtoolTest(rules, cases);
    assert.equal(ok.status, 0, ok.stdout + ok.stderr);
    const r = promtoolTest(withExpr(a.alert, "vector(1) == 0"), cases);
    assert.notEqual(r.status, 0, "promtool test rules passed with expr vector(1) == 0");
    assert.match(r.stdout + r.stderr, new RegExp(`alertname: ${a.alert}\\b`));
  });
}

test("components/prometheus-operator/prometheusrule.yaml is rules.yml rendered", () => {
  const want = execFileSync("bash", [path.join(PROM, "render-prometheusrule.sh")], { encoding: "utf8" });
  const file = path.join(REPO, "deploy", "k8s", "components", "prometheus-operator", "prometheusrule.yaml");
  assert.equal(fs.readFileSync(file, "utf8"), want, "run deploy/prometheus/render-prometheusrule.sh --write");
  assert.deepEqual(yaml.load(want).spec.groups, rules.groups);
});
