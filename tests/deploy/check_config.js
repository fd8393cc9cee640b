// deploy_config_textproto: every policy file under deploy/k8s, and the
// config.textproto of every rendered ConfigMap (base and each overlay),
// parses as stagger.v1.config.Config with `protoc --encode` against
// proto/stagger/v1/config.proto (the loader in server/config is stricter:
// it also checks ranges; its own tests cover that). Broken files prove the
// check rejects misspelled fields, bad enum values and wrong types.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const m = require("./lib/manifests");

function textprotoFiles(dir) {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return textprotoFiles(p);
    return e.name.endsWith(".textproto") ? [p] : [];
  });
}

const files = textprotoFiles(m.K8S);

test("policy files exist for the base and the example overlay", () => {
  const rel = files.map((f) => path.relative(m.K8S, f));
  assert.ok(rel.includes(path.join("base", "config.textproto")), rel.join(","));
  assert.ok(rel.includes(path.join("overlays", "example", "config.textproto")), rel.join(","));
});

for (const f of files) {
  test(`${path.relative(m.REPO, f)} parses`, () => {
    assert.equal(m.protocError(fs.readFileSync(f, "utf8")), "");
  });
}

// Every output that runs staggerd has its config ConfigMap (an output of
// agents alone, like overlays/agent-sidecar, may have none); every such
// ConfigMap parses.
const runsStaggerd = (docs) => docs.some((d) => ["Deployment", "StatefulSet"].includes(d.kind) &&
  (d.spec.template.spec.containers || []).some((c) => c.name === "staggerd"));
for (const dir of [path.join(m.K8S, "base"), ...m.overlays()]) {
  test(`${path.relative(m.K8S, dir)}: rendered ConfigMap ${m.CONFIG_KEY} parses`, () => {
    const docs = m.kustomize(dir);
    const cms = docs.filter((d) => d.kind === "ConfigMap" && d.data && m.CONFIG_KEY in d.data);
    if (runsStaggerd(docs)) assert.equal(cms.length, 1);
    for (const cm of cms) assert.equal(m.protocError(cm.data[m.CONFIG_KEY]), "");
  });
}

const base = fs.readFileSync(path.join(m.K8S, "base", "config.textproto"), "utf8");
for (const [name, from, to, want] of [
  ["misspelled field", "max_attempts:", "max_attemps:", /no field named "max_attemps"/],
  ["misspelled message", "breaker {", "braker {", /no field named "braker"/],
  ["unknown enum value", "kind: DECORRELATED_JITTER", "kind: DECORELATED_JITTER", /DECORELATED_JITTER/],
  ["string for a number", "max_batch_size: 1000", 'max_batch_size: "1000"', /Expected integer/],
  ["JSON-style duration", "cap { seconds: 30 }", 'cap: "30s"', /Expected "\{"/],
]) {
  test(`rejects: ${name}`, () => {
    assert.ok(base.includes(from), `fixture lost "${from}"`);
    assert.match(m.protocError(base.replace(from, to)), want);
  });
}
