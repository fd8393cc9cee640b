// deploy_manifests: renders deploy/k8s/base and every overlay under
// deploy/k8s/overlays with `kubectl kustomize` (offline), validates every
// object with kubernetes-models plus the unknown-field walk, and applies
// the structural checks of lib/manifests.js (the coordinator) and
// lib/agent_rules.js (stagger-agent; an agent's --coordinator must name a
// Service of its own output or of overlays/agent, where the coordinators
// the agent overlays point at are). Needs tests/deploy/node_modules
// (scripts/setup) and kubectl; no cluster, no network.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");
const m = require("./lib/manifests");

const kinds = (docs) => docs.map((d) => d.kind).sort();
const targets = [path.join(m.K8S, "base"), ...m.overlays()];
const rendered = new Map();
const services = (docs) => docs.filter((d) => d.kind === "Service");
const AGENT_OVERLAY_SERVICES = services(m.kustomize(path.join(m.K8S, "overlays", "agent")));

test("there are overlays, including the example and the operator one", () => {
  const names = m.overlays().map((p) => path.basename(p));
  assert.ok(names.includes("example"), names.join(","));
  assert.ok(names.includes("prometheus-operator"), names.join(","));
  assert.ok(names.includes("ha"), names.join(","));
  assert.ok(names.includes("agent"), names.join(","));
  assert.ok(names.includes("agent-sidecar"), names.join(","));
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
    assert.deepEqual(m.structuralErrors(docs, { coordinatorServices: [...services(docs), ...AGENT_OVERLAY_SERVICES] }), []);
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
  assert.equal(c.resources.limits.memory, "832Mi");
  for (const d of docs.filter((x) => x.apiVersion === "monitoring.coreos.com/v1")) {
    assert.equal(d.metadata.labels.release, "monitoring", `${d.kind} selector label`);
  }
});

test("ha overlay: base's ServiceAccount, ConfigMap and Service + StatefulSet, headless Service, PodDisruptionBudget", () => {
  const base = m.kustomize(path.join(m.K8S, "base"));
  const docs = m.kustomize(path.join(m.K8S, "overlays", "ha"));
  assert.deepEqual(kinds(docs), ["ConfigMap", "PodDisruptionBudget", "Service", "Service", "ServiceAccount", "StatefulSet"]);
  const sts = docs.find((d) => d.kind === "StatefulSet");
  // Pods stagger-0..2: the stable names clients hash keys over.
  assert.equal(sts.metadata.name, "stagger");
  assert.equal(sts.spec.replicas, 3);
  assert.equal(sts.spec.serviceName, "stagger");
  const svcNames = docs.filter((d) => d.kind === "Service").map((d) => d.metadata.name).sort();
  assert.deepEqual(svcNames, ["stagger", "staggerd"]);
  // The policies are the base's, reloaded live as there.
  const cfg = (ds) => ds.find((d) => d.kind === "ConfigMap");
  assert.deepEqual(cfg(docs), cfg(base));
  const c = sts.spec.template.spec.containers[0];
  assert.ok(c.args.includes("--state_file=/var/lib/stagger/state.snap"), c.args.join(" "));
  // The drain grace is the base's: the snapshot is saved after it.
  const baseArgs = base.find((d) => d.kind === "Deployment").spec.template.spec.containers[0].args;
  for (const a of baseArgs.filter((x) => x.startsWith("--drain_"))) assert.ok(c.args.includes(a), a);
});

test("ha overlay: the StatefulSet's pod template is the base Deployment's plus the state volume, fsGroup and spread", () => {
  const base = m.kustomize(path.join(m.K8S, "base"));
  const docs = m.kustomize(path.join(m.K8S, "overlays", "ha"));
  const dep = base.find((d) => d.kind === "Deployment");
  const sts = docs.find((d) => d.kind === "StatefulSet");
  assert.deepEqual(m.podTemplateDrift(dep, sts), []);
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
  assert.deepEqual(policy.allow_rules.map((r) => r.name), ["probes-and-health", "workers", "readers", "observers", "admins"]);
  const observers = policy.allow_rules.find((r) => r.name === "observers");
  assert.deepEqual(observers.request.paths, ["/stagger.v1.EndpointWatch/*"]);
});

test("agent overlay: the ha overlay's coordinators + a DaemonSet of agents, in the namespace stagger", () => {
  const ha = m.kustomize(path.join(m.K8S, "overlays", "ha"));
  const docs = m.kustomize(path.join(m.K8S, "overlays", "agent"));
  assert.deepEqual(kinds(docs), ["ConfigMap", "DaemonSet", "Namespace", "PodDisruptionBudget", "Service", "Service",
    "ServiceAccount", "ServiceAccount", "StatefulSet"]);
  for (const d of docs) {
    if (d.kind !== "Namespace") assert.equal(d.metadata.namespace, "stagger", `${d.kind} ${d.metadata.name} namespace`);
  }
  // The coordinators are the ha overlay's, only namespaced and with the
  // registry's image.
  const sts = (ds) => structuredClone(ds.find((d) => d.kind === "StatefulSet"));
  const a = sts(docs);
  const b = sts(ha);
  delete a.metadata.namespace;
  assert.equal(a.spec.template.spec.containers[0].image, "registry.example.com/platform/staggerd:0.1.0");
  a.spec.template.spec.containers[0].image = b.spec.template.spec.containers[0].image;
  assert.deepEqual(a, b);
  const ds = docs.find((d) => d.kind === "DaemonSet");
  const c = ds.spec.template.spec.containers[0];
  assert.equal(c.image, "registry.example.com/platform/stagger-agent:0.1.0");
  assert.equal(ds.spec.template.spec.initContainers[0].image, c.image);
  assert.ok(c.args.includes("--listen=unix:/run/stagger/agent.sock"), c.args.join(" "));
  assert.ok(c.args.includes("--coordinator=dns:///stagger.stagger.svc:50051"), c.args.join(" "));
  assert.equal(ds.spec.template.spec.volumes.find((v) => v.name === "socket").hostPath.path, "/run/stagger");
  // Its fallback decides with the coordinators' own ConfigMap.
  assert.ok(c.args.includes("--config=/etc/stagger/config.textproto"));
  assert.equal(ds.spec.template.spec.volumes.find((v) => v.name === "config").configMap.name, "staggerd-config");
});

test("agent-sidecar overlay: a worker Deployment with the agent as a native sidecar, pointing at overlays/agent's coordinators", () => {
  const docs = m.kustomize(path.join(m.K8S, "overlays", "agent-sidecar"));
  assert.deepEqual(kinds(docs), ["Deployment", "Namespace", "ServiceAccount"]);
  const pod = docs.find((d) => d.kind === "Deployment").spec.template.spec;
  const agent = pod.initContainers.find((c) => c.name === "stagger-agent");
  assert.equal(agent.restartPolicy, "Always");
  assert.equal(agent.image, "registry.example.com/platform/stagger-agent:0.1.0");
  const worker = pod.containers.find((c) => c.name === "worker");
  assert.deepEqual(worker.env, [{ name: "STAGGER_TARGET", value: "unix:/run/stagger/agent.sock" }]);
  // Without the coordinators' Services it names nothing that exists.
  assert.match(m.structuralErrors(docs).join("\n"), /no Service stagger in namespace stagger/);
});
