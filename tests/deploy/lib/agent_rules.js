// Structural rules for stagger-agent in rendered manifests (the agent
// overlays under deploy/k8s/overlays): where it runs, how workers reach its
// unix socket, how it reaches the coordinators, how it is probed, and how
// it is hardened. Two shapes:
//   - a DaemonSet: one agent per node, its socket in a hostPath folder that
//     workers on the node mount (deploy/k8s/overlays/agent);
//   - a sidecar: the agent as a native sidecar (an initContainer with
//     restartPolicy: Always) in a worker's pod, the socket in an emptyDir
//     (deploy/k8s/overlays/agent-sidecar).
// agentErrors() returns error strings naming the workload and the rule.
"use strict";

const path = require("node:path");
const { describe } = require("./k8s_schema");
const {
  CONFIG_KEY, byKind, flagValue, flagPort, flagSeconds, listenErrors, protocError, memoryErrors,
  agentMaxWaitingCalls, AGENT_BYTES_PER_WAITING_CALL,
  resourceErrors, hardeningErrors,
} = require("./pod_rules");

const AGENT = "stagger-agent";
// deploy/Dockerfile's stagger-agent stage installs the probe here.
const HEALTH = "/usr/local/bin/stagger-agent-health";
// The programs that probe (deploy/stagger-agent-health) runs: the image must
// have them (check_dockerfile.js), and it runs with them alone
// (check_agent_probe.js).
const PROBE_PROGRAMS = ["sh", "head", "curl", "od", "tr"];
// The probe script's own wait for an answer (curl --max-time), seconds.
const HEALTH_WAIT_SECONDS = 2;
// After --drain_timeout the agent sends its last counts: room for that.
const FINAL_FLUSH_SECONDS = 5;
const GRPC_PORT = 50051;

// Every pod template that runs stagger-agent:
// [{ workload, pod, meta, agent, sidecar }] (sidecar: it is one of the
// pod's initContainers).
function agentPods(docs) {
  const out = [];
  for (const w of docs.filter((d) => ["Deployment", "StatefulSet", "DaemonSet"].includes(d.kind))) {
    const tpl = (w.spec && w.spec.template) || {};
    const pod = tpl.spec || {};
    const main = (pod.containers || []).find((c) => c.name === AGENT);
    const init = (pod.initContainers || []).find((c) => c.name === AGENT);
    if (main || init) out.push({ workload: w, pod, meta: tpl.metadata || {}, agent: main || init, sidecar: !main });
  }
  return out;
}

// host and port of "host:port" ([v6] forms are not used here).
function hostPort(s) {
  const i = s.lastIndexOf(":");
  return i < 0 ? null : { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
}

// The coordinator target (--coordinator) against the Services that can
// answer it: every host must be a Service (svc, svc.ns, svc.ns.svc[...]
// in the agent's namespace `ns` when not named) with that port; a
// dns:/// target must name a headless one, whose DNS answer is every ready
// replica with its own PTR name, the names the client hashes keys over (a
// cluster IP is one address: every key would go to whichever replica the
// connection lands on, and each replica would hold a share of every
// endpoint's state).
function coordinatorTargetErrors(target, ns, services, err) {
  const dns = target.startsWith("dns:///");
  const entries = (dns ? target.slice("dns:///".length) : target).split(",").map((e) => e.replace(/^[^=]*=/, ""));
  for (const e of entries) {
    const hp = hostPort(e);
    if (!hp || !hp.host || !Number.isInteger(hp.port)) { err(`--coordinator ${target}: "${e}" is not host:port`); continue; }
    const labels = hp.host.split(".");
    const svcNs = labels.length >= 2 ? labels[1] : ns;
    const svc = services.find((s) => s.metadata.name === labels[0] && (s.metadata.namespace || undefined) === (svcNs || undefined));
    if (!svc) { err(`--coordinator ${target}: no Service ${labels[0]} in namespace ${svcNs || "(none)"} among the coordinators' Services`); continue; }
    if (dns && svc.spec.clusterIP !== "None") {
      err(`--coordinator ${target}: dns:/// needs a headless Service (each replica its own address and name), ${labels[0]} has a cluster IP`);
    }
    const port = (svc.spec.ports || []).find((p) => p.port === hp.port);
    if (!port || hp.port !== GRPC_PORT || port.name !== "grpc") {
      err(`--coordinator ${target}: Service ${labels[0]} has no grpc port ${hp.port} (want ${GRPC_PORT})`);
    }
  }
}

// The groups a container runs with: its effective runAsGroup, the pod's
// fsGroup and supplementalGroups.
function groupsOf(pod, c) {
  const csc = c.securityContext || {};
  const psc = pod.securityContext || {};
  const gid = csc.runAsGroup !== undefined ? csc.runAsGroup : psc.runAsGroup;
  return [gid, psc.fsGroup, ...(psc.supplementalGroups || [])].filter(Number.isInteger);
}
const uidOf = (pod, c) => {
  const csc = c.securityContext || {};
  return csc.runAsUser !== undefined ? csc.runAsUser : (pod.securityContext || {}).runAsUser;
};

// One node's agents (DaemonSet): the hostPath folder, the root-owned
// folder handed to the agent's user, updates that never run two agents on
// one node, scraping by annotation.
function daemonSetErrors(a, sock, vol, who, err) {
  const { workload, pod, meta, agent } = a;
  const dir = path.posix.dirname(sock);
  const hp = vol.hostPath;
  if (!hp) err(`${who}the socket folder ${dir} must be a hostPath volume (workers on the node mount the same folder)`);
  else {
    if (hp.path !== dir) err(`${who}hostPath ${hp.path} must be mounted at the same path (${dir}): one path on the host, in the agent and in the workers`);
    if (!["DirectoryOrCreate", "Directory"].includes(hp.type)) err(`${who}hostPath ${hp.path} type must be DirectoryOrCreate or Directory, got ${hp.type}`);
  }
  // The kubelet creates the folder root-owned 0755; the non-root agent
  // cannot create its socket there until it is handed over.
  const uid = uidOf(pod, agent);
  const gid = groupsOf(pod, agent)[0];
  const owner = (pod.initContainers || []).find((c) => c !== agent &&
    (c.volumeMounts || []).some((m) => m.name === vol.name) &&
    new RegExp(`\\bchown ${uid}:${gid} ${dir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\b`).test((c.command || []).concat(c.args || []).join(" ")));
  if (!owner) err(`${who}no init container chowns ${dir} to the agent's ${uid}:${gid} (the kubelet creates a hostPath folder root-owned)`);
  // Root, in other init containers, only for that: CHOWN and FOWNER, nothing else.
  for (const c of pod.initContainers || []) {
    if (c === agent) continue;
    const csc = c.securityContext || {};
    if (uidOf(pod, c) !== 0) { hardeningErrors(pod, c, AGENT, `init container ${c.name} (${describe(workload)}): `, err); continue; }
    const cwho = `init container ${c.name} (${describe(workload)}) runs as root: `;
    if (c !== owner) err(`${cwho}only the socket folder's chown may`);
    const caps = csc.capabilities || {};
    if (!(caps.drop || []).includes("ALL")) err(`${cwho}capabilities.drop must include ALL`);
    const extra = (caps.add || []).filter((x) => !["CHOWN", "FOWNER"].includes(x));
    if (extra.length) err(`${cwho}capabilities.add may hold CHOWN and FOWNER only, got ${extra}`);
    if (csc.privileged === true) err(`${cwho}privileged must not be true`);
    if (csc.allowPrivilegeEscalation !== false) err(`${cwho}allowPrivilegeEscalation must be false`);
    if (csc.readOnlyRootFilesystem !== true) err(`${cwho}readOnlyRootFilesystem must be true`);
    resourceErrors(c.resources, cwho, err);
  }
  // A surge pod would find the node's socket path served by the old agent
  // and refuse to start (crash-looping until the old one is gone).
  const us = workload.spec.updateStrategy || {};
  const ru = us.rollingUpdate || {};
  if (us.type !== "RollingUpdate") err(`${who}updateStrategy must be RollingUpdate, got ${JSON.stringify(us)}`);
  if (ru.maxSurge !== undefined && String(ru.maxSurge) !== "0" && String(ru.maxSurge) !== "0%") {
    err(`${who}updateStrategy maxSurge must be 0: two agents on a node share the socket path, and the new one refuses to start while the old one serves it`);
  }
  const ann = meta.annotations || {};
  const mport = flagPort(agent.args, "--metrics_address");
  if (ann["prometheus.io/scrape"] !== "true") err(`${who}pod annotation prometheus.io/scrape must be "true"`);
  if (ann["prometheus.io/port"] !== String(mport)) err(`${who}pod annotation prometheus.io/port must be "${mport}" (--metrics_address)`);
  if (ann["prometheus.io/path"] !== "/metrics") err(`${who}pod annotation prometheus.io/path must be "/metrics"`);
}

// The agent beside workers in their pod: a native sidecar (started, and
// serving, before the workers; stopped after them), its socket in an
// emptyDir that every worker mounts and may connect to.
function sidecarErrors(a, sock, vol, who, err) {
  const { pod, agent, sidecar } = a;
  const dir = path.posix.dirname(sock);
  if (!sidecar || agent.restartPolicy !== "Always") {
    err(`${who}must be a native sidecar (an initContainer with restartPolicy: Always): it starts before the workers and stops after them`);
  }
  const sp = agent.startupProbe;
  if (!sp || !sp.exec || JSON.stringify(sp.exec.command) !== JSON.stringify([HEALTH, sock])) {
    err(`${who}needs startupProbe exec [${HEALTH}, ${sock}]: the workers start once the socket serves`);
  }
  if (!vol.emptyDir) err(`${who}the socket folder ${dir} must be an emptyDir (private to the pod)`);
  const uid = uidOf(pod, agent);
  const gid = groupsOf(pod, agent)[0];
  const workers = (pod.containers || []).filter((c) => (c.volumeMounts || []).some((m) => m.name === vol.name));
  if (!workers.length) err(`${who}no worker container mounts the socket folder (volume ${vol.name})`);
  for (const c of workers) {
    // The socket is srwxrwx--- uid:gid (the image's umask 0007).
    if (uidOf(pod, c) !== uid && !groupsOf(pod, c).includes(gid)) {
      err(`${who}container ${c.name} cannot connect to ${sock} (srwxrwx--- ${uid}:${gid}): give it group ${gid} (the pod's fsGroup or supplementalGroups)`);
    }
    for (const e of c.env || []) {
      if (typeof e.value === "string" && e.value.startsWith("unix:") && e.value !== `unix:${sock}`) {
        err(`${who}container ${c.name} env ${e.name}=${e.value} is not the agent's --listen unix:${sock}`);
      }
    }
  }
}

// The rules every agent meets, then its shape's. `services`: what its
// --coordinator may name.
function agentErrors(docs, agents, services) {
  const errors = [];
  const err = (m) => errors.push(m);
  for (const a of agents) {
    const { workload, pod, agent } = a;
    const who = `${AGENT} in ${describe(workload)}: `;
    const args = agent.args || [];
    if (agent.command) err(`${who}command must not be set: the image's entrypoint sets the socket's umask`);
    if (!/(^|\/)stagger-agent(:|@|$)/.test(agent.image || "")) err(`${who}image ${agent.image} is not the stagger-agent image (deploy/Dockerfile --target stagger-agent)`);
    if (pod.automountServiceAccountToken !== false) err(`${who}automountServiceAccountToken must be false`);

    const target = flagValue(args, "--coordinator");
    if (target === undefined) err(`${who}args lack --coordinator= (the default, 127.0.0.1:50051, is the pod itself)`);
    else coordinatorTargetErrors(target, workload.metadata.namespace, services, (m) => err(who + m));

    // The socket, on a writable volume the agent mounts.
    const listen = flagValue(args, "--listen");
    const sock = listen && listen.startsWith("unix:/") ? listen.slice("unix:".length) : null;
    let vol = null;
    if (!sock) err(`${who}--listen must be unix:/path (the workers' socket), got ${listen}`);
    else {
      const mount = (agent.volumeMounts || []).find((m) => m.mountPath === path.posix.dirname(sock));
      vol = mount && (pod.volumes || []).find((v) => v.name === mount.name);
      if (!mount || mount.readOnly || mount.subPath || !vol) err(`${who}--listen ${sock}: its folder is not a writable volume mount of the agent`);
    }

    // Probes: the health service on the socket itself (stagger-agent-health).
    const grace = pod.terminationGracePeriodSeconds;
    for (const probe of ["readinessProbe", "livenessProbe"]) {
      const p = agent[probe];
      if (!p || !p.exec || JSON.stringify(p.exec.command) !== JSON.stringify([HEALTH, sock])) {
        err(`${who}${probe} must be exec [${HEALTH}, ${sock}] (the health check on the socket workers use)`);
      } else if (!((p.timeoutSeconds || 1) > HEALTH_WAIT_SECONDS)) {
        err(`${who}${probe} timeoutSeconds must exceed the probe's own ${HEALTH_WAIT_SECONDS} s wait`);
      }
    }
    const drain = flagSeconds(args, "--drain_timeout");
    if (!Number.isInteger(drain)) err(`${who}args lack --drain_timeout=Ns`);
    else if (!(grace >= drain + FINAL_FLUSH_SECONDS)) {
      err(`${who}terminationGracePeriodSeconds ${grace} leaves no time to drain (need >= --drain_timeout ${drain} + ${FINAL_FLUSH_SECONDS})`);
    }
    // A draining agent is NOT_SERVING for up to drain + the final counts.
    const live = agent.livenessProbe || {};
    if (agent.livenessProbe && Number.isInteger(drain) && (live.periodSeconds || 10) * (live.failureThreshold || 3) < drain + FINAL_FLUSH_SECONDS) {
      err(`${who}livenessProbe would kill a draining agent: periodSeconds x failureThreshold < --drain_timeout + ${FINAL_FLUSH_SECONDS} s`);
    }

    // Metrics port, hardening, resources, the fallback's config and memory.
    const mport = flagPort(args, "--metrics_address");
    listenErrors(args, "--metrics_address", mport || undefined, who, err);
    if (!mport || !(agent.ports || []).some((p) => p.containerPort === mport)) {
      err(`${who}--metrics_address port ${mport} must be a container port`);
    }
    hardeningErrors(pod, agent, AGENT, who, err);
    resourceErrors(agent.resources, who, err);
    const config = flagValue(args, "--config");
    let configText = null;
    if (config !== undefined) {
      const mount = (agent.volumeMounts || []).find((m) => m.mountPath === path.posix.dirname(config));
      const v = mount && (pod.volumes || []).find((x) => x.name === mount.name);
      const cm = v && v.configMap && byKind(docs, "ConfigMap").find((x) => x.metadata.name === v.configMap.name);
      const key = path.posix.basename(config);
      if (!cm || !cm.data || typeof cm.data[key] !== "string" || key !== CONFIG_KEY) {
        err(`${who}--config ${config}: not the ${CONFIG_KEY} of a ConfigMap of this output mounted there`);
      } else if (mount.subPath) {
        err(`${who}--config ${config}: mount its folder, not a subPath`);
      } else {
        const perr = protocError(cm.data[key]);
        if (perr) err(`${who}--config ${config} does not parse: ${perr}`);
        else configText = cm.data[key];
      }
    }
    if (config === undefined || configText !== null) {
      memoryErrors(agent.resources, configText, who, err, agentMaxWaitingCalls(args), 0,
                   AGENT_BYTES_PER_WAITING_CALL);
    }

    if (vol) {
      if (workload.kind === "DaemonSet") daemonSetErrors(a, sock, vol, who, err);
      else sidecarErrors(a, sock, vol, who, err);
    }
  }
  return errors;
}

module.exports = { agentPods, agentErrors, coordinatorTargetErrors, HEALTH, AGENT, PROBE_PROGRAMS };
