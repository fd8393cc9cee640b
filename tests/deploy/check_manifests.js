// deploy_manifests: renders deploy/k8s/base and every overlay under
// deploy/k8s/overlays with `kubectl kustomize` (offline), validates every
// object with kubernetes-models plus the unknown-field walk, and applies
// the structural checks of lib/manifests.js. Needs tests/deploy/node_modules
// (scripts/setup) and kubectl; no cluster, no network.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const m = require("./lib/manifests");

const kinds = (docs) => docs.map((d) => d.kind).sort();
const targets = [path.join(m.K8S, "base"), ...m.overlays()];
const rendered = new Map();

test("there are overlays, including the example and the operator one", () => {
  const names = m.overlays().map((p) => path.basename(p));
  assert.ok(names.includes("example"), names.join(","));
  assert.ok(names.includes("prometheus-operator"), names.join(","));
});

for (const dir of targets) {
  const name = path.relative(m.K8S, dir);
  test(`${name}: kubectl kustomize renders`, () => {
    const docs = m.kustomize(dir);
    assert.ok(docs.length > 0);
    rendered.set(name, docs);
  });
  test(`${name}: every object validates, no unknown fields`, () => {
    const docs = rendered.get(name) || m.kustomize(dir);
    assert.deepEqual(m.schemaErrors(docs), []);
  });
  test(`${name}: structural checks`, () => {
    const docs = rendered.get(name) || m.kustomize(dir);
    assert.deepEqual(m.structuralErrors(docs), []);
  });
}

test("base: exactly ServiceAccount, ConfigMap, Service, Deployment", () => {
  const docs = m.kustomize(path.join(m.K8S, "base"));
  assert.deepEqual(kinds(docs), ["ConfigMap", "Deployment", "Service", "ServiceAccount"]);
  // The ConfigMap keeps its name: a policy edit is reloaded live.
  assert.equal(docs.find((d) => d.kind === "ConfigMap").metadata.name, "staggerd-config");
});

test("prometheus-operator overlay: base + ServiceMonitor + PrometheusRule", () => {
  const docs = m.kustomize(path.join(m.K8S, "overlays", "prometheus-operator"));
  assert.deepEqual(kinds(docs), ["ConfigMap", "Deployment", "PrometheusRule", "Service", "ServiceAccount", "ServiceMonitor"]);
});

test("example overlay: own namespace, image, policies and memory", () => {
  const base = m.kustomize(path.join(m.K8S, "base"));
  const docs = m.kustomize(path.join(m.K8S, "overlays", "example"));
  assert.deepEqual(kinds(docs), ["ConfigMap", "Deployment", "Namespace", "PrometheusRule", "Service", "ServiceAccount", "ServiceMonitor"]);
  for (const d of docs) {
    if (d.kind !== "Namespace") assert.equal(d.metadata.namespace, "stagger", `${d.kind} namespace`);
  }
  const cfg = (ds) => ds.find((d) => d.kind === "ConfigMap").data[m.CONFIG_KEY];
  assert.notEqual(cfg(docs), cfg(base), "the example replaces the base config");
  assert.match(cfg(docs), /^overrides \{\s*\n\s*prefix: "/m, "the example has a prefix override");
  assert.equal(m.maxEndpoints(cfg(docs)), 2000000);
  const c = docs.find((d) => d.kind === "Deployment").spec.template.spec.containers[0];
  assert.equal(c.image, "registry.example.com/platform/staggerd:0.1.0");
  assert.equal(c.resources.limits.memory, "640Mi");
  for (const d of docs.filter((x) => x.apiVersion === "monitoring.coreos.com/v1")) {
    assert.equal(d.metadata.labels.release, "monitoring", `${d.kind} selector label`);
  }
});

test("secure overlay: mutual TLS from a cert-manager Certificate, the policy in a ConfigMap, probes on the health port", () => {
  const docs = m.kustomize(path.join(m.K8S, "overlays", "secure"));
  assert.deepEqual(kinds(docs), ["Certificate", "ConfigMap", "ConfigMap", "Deployment", "Namespace", "Service", "ServiceAccount"]);
  const c = docs.find((d) => d.kind === "Deployment").spec.template.spec.containers[0];
  for (const flag of ["--tls_cert_file=", "--tls_key_file=", "--tls_client_ca_file=", "--authz_policy_file=", "--health_address="]) {
    assert.ok(c.args.some((a) => a.startsWith(flag)), `${flag} missing`);
  }
  assert.equal(c.readinessProbe.grpc.port, 8081);
  const cert = docs.find((d) => d.kind === "Certificate");
  assert.equal(cert.spec.secretName, "staggerd-tls");
  assert.ok(cert.spec.dnsNames.includes("staggerd.stagger.svc"));
  const authz = docs.find((d) => d.kind === "ConfigMap" && d.metadata.name === "staggerd-authz");
  const policy = JSON.parse(authz.data["authz-policy.json"]);
  assert.deepEqual(policy.allow_rules.map((r) => r.name), ["probes-and-health", "workers", "readers", "admins"]);
});
