// deploy_manifests_negative: proves the manifest checks of
// check_manifests.js reject broken input. Each case mutates a good
// rendering (deploy/k8s/overlays/example, which has every kind) in one way
// and expects a specific error: misspelled field names at several depths
// and in the Prometheus Operator CRDs (which kubernetes-models alone
// accepts), schema type errors, and each structural rule. One case renders
// a scratch overlay with a typo through kubectl kustomize end to end. The
// ha overlay (StatefulSet), the secure overlay and the agent overlays
// (DaemonSet, sidecar) have their own cases, from their own renderings.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const m = require("./lib/manifests");
const { validateObject } = require("./lib/k8s_schema");

const GOOD = m.kustomize(path.join(m.K8S, "overlays", "example"));
const fresh = () => structuredClone(GOOD);
const find = (docs, kind) => docs.find((d) => d.kind === kind);
const dep = (docs) => find(docs, "Deployment");
const container = (docs) => dep(docs).spec.template.spec.containers[0];
const allErrors = (docs) => [...m.schemaErrors(docs), ...m.structuralErrors(docs)];

test("control: the unmutated rendering passes", () => {
  assert.deepEqual(allErrors(fresh()), []);
});

test("control: arbitrary keys in maps are accepted", () => {
  const docs = fresh();
  dep(docs).metadata.labels["team.example/owner"] = "payments";
  dep(docs).spec.template.metadata.annotations["any/annotation"] = "x";
  find(docs, "ConfigMap").data["another.file"] = "text";
  container(docs).resources.limits["ephemeral-storage"] = "1Gi";
  assert.deepEqual(m.schemaErrors(docs), []);
});

const cases = [
  // --- misspelled field names (kubernetes-models alone accepts these) ---
  ["misspelled spec field", (d) => { dep(d).spec.replica = 1; }, /Deployment .*unknown field \/spec\/replica$/],
  ["misspelled container field", (d) => { container(d).readinesProbe = { grpc: { port: 50051 } }; }, /unknown field \/spec\/template\/spec\/containers\/0\/readinesProbe$/],
  ["misspelled securityContext field", (d) => { container(d).securityContext.runAsNonRot = true; }, /unknown field .*securityContext\/runAsNonRot$/],
  ["misspelled probe field", (d) => { container(d).livenessProbe.periodSecond = 5; }, /unknown field .*livenessProbe\/periodSecond$/],
  ["misspelled metadata field", (d) => { find(d, "Service").metadata.lables = { a: "b" }; }, /Service .*unknown field \/metadata\/lables$/],
  ["misspelled Service port field", (d) => { find(d, "Service").spec.ports[0].appProtocl = "grpc"; }, /unknown field \/spec\/ports\/0\/appProtocl$/],
  ["misspelled ConfigMap field", (d) => { find(d, "ConfigMap").dat = {}; }, /ConfigMap .*unknown field \/dat$/],
  ["misspelled ServiceMonitor field (CRD)", (d) => { find(d, "ServiceMonitor").spec.endpoints[0].intervall = "15s"; }, /ServiceMonitor .*unknown field \/spec\/endpoints\/0\/intervall$/],
  ["misspelled PrometheusRule field (CRD)", (d) => { find(d, "PrometheusRule").spec.groups[1].rules[0].anotations = {}; }, /PrometheusRule .*unknown field \/spec\/groups\/1\/rules\/0\/anotations$/],
  // --- schema errors ---
  ["wrong type", (d) => { dep(d).spec.replicas = "one"; }, /schema: .*\/spec\/replicas must be integer/],
  ["missing required field", (d) => { delete dep(d).spec.selector; }, /schema: .*\/spec must have required property '?selector'?/],
  ["unknown kind", (d) => { find(d, "Service").kind = "Servce"; }, /no schema for v1 Servce/],
  // --- structural rules ---
  ["two replicas", (d) => { dep(d).spec.replicas = 2; }, /replicas must be 1/],
  ["rollout may stop the old pod first", (d) => { dep(d).spec.strategy.rollingUpdate.maxUnavailable = 1; }, /maxSurge 1 maxUnavailable 0/],
  ["Recreate strategy", (d) => { dep(d).spec.strategy = { type: "Recreate" }; }, /strategy must be RollingUpdate/],
  ["no grace period", (d) => { delete dep(d).spec.template.spec.terminationGracePeriodSeconds; }, /terminationGracePeriodSeconds must be set/],
  ["httpGet readiness probe", (d) => { container(d).readinessProbe = { httpGet: { port: 9464, path: "/metrics" } }; }, /readinessProbe must be a native grpc probe/],
  ["grpc probe on the metrics port", (d) => { container(d).livenessProbe.grpc.port = 9464; }, /livenessProbe.grpc.port must be 50051/],
  ["liveness kills a draining pod", (d) => { container(d).livenessProbe.failureThreshold = 1; }, /livenessProbe would kill a draining pod/],
  ["root filesystem writable", (d) => { container(d).securityContext.readOnlyRootFilesystem = false; }, /readOnlyRootFilesystem must be true/],
  ["privilege escalation allowed", (d) => { delete container(d).securityContext.allowPrivilegeEscalation; }, /allowPrivilegeEscalation must be false/],
  ["capabilities not dropped", (d) => { container(d).securityContext.capabilities = { drop: ["NET_RAW"] }; }, /capabilities.drop must include ALL/],
  ["capability added", (d) => { container(d).securityContext.capabilities.add = ["NET_ADMIN"]; }, /capabilities.add must be empty/],
  ["runs as root", (d) => { container(d).securityContext.runAsUser = 0; }, /runAsUser must be a non-zero UID/],
  ["UID differs from the image", (d) => { container(d).securityContext.runAsUser = 1000; }, /differs from deploy\/Dockerfile's USER/],
  ["runAsNonRoot off", (d) => { container(d).securityContext.runAsNonRoot = false; }, /runAsNonRoot must be true/],
  ["no seccomp profile", (d) => { delete container(d).securityContext.seccompProfile; delete dep(d).spec.template.spec.securityContext.seccompProfile; }, /seccompProfile must be RuntimeDefault/],
  ["no memory limit", (d) => { delete container(d).resources.limits.memory; }, /resources.limits.memory must be set/],
  ["memory too small for max_endpoints", (d) => { container(d).resources.limits.memory = "384Mi"; }, /memory limit 384Mi < 816Mi needed for max_endpoints 2000000 and max_waiting_calls 10000 and max_agent_held_calls 100000/],
  ["memory too small for max_waiting_calls", (d) => { const a = container(d).args; a[a.indexOf("--max_waiting_calls=10000")] = "--max_waiting_calls=20000"; }, /memory limit 832Mi < 982Mi needed for max_endpoints 2000000 and max_waiting_calls 20000 and max_agent_held_calls 100000/],
  ["no --max_waiting_calls: staggerd's default needs its memory", (d) => { const a = container(d).args; a.splice(a.indexOf("--max_waiting_calls=10000"), 1); }, /memory limit 832Mi < \d+Mi needed for max_endpoints 2000000 and max_waiting_calls 100000/],
  ["memory too small for max_agent_held_calls", (d) => { container(d).args.push("--max_agent_held_calls=1000000"); }, /memory limit 832Mi < 1365Mi needed for max_endpoints 2000000 and max_waiting_calls 10000 and max_agent_held_calls 1000000/],
  ["config mounted with subPath", (d) => { Object.assign(container(d).volumeMounts[0], { subPath: "config.textproto" }); }, /mounted as a directory, not with subPath/],
  ["wrong --config path", (d) => { container(d).args = container(d).args.map((a) => a.replace("config.textproto", "config.json")); }, /args lack --config=\/etc\/stagger\/config.textproto/],
  ["config file typo", (d) => { const cm = find(d, "ConfigMap"); cm.data["config.textproto"] = cm.data["config.textproto"].replace("max_attempts:", "max_attempt:"); }, /config.textproto does not parse: .*no field named "max_attempt"/],
  ["ConfigMap not in the output", (d) => { dep(d).spec.template.spec.volumes[0].configMap.name = "other"; }, /is not a ConfigMap of this output/],
  ["gRPC on the default, loopback", (d) => { container(d).args = container(d).args.filter((a) => !a.startsWith("--address=")); }, /staggerd args lack --address=0.0.0.0:50051: the default listens on loopback only/],
  ["metrics on loopback", (d) => { container(d).args = container(d).args.map((a) => a.replace("--metrics_address=0.0.0.0:9464", "--metrics_address=127.0.0.1:9464")); }, /--metrics_address=127.0.0.1:9464 must listen on all of the pod's interfaces \(0.0.0.0:9464\)/],
  ["gRPC on another port than its container port", (d) => { container(d).args = container(d).args.map((a) => a.replace("--address=0.0.0.0:50051", "--address=0.0.0.0:50052")); }, /--address=0.0.0.0:50052 must listen on port 50051/],
  ["unnamed gRPC port", (d) => { find(d, "Service").spec.ports[0].name = "port-0"; }, /Service port grpc must be 50051/],
  ["gRPC port without appProtocol", (d) => { delete find(d, "Service").spec.ports[0].appProtocol; }, /appProtocol grpc/],
  ["Service selects nothing", (d) => { find(d, "Service").spec.selector = { app: "other" }; }, /Service selector does not match/],
  ["container port renamed", (d) => { container(d).ports[1].name = "prom"; }, /container port metrics must be 9464/],
  ["double scrape", (d) => { dep(d).spec.template.metadata.annotations["prometheus.io/scrape"] = "true"; }, /no double scrape/],
  ["ServiceMonitor on the wrong port", (d) => { find(d, "ServiceMonitor").spec.endpoints[0].port = "grpc"; }, /ServiceMonitor endpoints must scrape port metrics/],
  ["ServiceMonitor job label", (d) => { delete find(d, "ServiceMonitor").spec.jobLabel; }, /jobLabel must give job="staggerd"/],
  ["PrometheusRule drifted from rules.yml", (d) => { find(d, "PrometheusRule").spec.groups[1].rules[0].for = "1m"; }, /PrometheusRule groups differ/],
  ["token mounted", (d) => { dep(d).spec.template.spec.automountServiceAccountToken = true; }, /automountServiceAccountToken must be false/],
];

for (const [name, mutate, want] of cases) {
  test(`rejects: ${name}`, () => {
    const docs = fresh();
    mutate(docs);
    const errors = allErrors(docs);
    assert.ok(errors.some((e) => want.test(e)), `no error matching ${want}; got:\n  ${errors.join("\n  ") || "(none)"}`);
  });
}

// The ha overlay (StatefulSet, headless Service, PodDisruptionBudget): its
// own rules, each broken once.
const GOOD_HA = m.kustomize(path.join(m.K8S, "overlays", "ha"));
const BASE_DEPLOYMENT = find(m.kustomize(path.join(m.K8S, "base")), "Deployment");
const sts = (docs) => find(docs, "StatefulSet");
const stsPod = (docs) => sts(docs).spec.template.spec;
const stsContainer = (docs) => stsPod(docs).containers[0];
const headless = (docs) => docs.find((d) => d.kind === "Service" && d.spec.clusterIP === "None");
const haErrors = (docs) => [...allErrors(docs), ...m.podTemplateDrift(BASE_DEPLOYMENT, sts(docs))];

test("control: the unmutated ha rendering passes", () => {
  assert.deepEqual(haErrors(structuredClone(GOOD_HA)), []);
});

const haCases = [
  ["one replica", (d) => { sts(d).spec.replicas = 1; }, /StatefulSet replicas must be >= 3/],
  ["OnDelete updates", (d) => { sts(d).spec.updateStrategy = { type: "OnDelete" }; }, /updateStrategy must be RollingUpdate/],
  ["a partition holds the update", (d) => { sts(d).spec.updateStrategy.rollingUpdate = { partition: 2 }; }, /partition must be 0/],
  ["two pods at a time", (d) => { sts(d).spec.updateStrategy.rollingUpdate = { maxUnavailable: 2 }; }, /one pod at a time/],
  ["governing Service missing", (d) => { sts(d).spec.serviceName = "other"; }, /serviceName other is not a Service/],
  ["governing Service not headless", (d) => { delete headless(d).spec.clusterIP; }, /must be headless|want exactly 1 Service with a cluster IP/],
  ["draining pods published", (d) => { headless(d).spec.publishNotReadyAddresses = true; }, /must not publish unready/],
  ["no PodDisruptionBudget", (d) => { d.splice(d.indexOf(find(d, "PodDisruptionBudget")), 1); }, /want exactly 1 PodDisruptionBudget, got 0/],
  ["budget allows two down", (d) => { find(d, "PodDisruptionBudget").spec.maxUnavailable = 2; }, /maxUnavailable must be 1/],
  ["budget selects nothing", (d) => { find(d, "PodDisruptionBudget").spec.selector.matchLabels = { app: "x" }; }, /PodDisruptionBudget does not select the pods/],
  ["no spread over nodes", (d) => { delete stsPod(d).topologySpreadConstraints; }, /spread across nodes/],
  ["spread only preferred", (d) => { stsPod(d).topologySpreadConstraints[0].whenUnsatisfiable = "ScheduleAnyway"; }, /maxSkew 1, DoNotSchedule/],
  ["no --state_file", (d) => { stsContainer(d).args = stsContainer(d).args.filter((a) => !a.startsWith("--state_file=")); }, /lack --state_file=/],
  ["no save interval", (d) => { stsContainer(d).args = stsContainer(d).args.filter((a) => !a.startsWith("--state_save_interval=")); }, /lack --state_save_interval=/],
  ["state file on the read-only root", (d) => { stsContainer(d).args = stsContainer(d).args.map((a) => a.replace("/var/lib/stagger/", "/tmp/")); }, /not on a writable volume mount/],
  ["state file on the config mount", (d) => { stsContainer(d).args = stsContainer(d).args.map((a) => a.replace("/var/lib/stagger/", "/etc/stagger/")); }, /not on a writable volume mount/],
  ["state volume too small", (d) => { sts(d).spec.volumeClaimTemplates[0].spec.resources.requests.storage = "10Mi"; }, /must hold >= 256Mi, got 10Mi/],
  ["state volume not persistent or emptyDir", (d) => { delete sts(d).spec.volumeClaimTemplates; stsPod(d).volumes.push({ name: "state", hostPath: { path: "/x" } }); }, /must be a volumeClaimTemplate or an emptyDir/],
  ["fsGroup missing", (d) => { delete stsPod(d).securityContext.fsGroup; }, /fsGroup must be 65532/],
  ["pod template drifted from the base", (d) => { stsContainer(d).readinessProbe.periodSeconds = 10; }, /readinessProbe\/periodSeconds: Deployment 2, StatefulSet 10/],
  ["drain grace differs from the base", (d) => { stsContainer(d).args = stsContainer(d).args.map((a) => a.replace("--drain_grace=5s", "--drain_grace=0s")); }, /containers\/0\/args/],
  ["no startup probe", (d) => { delete stsContainer(d).startupProbe; }, /needs a grpc startupProbe/],
  ["startup probe too short for the load", (d) => { stsContainer(d).startupProbe.failureThreshold = 5; }, /allow >= 60 s/],
  ["no time for the final save", (d) => { stsPod(d).terminationGracePeriodSeconds = 30; }, /leaves no time for the final snapshot \(need >= 40\)/],
  ["misspelled StatefulSet field", (d) => { sts(d).spec.serviceNme = "stagger"; }, /StatefulSet .*unknown field \/spec\/serviceNme$/],
  ["misspelled PodDisruptionBudget field", (d) => { find(d, "PodDisruptionBudget").spec.maxUnavailabe = 1; }, /PodDisruptionBudget .*unknown field \/spec\/maxUnavailabe$/],
];

for (const [name, mutate, want] of haCases) {
  test(`rejects (ha): ${name}`, () => {
    const docs = structuredClone(GOOD_HA);
    mutate(docs);
    const errors = haErrors(docs);
    assert.ok(errors.some((e) => want.test(e)), `no error matching ${want}; got:\n  ${errors.join("\n  ") || "(none)"}`);
  });
}

test("rejects: a typo added by an overlay patch, rendered by kubectl kustomize", () => {
  const dir = m.scratchKustomization((dir) => ({
    "kustomization.yaml": [
      "apiVersion: kustomize.config.k8s.io/v1beta1",
      "kind: Kustomization",
      "resources:",
      `  - ${path.relative(dir, path.join(m.K8S, "base"))}`,
      "patches:",
      "  - path: typo.yaml",
      "",
    ].join("\n"),
    "typo.yaml": [
      "apiVersion: apps/v1",
      "kind: Deployment",
      "metadata:",
      "  name: staggerd",
      "spec:",
      "  template:",
      "    spec:",
      "      containers:",
      "        - name: staggerd",
      "          securityContext:",
      "            readOnlyRootFilesytem: true",
      "",
    ].join("\n"),
  }));
  try {
    const docs = m.kustomize(dir);
    const d = dep(docs);
    // kustomize merged the typo in verbatim ...
    assert.equal(d.spec.template.spec.containers[0].securityContext.readOnlyRootFilesytem, true);
    // ... kubernetes-models alone accepts it ...
    assert.doesNotThrow(() => new (require("kubernetes-models/apps/v1/Deployment").Deployment)(d).validate());
    // ... and the unknown-field walk does not.
    assert.deepEqual(validateObject(d).errors, ["unknown field /spec/template/spec/containers/0/securityContext/readOnlyRootFilesytem"]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

// The secure overlay (mutual TLS, policy, health port, cert-manager): its
// own rules, each proved by one mutation of its rendering.
const SECURE = m.kustomize(path.join(m.K8S, "overlays", "secure"));
const secureCases = [
  ["control", () => {}, null],
  ["probes on the TLS port", (d) => { container(d).readinessProbe.grpc.port = 50051; }, /readinessProbe.grpc.port must be 8081/],
  ["mutual TLS without a health port", (d) => {
    const c = container(d);
    c.args = c.args.filter((a) => !a.startsWith("--health_address="));
  }, /grpc probes need --health_address/],
  ["the health port on loopback", (d) => {
    const c = container(d);
    c.args = c.args.map((a) => (a.startsWith("--health_address=") ? "--health_address=127.0.0.1:8081" : a));
  }, /--health_address=127.0.0.1:8081 must listen on all of the pod's interfaces/],
  ["a policy without client certificates", (d) => {
    const c = container(d);
    c.args = c.args.filter((a) => !a.startsWith("--tls_client_ca_file="));
  }, /--authz_policy_file needs --tls_client_ca_file/],
  ["the Secret mounted with subPath", (d) => {
    container(d).volumeMounts.find((v) => v.name === "tls").subPath = "tls.crt";
  }, /\/etc\/stagger-tls must be mounted as a directory/],
  ["no Certificate writes the Secret", (d) => { find(d, "Certificate").spec.secretName = "other"; }, /Secret staggerd-tls is written by no Certificate/],
  ["no fsGroup for the Secret", (d) => { delete dep(d).spec.template.spec.securityContext.fsGroup; }, /needs the pod's fsGroup/],
  ["the policy file missing from its ConfigMap", (d) => {
    const cm = d.find((x) => x.kind === "ConfigMap" && x.metadata.name === "staggerd-authz");
    cm.data = { "policy.json": "{}" };
  }, /ConfigMap staggerd-authz has no authz-policy.json/],
  ["misspelled Certificate field (CRD)", (d) => { find(d, "Certificate").spec.dnsName = ["x"]; }, /Certificate .*unknown field \/spec\/dnsName$/],
];
for (const [name, mutate, want] of secureCases) {
  test(`secure overlay ${want ? "rejects" : "passes"}: ${name}`, () => {
    const docs = structuredClone(SECURE);
    mutate(docs);
    const errors = allErrors(docs);
    if (!want) assert.deepEqual(errors, []);
    else assert.ok(errors.some((e) => want.test(e)), `no error matching ${want}; got:\n  ${errors.join("\n  ") || "(none)"}`);
  });
}

// The agent overlays: the DaemonSet (overlays/agent, with the ha
// coordinators) and the sidecar (overlays/agent-sidecar, whose
// --coordinator names overlays/agent's Service). Each rule broken once.
const GOOD_AGENT = m.kustomize(path.join(m.K8S, "overlays", "agent"));
const GOOD_SIDECAR = m.kustomize(path.join(m.K8S, "overlays", "agent-sidecar"));
const COORDINATOR_SERVICES = GOOD_AGENT.filter((d) => d.kind === "Service");
const ds = (docs) => find(docs, "DaemonSet");
const dsPod = (docs) => ds(docs).spec.template.spec;
const dsAgent = (docs) => dsPod(docs).containers[0];
const socketDir = (docs) => dsPod(docs).initContainers[0];
const volume = (pod, name) => pod.volumes.find((v) => v.name === name);
const scPod = (docs) => dep(docs).spec.template.spec;
const scAgent = (docs) => scPod(docs).initContainers.find((c) => c.name === "stagger-agent");
const worker = (docs) => scPod(docs).containers.find((c) => c.name === "worker");
const withoutArg = (c, flag) => { c.args = c.args.filter((a) => !a.startsWith(`${flag}=`)); };
const setArg = (c, flag, value) => { c.args = c.args.map((a) => (a.startsWith(`${flag}=`) ? `${flag}=${value}` : a)); };
const agentErrors = (docs) => [...m.schemaErrors(docs), ...m.structuralErrors(docs, { coordinatorServices: COORDINATOR_SERVICES })];

test("control: the unmutated agent renderings pass", () => {
  assert.deepEqual(agentErrors(structuredClone(GOOD_AGENT)), []);
  assert.deepEqual(agentErrors(structuredClone(GOOD_SIDECAR)), []);
});

const agentCases = [
  // --- what reaches the coordinators ---
  ["--coordinator missing", (d) => withoutArg(dsAgent(d), "--coordinator"), /args lack --coordinator=/],
  ["--coordinator names no Service", (d) => setArg(dsAgent(d), "--coordinator", "dns:///stagger-headless.stagger.svc:50051"), /no Service stagger-headless in namespace stagger/],
  ["--coordinator in another namespace", (d) => setArg(dsAgent(d), "--coordinator", "dns:///stagger.default.svc:50051"), /no Service stagger in namespace default/],
  ["dns:/// to the cluster-IP Service", (d) => setArg(dsAgent(d), "--coordinator", "dns:///staggerd.stagger.svc:50051"), /dns:\/\/\/ needs a headless Service/],
  ["--coordinator on the metrics port", (d) => setArg(dsAgent(d), "--coordinator", "dns:///stagger.stagger.svc:9464"), /has no grpc port 9464/],
  // --- the socket ---
  ["socket folder not a hostPath", (d) => { volume(dsPod(d), "socket").hostPath = undefined; volume(dsPod(d), "socket").emptyDir = {}; }, /must be a hostPath volume/],
  ["hostPath at another path", (d) => { volume(dsPod(d), "socket").hostPath.path = "/var/run/agent"; }, /must be mounted at the same path/],
  ["hostPath of any type", (d) => { delete volume(dsPod(d), "socket").hostPath.type; }, /type must be DirectoryOrCreate or Directory/],
  ["--listen on TCP", (d) => setArg(dsAgent(d), "--listen", "0.0.0.0:50052"), /--listen must be unix:\/path/],
  ["socket outside the mounted folder", (d) => setArg(dsAgent(d), "--listen", "unix:/tmp/agent.sock"), /--listen \/tmp\/agent.sock: its folder is not a writable volume mount/],
  ["socket folder mounted read-only", (d) => { dsAgent(d).volumeMounts[0].readOnly = true; }, /its folder is not a writable volume mount/],
  ["no chown of the host folder", (d) => { dsPod(d).initContainers = []; }, /no init container chowns \/run\/stagger to the agent's 65532:65532/],
  ["socket mode from a command override", (d) => { dsAgent(d).command = ["/usr/local/bin/stagger-agent"]; }, /command must not be set/],
  ["surge update: two agents on one socket", (d) => { ds(d).spec.updateStrategy.rollingUpdate = { maxSurge: 1, maxUnavailable: 0 }; }, /maxSurge must be 0/],
  ["OnDelete updates", (d) => { ds(d).spec.updateStrategy = { type: "OnDelete" }; }, /updateStrategy must be RollingUpdate/],
  // --- probes ---
  ["TCP probe on the metrics port", (d) => { dsAgent(d).livenessProbe = { tcpSocket: { port: 9465 } }; }, /livenessProbe must be exec \[\/usr\/local\/bin\/stagger-agent-health, \/run\/stagger\/agent.sock\]/],
  ["probe on another socket", (d) => { dsAgent(d).readinessProbe.exec.command[1] = "/run/agent.sock"; }, /readinessProbe must be exec/],
  ["probe timeout within the script's wait", (d) => { dsAgent(d).readinessProbe.timeoutSeconds = 1; }, /timeoutSeconds must exceed the probe's own 2 s wait/],
  ["liveness kills a draining agent", (d) => { dsAgent(d).livenessProbe.periodSeconds = 2; dsAgent(d).livenessProbe.failureThreshold = 2; }, /livenessProbe would kill a draining agent/],
  ["grace shorter than the drain", (d) => { dsPod(d).terminationGracePeriodSeconds = 5; }, /leaves no time to drain \(need >= --drain_timeout 5 \+ 5\)/],
  // --- hardening and resources ---
  ["agent runs as root", (d) => { dsAgent(d).securityContext.runAsUser = 0; }, /stagger-agent in DaemonSet stagger\/stagger-agent: runAsUser must be a non-zero UID/],
  ["agent runAsNonRoot off", (d) => { dsAgent(d).securityContext.runAsNonRoot = false; }, /stagger-agent in .*runAsNonRoot must be true/],
  ["agent root filesystem writable", (d) => { dsAgent(d).securityContext.readOnlyRootFilesystem = false; }, /stagger-agent in .*readOnlyRootFilesystem must be true/],
  ["agent UID differs from its image", (d) => { dsAgent(d).securityContext.runAsUser = 1000; }, /runAsUser 1000 differs from deploy\/Dockerfile's USER 65532/],
  ["root init container with more capabilities", (d) => { socketDir(d).securityContext.capabilities.add.push("SYS_ADMIN"); }, /init container socket-dir .*runs as root: capabilities.add may hold CHOWN and FOWNER only, got SYS_ADMIN/],
  ["privileged root init container", (d) => { socketDir(d).securityContext.privileged = true; }, /runs as root: privileged must not be true/],
  ["a second root init container", (d) => { const c = structuredClone(socketDir(d)); c.name = "tweak"; c.command = ["/bin/sh", "-c", "sysctl -w x=1"]; dsPod(d).initContainers.push(c); }, /init container tweak .*runs as root: only the socket folder's chown may/],
  ["no memory limit", (d) => { delete dsAgent(d).resources.limits.memory; }, /stagger-agent in .*resources.limits.memory must be set/],
  ["memory too small for the fallback's max_endpoints", (d) => { dsAgent(d).resources.limits.memory = "128Mi"; }, /memory limit 128Mi < 380Mi needed for max_endpoints 1000000 and max_waiting_calls 2000/],
  ["agent memory too small for its default max_waiting_calls", (d) => { const a = dsAgent(d).args; a.splice(a.indexOf("--max_waiting_calls=2000"), 1); }, /memory limit 384Mi < \d+Mi needed for max_endpoints 1000000 and max_waiting_calls 10000/],
  ["--config not mounted", (d) => setArg(dsAgent(d), "--config", "/etc/agent/config.textproto"), /--config \/etc\/agent\/config.textproto: not the config.textproto of a ConfigMap/],
  ["staggerd's image for the agent", (d) => { dsAgent(d).image = "registry.example.com/platform/staggerd:0.1.0"; }, /is not the stagger-agent image/],
  ["token mounted", (d) => { dsPod(d).automountServiceAccountToken = true; }, /stagger-agent in .*automountServiceAccountToken must be false/],
  // --- metrics ---
  ["agent metrics on the default, loopback", (d) => withoutArg(dsAgent(d), "--metrics_address"), /stagger-agent in DaemonSet stagger\/stagger-agent: args lack --metrics_address=0.0.0.0:PORT: the default listens on loopback only/],
  ["agent metrics on loopback", (d) => setArg(dsAgent(d), "--metrics_address", "127.0.0.1:9465"), /--metrics_address=127.0.0.1:9465 must listen on all of the pod's interfaces/],
  ["metrics port not a container port", (d) => setArg(dsAgent(d), "--metrics_address", "0.0.0.0:9999"), /--metrics_address port 9999 must be a container port/],
  ["scrape annotation on the coordinators' port", (d) => { ds(d).spec.template.metadata.annotations["prometheus.io/port"] = "9464"; }, /prometheus.io\/port must be "9465"/],
  // --- workloads ---
  ["a workload that runs neither", (d) => { dsAgent(d).name = "agent"; }, /DaemonSet stagger\/stagger-agent runs neither staggerd .* nor stagger-agent/],
  ["misspelled DaemonSet field", (d) => { ds(d).spec.updateStrategy.rollingUpdate.maxSurg = 0; }, /DaemonSet .*unknown field \/spec\/updateStrategy\/rollingUpdate\/maxSurg$/],
];
for (const [name, mutate, want] of agentCases) {
  test(`rejects (agent): ${name}`, () => {
    const docs = structuredClone(GOOD_AGENT);
    mutate(docs);
    const errors = agentErrors(docs);
    assert.ok(errors.some((e) => want.test(e)), `no error matching ${want}; got:\n  ${errors.join("\n  ") || "(none)"}`);
  });
}

const sidecarCases = [
  ["an ordinary container, not a native sidecar", (d) => {
    const a = scAgent(d);
    scPod(d).initContainers = scPod(d).initContainers.filter((c) => c !== a);
    delete a.restartPolicy;
    scPod(d).containers.push(a);
  }, /must be a native sidecar \(an initContainer with restartPolicy: Always\)/],
  ["an init container that never ends", (d) => { delete scAgent(d).restartPolicy; }, /must be a native sidecar/],
  ["no startup probe: the worker may start first", (d) => { delete scAgent(d).startupProbe; }, /needs startupProbe exec/],
  ["socket folder on the host", (d) => { const v = volume(scPod(d), "stagger-socket"); delete v.emptyDir; v.hostPath = { path: "/run/stagger", type: "DirectoryOrCreate" }; }, /must be an emptyDir \(private to the pod\)/],
  ["worker without the socket folder", (d) => { worker(d).volumeMounts = []; }, /no worker container mounts the socket folder/],
  ["worker not in the socket's group", (d) => { delete scPod(d).securityContext.fsGroup; }, /container worker cannot connect to \/run\/stagger\/agent.sock \(srwxrwx--- 65532:65532\): give it group 65532/],
  ["worker targets another socket", (d) => { worker(d).env[0].value = "unix:/var/run/stagger.sock"; }, /env STAGGER_TARGET=unix:\/var\/run\/stagger.sock is not the agent's --listen/],
  ["--coordinator missing", (d) => withoutArg(scAgent(d), "--coordinator"), /args lack --coordinator=/],
  ["--coordinator without its namespace", (d) => setArg(scAgent(d), "--coordinator", "dns:///stagger:50051"), /no Service stagger in namespace deliveries/],
  ["agent runs as root", (d) => { scAgent(d).securityContext.runAsUser = 0; }, /stagger-agent in Deployment deliveries\/webhook-worker: runAsUser must be a non-zero UID/],
  ["misspelled sidecar field", (d) => { scAgent(d).restartPolicyy = "Always"; }, /unknown field \/spec\/template\/spec\/initContainers\/0\/restartPolicyy$/],
];
for (const [name, mutate, want] of sidecarCases) {
  test(`rejects (agent sidecar): ${name}`, () => {
    const docs = structuredClone(GOOD_SIDECAR);
    mutate(docs);
    const errors = agentErrors(docs);
    assert.ok(errors.some((e) => want.test(e)), `no error matching ${want}; got:\n  ${errors.join("\n  ") || "(none)"}`);
  });
}
