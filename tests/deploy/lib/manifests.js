// Rendering deploy/k8s with `kubectl kustomize` (offline, no cluster) and
// the checks on the rendered objects that matter for Stagger: the schema
// and unknown-field check of lib/k8s_schema.js, and structural rules (one
// replica, surge-first rollout, native gRPC probes, restrictive
// securityContext, config mounted as a directory, memory sized for
// limits.max_endpoints, named ports, Prometheus wiring) for the
// coordinator; stagger-agent's rules are lib/agent_rules.js, the rules both
// share lib/pod_rules.js. Every check returns a list of error strings so
// that tests can assert on what a broken manifest is rejected for.
"use strict";

const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { isDeepStrictEqual } = require("node:util");
const yaml = require("js-yaml");
const { validateObject, describe } = require("./k8s_schema");

const {
  REPO, CONFIG_KEY, byKind, subsetOf, flagValue, flagPort, listenErrors, quantityBytes, protocError,
  maxEndpoints, maxWaitingCalls, maxAgentHeldCalls, memoryErrors, resourceErrors, dockerfileUid, hardeningErrors,
} = require("./pod_rules");
const { agentPods, agentErrors } = require("./agent_rules");

const K8S = path.join(REPO, "deploy", "k8s");
const CONFIG_DIR = "/etc/stagger";
const GRPC_PORT = 50051;
const METRICS_PORT = 9464;

function kustomize(dir) {
  const out = execFileSync("kubectl", ["kustomize", dir], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  return yaml.loadAll(out).filter((d) => d !== null);
}

// Overlay folders under deploy/k8s/overlays (every one is rendered).
function overlays() {
  const root = path.join(K8S, "overlays");
  return fs
    .readdirSync(root)
    .filter((d) => fs.existsSync(path.join(root, d, "kustomization.yaml")))
    .sort()
    .map((d) => path.join(root, d));
}

// Schema + unknown-field errors of every object, prefixed with its name.
function schemaErrors(docs) {
  const errors = [];
  for (const o of docs) {
    const r = validateObject(o);
    for (const e of r.errors) errors.push(`${describe(o)}: ${e}`);
    for (const p of r.freeForm) errors.push(`${describe(o)}: free-form object at ${p} (fields not checkable)`);
    for (const p of r.unvisited) errors.push(`${describe(o)}: ${p} not reached by the validator`);
  }
  return errors;
}

// TLS and authorization wiring (deploy/k8s/overlays/secure): the flags
// staggerd would refuse to start with, the health port the probes need,
// and every TLS or policy file on a whole-directory mount of a Secret or
// ConfigMap of this output (subPath would never see a renewal).
function securityErrors(docs, pod, c, cports) {
  const errors = [];
  const err = (m) => errors.push(m);
  const args = c.args || [];
  const mtls = flagValue(args, "--tls_client_ca_file") !== undefined;
  if (flagValue(args, "--authz_policy_file") !== undefined && !mtls) {
    err("--authz_policy_file needs --tls_client_ca_file (staggerd refuses to start without client certificates)");
  }
  const health = flagPort(args, "--health_address");
  if (mtls && !health) err("with mutual TLS the kubelet's grpc probes need --health_address (they cannot do TLS)");
  if (health && cports.health !== health) err(`--health_address port ${health} must be the container port named health`);
  for (const flag of ["--tls_cert_file", "--tls_key_file", "--tls_client_ca_file", "--authz_policy_file"]) {
    const file = flagValue(args, flag);
    if (file === undefined) continue;
    const dir = path.posix.dirname(file);
    const mount = (c.volumeMounts || []).find((m) => m.mountPath === dir);
    if (!mount) { err(`${flag}=${file}: no volumeMount at ${dir}`); continue; }
    if (mount.subPath || mount.subPathExpr) err(`${dir} must be mounted as a directory, not with subPath`);
    const vol = (pod.volumes || []).find((v) => v.name === mount.name) || {};
    if (vol.secret) {
      const certs = byKind(docs, "Certificate");
      if (certs.length && !certs.some((x) => x.spec.secretName === vol.secret.secretName)) {
        err(`Secret ${vol.secret.secretName} is written by no Certificate of this output`);
      }
      if (!Number.isInteger((pod.securityContext || {}).fsGroup)) err("a Secret volume needs the pod's fsGroup so staggerd (non-root) can read it");
    } else if (vol.configMap) {
      const cm = byKind(docs, "ConfigMap").find((x) => x.metadata.name === vol.configMap.name);
      const key = path.posix.basename(file);
      if (!cm || !cm.data || typeof cm.data[key] !== "string") err(`${flag}=${file}: ConfigMap ${vol.configMap.name} has no ${key}`);
    } else {
      err(`${flag}=${file}: ${dir} is neither a Secret nor a ConfigMap volume`);
    }
  }
  return errors;
}

// The single-replica Deployment (deploy/k8s/base): one process holds all
// endpoint state; the rollout starts the new pod before it stops the old.
function deploymentErrors(d, err) {
  const spec = d.spec || {};
  if (spec.replicas !== 1) err(`Deployment replicas must be 1 (state is per process), got ${spec.replicas}`);
  const st = spec.strategy || {};
  const ru = st.rollingUpdate || {};
  if (st.type !== "RollingUpdate" || String(ru.maxSurge) !== "1" || String(ru.maxUnavailable) !== "0") {
    err(`strategy must be RollingUpdate maxSurge 1 maxUnavailable 0, got ${JSON.stringify(st)}`);
  }
}

// The sharded StatefulSet (deploy/k8s/overlays/ha): stable pod names behind
// a headless Service, updated one pod at a time, a disruption budget of one,
// spread over nodes, each replica's snapshot on its own volume.
function statefulSetErrors(s, docs, err) {
  const spec = s.spec || {};
  const pod = (spec.template && spec.template.spec) || {};
  const labels = (spec.template && spec.template.metadata && spec.template.metadata.labels) || {};
  if (!Number.isInteger(spec.replicas) || spec.replicas < 3) err(`StatefulSet replicas must be >= 3, got ${spec.replicas}`);
  const us = spec.updateStrategy || {};
  if (us.type !== "RollingUpdate") err(`StatefulSet updateStrategy must be RollingUpdate, got ${JSON.stringify(us)}`);
  const ru = us.rollingUpdate || {};
  if (ru.partition) err(`StatefulSet rollingUpdate.partition must be 0, got ${ru.partition}`);
  if (ru.maxUnavailable !== undefined && String(ru.maxUnavailable) !== "1") err("StatefulSet updates must replace one pod at a time (maxUnavailable 1)");
  const headless = byKind(docs, "Service").find((x) => x.metadata.name === spec.serviceName);
  if (!headless) err(`StatefulSet serviceName ${spec.serviceName} is not a Service of this output`);
  else {
    if (headless.spec.clusterIP !== "None") err(`Service ${spec.serviceName} must be headless (clusterIP None)`);
    if (headless.spec.publishNotReadyAddresses) err(`headless Service ${spec.serviceName} must not publish unready (draining) pods`);
    if (!subsetOf(headless.spec.selector, labels)) err(`headless Service ${spec.serviceName} does not select the pods`);
    const hp = (headless.spec.ports || []).find((p) => p.name === "grpc");
    if (!hp || hp.port !== GRPC_PORT) err(`headless Service ${spec.serviceName} needs port grpc ${GRPC_PORT}`);
  }
  const pdbs = byKind(docs, "PodDisruptionBudget");
  if (pdbs.length !== 1) err(`want exactly 1 PodDisruptionBudget, got ${pdbs.length}`);
  else {
    const pdb = pdbs[0].spec || {};
    if (!subsetOf(pdb.selector && pdb.selector.matchLabels, labels)) err("PodDisruptionBudget does not select the pods");
    if (String(pdb.maxUnavailable) !== "1") err(`PodDisruptionBudget maxUnavailable must be 1, got ${pdb.maxUnavailable}`);
  }
  const spread = (pod.topologySpreadConstraints || []).find((t) => t.topologyKey === "kubernetes.io/hostname");
  if (!spread) err("pods must be spread across nodes (topologySpreadConstraints on kubernetes.io/hostname)");
  else if (spread.maxSkew !== 1 || spread.whenUnsatisfiable !== "DoNotSchedule" || !subsetOf(spread.labelSelector && spread.labelSelector.matchLabels, labels)) {
    err("the node spread must be maxSkew 1, DoNotSchedule, selecting the pods");
  }
  const c = (pod.containers || []).find((x) => x.name === "staggerd") || {};
  const arg = (c.args || []).find((a) => a.startsWith("--state_file="));
  if (!arg) err("staggerd args lack --state_file=");
  else {
    const file = arg.slice("--state_file=".length);
    const mount = (c.volumeMounts || []).find((m) => file.startsWith(`${m.mountPath}/`));
    if (!mount || mount.readOnly) err(`--state_file ${file} is not on a writable volume mount`);
    else {
      const claim = (spec.volumeClaimTemplates || []).find((v) => v.metadata.name === mount.name);
      const vol = (pod.volumes || []).find((v) => v.name === mount.name);
      const size = claim ? claim.spec.resources.requests.storage : vol && vol.emptyDir && vol.emptyDir.sizeLimit;
      if (!claim && !(vol && vol.emptyDir)) err(`state volume ${mount.name} must be a volumeClaimTemplate or an emptyDir`);
      else if (!(quantityBytes(size) >= 256 * 2 ** 20)) err(`state volume ${mount.name} must hold >= 256Mi, got ${size}`);
    }
    if (!(c.args || []).some((a) => a.startsWith("--state_save_interval="))) err("staggerd args lack --state_save_interval=");
  }
  if (pod.securityContext && pod.securityContext.fsGroup !== 65532) err("pod securityContext.fsGroup must be 65532 (state volume writable)");
  // The snapshot loads before the first answer: liveness must wait for it.
  const sp = c.startupProbe;
  if (!sp || !sp.grpc || sp.grpc.port !== GRPC_PORT) err("staggerd needs a grpc startupProbe (the snapshot loads before serving)");
  else if ((sp.periodSeconds || 10) * (sp.failureThreshold || 3) < 60) err("startupProbe must allow >= 60 s for the snapshot to load");
  // The final save comes after the drain: grace >= drain grace + drain
  // timeout + 20 s for the save.
  const secs = (name) => {
    const a = (c.args || []).find((x) => x.startsWith(`--${name}=`));
    const m = a && /^([0-9]+)s$/.exec(a.split("=")[1]);
    return m ? Number(m[1]) : NaN;
  };
  const need = secs("drain_grace") + secs("drain_timeout") + 20;
  if (!(pod.terminationGracePeriodSeconds >= need)) err(`terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} leaves no time for the final snapshot (need >= ${need})`);
}

// Structural checks on one rendered output. Returns error strings. An
// output holds the coordinator (one Deployment or StatefulSet running
// staggerd), stagger-agents (a DaemonSet, or workers' pods with the agent
// beside them: lib/agent_rules.js), or both; every workload is one of
// these. `options.coordinatorServices`: the Services an agent's
// --coordinator may name (default: this output's own).
function structuralErrors(docs, options = {}) {
  const errors = [];
  const err = (m) => errors.push(m);
  const podOf = (w) => (w.spec && w.spec.template && w.spec.template.spec) || {};
  const workloads = ["Deployment", "StatefulSet", "DaemonSet"].flatMap((k) => byKind(docs, k));
  const coordinators = workloads.filter((w) => w.kind !== "DaemonSet" && (podOf(w).containers || []).some((c) => c.name === "staggerd"));
  const agents = agentPods(docs);
  for (const w of workloads) {
    if (!coordinators.includes(w) && !agents.some((a) => a.workload === w)) {
      err(`${describe(w)} runs neither staggerd (a Deployment or StatefulSet) nor stagger-agent`);
    }
  }
  if (coordinators.length + agents.length === 0) err("no staggerd or stagger-agent workload in this output");
  if (coordinators.length > 1) err(`want at most 1 staggerd Deployment or StatefulSet, got ${coordinators.length}`);
  if (coordinators.length === 1) errors.push(...coordinatorErrors(docs, coordinators[0]));
  if (agents.length) {
    errors.push(...agentErrors(docs, agents, options.coordinatorServices || byKind(docs, "Service")));
  }
  return errors;
}

// The coordinator's workload `d` (staggerd) and what serves it: Services,
// config, probes, hardening, memory, scraping.
function coordinatorErrors(docs, d) {
  const errors = [];
  const err = (m) => errors.push(m);
  const spec = d.spec || {};
  const pod = (spec.template && spec.template.spec) || {};
  const tmeta = (spec.template && spec.template.metadata) || {};
  if (d.kind === "Deployment") deploymentErrors(d, err);
  else statefulSetErrors(d, docs, err);
  if (!subsetOf(spec.selector && spec.selector.matchLabels, tmeta.labels)) {
    err(`${d.kind} selector does not match the pod template labels`);
  }
  const grace = pod.terminationGracePeriodSeconds;
  if (!Number.isInteger(grace) || grace < 10) err(`terminationGracePeriodSeconds must be set (>= 10 s), got ${grace}`);
  if (pod.automountServiceAccountToken !== false) err("automountServiceAccountToken must be false");

  const cs = pod.containers || [];
  const c = cs.find((x) => x.name === "staggerd");
  const args = c.args || [];
  if (!args.includes(`--config=${CONFIG_DIR}/${CONFIG_KEY}`)) err(`staggerd args lack --config=${CONFIG_DIR}/${CONFIG_KEY}`);
  const cports = Object.fromEntries((c.ports || []).map((p) => [p.name, p.containerPort]));
  if (cports.grpc !== GRPC_PORT) err(`container port grpc must be ${GRPC_PORT}, got ${cports.grpc}`);
  if (cports.metrics !== METRICS_PORT) err(`container port metrics must be ${METRICS_PORT}, got ${cports.metrics}`);
  // Every port the pod serves listens beyond loopback, on its container port.
  listenErrors(args, "--address", GRPC_PORT, "staggerd ", err);
  listenErrors(args, "--metrics_address", METRICS_PORT, "staggerd ", err);
  if (flagValue(args, "--health_address") !== undefined) listenErrors(args, "--health_address", undefined, "staggerd ", err);

  // Native gRPC probes against the health service: on the gRPC port, or
  // on --health_address's port when there is one (the kubelet's probes
  // cannot do TLS, so mutual TLS needs it).
  errors.push(...securityErrors(docs, pod, c, cports));
  const probePort = flagPort(args, "--health_address") || GRPC_PORT;
  for (const probe of ["readinessProbe", "livenessProbe"]) {
    const p = c[probe];
    if (!p || !p.grpc) { err(`${probe} must be a native grpc probe`); continue; }
    if (p.grpc.port !== probePort) err(`${probe}.grpc.port must be ${probePort}, got ${p.grpc.port}`);
    if (p.httpGet || p.exec || p.tcpSocket) err(`${probe} must use grpc only`);
  }
  const live = c.livenessProbe || {};
  if (c.livenessProbe && (live.periodSeconds || 10) * (live.failureThreshold || 3) < grace) {
    err("livenessProbe would kill a draining pod: periodSeconds x failureThreshold < terminationGracePeriodSeconds");
  }

  hardeningErrors(pod, c, undefined, "", err);

  // Resources, and memory sized for limits.max_endpoints.
  const res = c.resources || {};
  resourceErrors(res, "", err);

  // The config directory: a whole ConfigMap volume (no subPath, which
  // would never see updates), holding config.textproto.
  const mount = (c.volumeMounts || []).find((m) => m.mountPath === CONFIG_DIR);
  if (!mount) err(`no volumeMount at ${CONFIG_DIR}`);
  else {
    if (mount.subPath || mount.subPathExpr) err(`${CONFIG_DIR} must be mounted as a directory, not with subPath`);
    const vol = (pod.volumes || []).find((v) => v.name === mount.name);
    const cmName = vol && vol.configMap && vol.configMap.name;
    const cm = byKind(docs, "ConfigMap").find((x) => x.metadata.name === cmName);
    if (!cm) err(`volume ${mount.name} is not a ConfigMap of this output (${cmName})`);
    else if (!cm.data || typeof cm.data[CONFIG_KEY] !== "string") err(`ConfigMap ${cmName} has no ${CONFIG_KEY}`);
    else if (vol.configMap.items) err(`ConfigMap volume must not select items (config must be ${CONFIG_KEY})`);
    else {
      const perr = protocError(cm.data[CONFIG_KEY]);
      if (perr) err(`ConfigMap ${cmName} ${CONFIG_KEY} does not parse: ${perr}`);
      else memoryErrors(res, cm.data[CONFIG_KEY], "", err, maxWaitingCalls(args), maxAgentHeldCalls(args));
    }
  }

  // Annotation-based scraping (on, or switched off by the operator component).
  const ann = tmeta.annotations || {};
  if (!["true", "false"].includes(ann["prometheus.io/scrape"])) err('pod annotation prometheus.io/scrape must be "true" or "false"');
  if (ann["prometheus.io/port"] !== String(METRICS_PORT)) err(`pod annotation prometheus.io/port must be "${METRICS_PORT}"`);
  if (ann["prometheus.io/path"] !== "/metrics") err('pod annotation prometheus.io/path must be "/metrics"');

  // Service: named ports, selecting the pod.
  // The Service workers and staggerctl dial (a headless one is the
  // StatefulSet's, checked above).
  const svcs = byKind(docs, "Service").filter((x) => x.spec.clusterIP !== "None");
  if (svcs.length !== 1) err(`want exactly 1 Service with a cluster IP, got ${svcs.length}`);
  const svc = svcs[0];
  if (svc) {
    if (!subsetOf(svc.spec.selector, tmeta.labels)) err("Service selector does not match the pod labels");
    const sp = Object.fromEntries((svc.spec.ports || []).map((p) => [p.name, p]));
    if (!sp.grpc || sp.grpc.port !== GRPC_PORT || sp.grpc.appProtocol !== "grpc") err(`Service port grpc must be ${GRPC_PORT} with appProtocol grpc`);
    if (!sp.metrics || sp.metrics.port !== METRICS_PORT) err(`Service port metrics must be ${METRICS_PORT}`);
    for (const p of Object.values(sp)) {
      if (p.targetPort !== p.name && p.targetPort !== cports[p.name]) err(`Service port ${p.name} targets ${p.targetPort}, not the container port`);
    }
  }

  // Prometheus Operator objects, when the component is in.
  for (const sm of byKind(docs, "ServiceMonitor")) {
    if (!svc || !subsetOf(sm.spec.selector && sm.spec.selector.matchLabels, svc.metadata.labels)) err("ServiceMonitor does not select the Service");
    const eps = sm.spec.endpoints || [];
    if (!eps.length || !eps.every((e) => e.port === "metrics" && e.path === "/metrics")) err("ServiceMonitor endpoints must scrape port metrics, path /metrics");
    // The rules select job="staggerd".
    if (!svc || !sm.spec.jobLabel || svc.metadata.labels[sm.spec.jobLabel] !== "staggerd") err('ServiceMonitor jobLabel must give job="staggerd"');
    if (ann["prometheus.io/scrape"] !== "false") err("with a ServiceMonitor, the pod's prometheus.io/scrape must be \"false\" (no double scrape)");
  }
  if (byKind(docs, "ServiceMonitor").length === 0 && ann["prometheus.io/scrape"] !== "true") {
    err('without a ServiceMonitor, prometheus.io/scrape must be "true"');
  }
  const rulesFile = path.join(REPO, "deploy", "prometheus", "rules.yml");
  const rules = yaml.load(fs.readFileSync(rulesFile, "utf8"));
  for (const pr of byKind(docs, "PrometheusRule")) {
    if (!isDeepStrictEqual(pr.spec.groups, rules.groups)) err("PrometheusRule groups differ from deploy/prometheus/rules.yml");
  }
  return errors;
}

// How the ha StatefulSet's pod template differs from the base Deployment's
// beyond what it must add (the state flags and volume, fsGroup, the spread,
// and time for the snapshot: a startup probe, a longer termination grace
// with liveness to match): a list of differences, empty when the two
// templates agree.
const STATE_ARGS = /^--state_(file|save_interval)=/;
function podTemplateDrift(deployment, statefulSet) {
  const strip = (tpl) => {
    const t = structuredClone(tpl);
    const pod = t.spec;
    delete pod.topologySpreadConstraints;
    delete pod.terminationGracePeriodSeconds;
    if (pod.securityContext) {
      delete pod.securityContext.fsGroup;
      delete pod.securityContext.fsGroupChangePolicy;
    }
    for (const c of pod.containers || []) {
      c.args = (c.args || []).filter((a) => !STATE_ARGS.test(a));
      c.volumeMounts = (c.volumeMounts || []).filter((m) => m.name !== "state");
      delete c.startupProbe;
      if (c.livenessProbe) delete c.livenessProbe.failureThreshold;
    }
    pod.volumes = (pod.volumes || []).filter((v) => v.name !== "state");
    return t;
  };
  const a = strip(deployment.spec.template);
  const b = strip(statefulSet.spec.template);
  const diffs = [];
  const walk = (x, y, at) => {
    if (isDeepStrictEqual(x, y)) return;
    if (x && y && typeof x === "object" && typeof y === "object" && Array.isArray(x) === Array.isArray(y)) {
      for (const k of new Set([...Object.keys(x), ...Object.keys(y)])) walk(x[k], y[k], `${at}/${k}`);
      return;
    }
    diffs.push(`${at}: Deployment ${JSON.stringify(x)}, StatefulSet ${JSON.stringify(y)}`);
  };
  walk(a, b, "/spec/template");
  return diffs;
}

// A scratch kustomization in a new temporary folder. `files(dir)` returns
// { name: contents } (it gets the folder because kustomize takes bases by
// relative path only). Returns the folder; the caller removes it.
function scratchKustomization(files) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stagger-kustomize-"));
  for (const [name, text] of Object.entries(files(dir))) fs.writeFileSync(path.join(dir, name), text);
  return dir;
}

module.exports = {
  REPO, K8S, kustomize, overlays, schemaErrors, structuralErrors, protocError,
  maxEndpoints, quantityBytes, dockerfileUid, scratchKustomization, CONFIG_KEY,
  podTemplateDrift,
};
