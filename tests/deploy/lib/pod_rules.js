// Rules shared by the coordinator's (staggerd) and the agent's
// (stagger-agent) manifest checks: reading flags and quantities, the
// config file's memory model, the container hardening every Stagger
// container gets, and the Dockerfile's USER per image. Every rule appends
// error strings through `err`, so callers can assert on what a broken
// manifest is rejected for.
"use strict";

const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const REPO = path.resolve(__dirname, "..", "..", "..");
const CONFIG_KEY = "config.textproto";
// Memory model (deploy/k8s/base/deployment.yaml): ~100 MiB process + 256 B
// per endpoint the engine may track (limits.max_endpoints) + 17 KiB per
// waiting Admit staggerd may hold (--max_waiting_calls; docs/PERFORMANCE.md,
// "Waiting calls") + 640 B per entry for a waiting Admit an agent holds
// (--max_agent_held_calls; 585 B measured). The agent's fallback engine is
// bounded by the same limit of its --config.
const BASE_MEMORY_BYTES = 100 * 1024 * 1024;
const BYTES_PER_ENDPOINT = 256;
const DEFAULT_MAX_ENDPOINTS = 1000000;
const BYTES_PER_WAITING_CALL = 17 * 1024;
const DEFAULT_MAX_WAITING_CALLS = 100000; // staggerd's --max_waiting_calls default
const BYTES_PER_AGENT_HELD_CALL = 640;
// stagger-agent's own waiting calls (17,730 B measured; --max_waiting_calls,
// default 10,000).
const AGENT_BYTES_PER_WAITING_CALL = 18 * 1024;
const AGENT_DEFAULT_MAX_WAITING_CALLS = 10000;
const DEFAULT_MAX_AGENT_HELD_CALLS = 100000; // staggerd's --max_agent_held_calls default

const byKind = (docs, kind) => docs.filter((d) => d.kind === kind);
// True when every key of the (non-empty) selector has its value in labels.
const subsetOf = (sel, labels) =>
  Object.entries(sel || {}).every(([k, v]) => labels && labels[k] === v) && Object.keys(sel || {}).length > 0;

// The value of `--name=value` in args, or undefined.
const flagValue = (args, name) => {
  const a = (args || []).find((x) => x.startsWith(`${name}=`));
  return a === undefined ? undefined : a.slice(name.length + 1);
};
// The port of a host:port flag, or 0 if the flag is absent.
const flagPort = (args, name) => {
  const v = flagValue(args, name);
  return v === undefined ? 0 : Number(v.slice(v.lastIndexOf(":") + 1));
};
// Whole seconds of a "--name=Ns" flag, NaN if absent or not in seconds.
const flagSeconds = (args, name) => {
  const m = /^([0-9]+)s$/.exec(flagValue(args, name) || "");
  return m ? Number(m[1]) : NaN;
};

// A port the pod serves to others. staggerd and stagger-agent listen on
// loopback unless told otherwise, out of reach of the pod's Services, the
// kubelet's probes and Prometheus: `flag` must be set to all of the pod's
// interfaces, 0.0.0.0:PORT (or [::]:PORT), and, when `port` is given, to
// that port.
function listenErrors(args, flag, port, who, err) {
  const v = flagValue(args, flag);
  const want = `0.0.0.0:${port === undefined ? "PORT" : port}`;
  if (v === undefined) {
    err(`${who}args lack ${flag}=${want}: the default listens on loopback only, out of reach of the pod's Services, probes and scrapes`);
    return;
  }
  const host = v.slice(0, v.lastIndexOf(":"));
  if (host !== "0.0.0.0" && host !== "[::]") {
    err(`${who}${flag}=${v} must listen on all of the pod's interfaces (${want}): other pods and the kubelet reach it on the pod's IP`);
  } else if (port !== undefined && Number(v.slice(v.lastIndexOf(":") + 1)) !== port) {
    err(`${who}${flag}=${v} must listen on port ${port}`);
  }
}

// Quantity string -> bytes ("384Mi", "1G", "500000000").
function quantityBytes(q) {
  const m = /^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(String(q));
  if (!m) return NaN;
  const mult = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 };
  return Number(m[1]) * (m[2] ? mult[m[2]] : 1);
}

const PROTOC_ARGS = ["-I", path.join(REPO, "proto"), "-I", "/usr/include", "stagger/v1/config.proto"];

// protoc --encode of a config text; returns "" or protoc's error.
function protocError(text) {
  try {
    execFileSync("protoc", ["--encode=stagger.v1.config.Config", ...PROTOC_ARGS],
      { input: text, stdio: ["pipe", "ignore", "pipe"] });
    return "";
  } catch (e) {
    return String(e.stderr || e.message).trim();
  }
}

// limits.max_endpoints of a (protoc-valid) config text, via protoc's own
// decoding so comments and layout cannot fool it.
function maxEndpoints(text) {
  const bin = execFileSync("protoc", ["--encode=stagger.v1.config.Config", ...PROTOC_ARGS], { input: text });
  const dec = execFileSync("protoc", ["--decode=stagger.v1.config.Config", ...PROTOC_ARGS], { input: bin, encoding: "utf8" });
  const m = /^\s*max_endpoints:\s*([0-9]+)/m.exec(dec);
  return m ? Number(m[1]) : DEFAULT_MAX_ENDPOINTS;
}

// --max_waiting_calls and --max_agent_held_calls of staggerd's args (their
// defaults if absent).
function maxWaitingCalls(args) {
  const v = flagValue(args, "--max_waiting_calls");
  return v === undefined ? DEFAULT_MAX_WAITING_CALLS : Number(v);
}
function agentMaxWaitingCalls(args) {
  const v = flagValue(args, "--max_waiting_calls");
  return v === undefined ? AGENT_DEFAULT_MAX_WAITING_CALLS : Number(v);
}
function maxAgentHeldCalls(args) {
  const v = flagValue(args, "--max_agent_held_calls");
  return v === undefined ? DEFAULT_MAX_AGENT_HELD_CALLS : Number(v);
}

// The memory limit must hold the process, limits.max_endpoints of
// `configText` (null: the embedded defaults), `waitingCalls` held calls and
// `agentHeld` entries for agents' held calls.
function memoryErrors(res, configText, who, err, waitingCalls = 0, agentHeld = 0,
                      bytesPerWaitingCall = BYTES_PER_WAITING_CALL) {
  const limit = res && res.limits && res.limits.memory;
  if (limit === undefined) return;
  const n = configText === null ? DEFAULT_MAX_ENDPOINTS : maxEndpoints(configText);
  const need = BASE_MEMORY_BYTES + BYTES_PER_ENDPOINT * n + bytesPerWaitingCall * waitingCalls +
    BYTES_PER_AGENT_HELD_CALL * agentHeld;
  if (!(quantityBytes(limit) >= need)) {
    const waiting = (waitingCalls > 0 ? ` and max_waiting_calls ${waitingCalls}` : "") +
      (agentHeld > 0 ? ` and max_agent_held_calls ${agentHeld}` : "");
    err(`${who}memory limit ${limit} < ${Math.ceil(need / 2 ** 20)}Mi needed for max_endpoints ${n}${waiting}`);
  }
}

// requests and limits of cpu and memory all set.
function resourceErrors(res, who, err) {
  for (const kind of ["requests", "limits"]) {
    for (const r of ["cpu", "memory"]) {
      if (!res || !res[kind] || res[kind][r] === undefined) err(`${who}resources.${kind}.${r} must be set`);
    }
  }
}

// The numeric UID of a stage's USER in deploy/Dockerfile (default: the
// last stage, the image `docker build` makes without --target).
function dockerfileUid(stage) {
  const text = fs.readFileSync(path.join(REPO, "deploy", "Dockerfile"), "utf8");
  const stages = text.split(/^(?=FROM\s)/m).filter((s) => /^FROM\s/.test(s));
  const pick = stage === undefined
    ? stages[stages.length - 1]
    : stages.find((s) => new RegExp(`^FROM\\s+\\S+\\s+AS\\s+${stage}\\s*$`, "mi").test(s.split("\n")[0]));
  const users = pick ? [...pick.matchAll(/^USER\s+([0-9]+)(?::([0-9]+))?\s*$/gm)] : [];
  return users.length ? Number(users[users.length - 1][1]) : NaN;
}

// The hardening of a Stagger container: non-root as the image's USER
// (`stage` of deploy/Dockerfile), read-only root, no privilege escalation,
// every capability dropped, RuntimeDefault seccomp. Effective values:
// the container's, else the pod's.
function hardeningErrors(pod, c, stage, who, err) {
  const csc = c.securityContext || {};
  const psc = pod.securityContext || {};
  const eff = (k) => (csc[k] !== undefined ? csc[k] : psc[k]);
  if (eff("runAsNonRoot") !== true) err(`${who}runAsNonRoot must be true`);
  const uid = eff("runAsUser");
  const want = dockerfileUid(stage);
  if (!Number.isInteger(uid) || uid <= 0) err(`${who}runAsUser must be a non-zero UID, got ${uid}`);
  else if (uid !== want) err(`${who}runAsUser ${uid} differs from deploy/Dockerfile's USER ${want}`);
  if (csc.readOnlyRootFilesystem !== true) err(`${who}readOnlyRootFilesystem must be true`);
  if (csc.allowPrivilegeEscalation !== false) err(`${who}allowPrivilegeEscalation must be false`);
  if (csc.privileged === true) err(`${who}privileged must not be true`);
  const caps = csc.capabilities || {};
  if (!(caps.drop || []).includes("ALL")) err(`${who}capabilities.drop must include ALL`);
  if ((caps.add || []).length) err(`${who}capabilities.add must be empty, got ${caps.add}`);
  const secc = eff("seccompProfile") || {};
  if (secc.type !== "RuntimeDefault") err(`${who}seccompProfile must be RuntimeDefault, got ${secc.type}`);
}

module.exports = {
  REPO, CONFIG_KEY, byKind, subsetOf, flagValue, flagPort, flagSeconds, listenErrors, quantityBytes,
  protocError, maxEndpoints, maxWaitingCalls, maxAgentHeldCalls, agentMaxWaitingCalls,
  AGENT_BYTES_PER_WAITING_CALL, memoryErrors, resourceErrors, dockerfileUid, hardeningErrors,
};
