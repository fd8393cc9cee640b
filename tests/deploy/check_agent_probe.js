// deploy_agent_probe: the agent's health probe (deploy/stagger-agent-health,
// which the agent manifests' exec probes run) and the agent image's
// entrypoint, on this machine, over unix sockets only.
//   node check_agent_probe.js [STAGGER_AGENT]
// Always: the probe, run with only the programs the image must have on
// PATH (PROBE_PROGRAMS), tells SERVING from NOT_SERVING, from a server
// without the health service and from nothing listening (fake health
// servers in Python's grpc). With a built stagger-agent: the Dockerfile's
// ENTRYPOINT starts it with the socket srwxrwx--- (its umask), the probe
// passes, a second agent on the same path refuses to start (exit 1) while
// the first serves it, and a socket left by a killed agent is replaced. Without the binary
// the check fails, saying so.
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const { spawn, spawnSync } = require("node:child_process");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { PROBE_PROGRAMS } = require("./lib/agent_rules");

const REPO = path.resolve(__dirname, "..", "..");
const PROBE = path.join(REPO, "deploy", "stagger-agent-health");
const PYTHON = "/usr/bin/python3"; // Debian's, with python3-grpcio
const WAIT_MS = 60000; // for a process to start listening, on a slow machine

const scratch = fs.mkdtempSync(path.join(os.tmpdir(), "stagger-probe-"));
process.on("exit", () => fs.rmSync(scratch, { recursive: true, force: true }));

// A PATH holding the probe's programs and nothing else.
const BIN = path.join(scratch, "bin");
fs.mkdirSync(BIN);
for (const p of PROBE_PROGRAMS) {
  const r = spawnSync("sh", ["-c", `command -v ${p}`], { encoding: "utf8" });
  assert.equal(r.status, 0, `${p} not found on this machine`);
  fs.symlinkSync(r.stdout.trim(), path.join(BIN, p));
}

// Runs the probe on `sock`: { status, stderr }.
function probe(...args) {
  const r = spawnSync(PROBE, args, { encoding: "utf8", env: { PATH: BIN }, timeout: 30000 });
  return { status: r.status, stderr: r.stderr };
}

// Starts `cmd args`, resolves once `ready` matches its output (stdout or
// stderr), with the child; rejects if it exits first or WAIT_MS passes.
function start(cmd, args, ready) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    const timer = setTimeout(() => { child.kill("SIGKILL"); reject(new Error(`${cmd}: not ready in ${WAIT_MS} ms:\n${out}`)); }, WAIT_MS);
    const onData = (d) => {
      out += d;
      if (ready.test(out)) { clearTimeout(timer); resolve(child); }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(`${cmd} exited ${code} before it was ready:\n${out}`)); });
    child.exited = new Promise((res) => child.on("exit", (code, signal) => res({ code, signal })));
  });
}

async function stop(child) {
  child.kill("SIGTERM");
  return child.exited;
}

// A grpc.health.v1.Health/Check server answering `status` (1 SERVING,
// 2 NOT_SERVING), or without the service ("none": UNIMPLEMENTED).
const FAKE = `
import sys
from concurrent import futures
import grpc
sock, status = sys.argv[1], sys.argv[2]
server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
if status != "none":
    answer = bytes([0x08, int(status)])  # HealthCheckResponse{status}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "grpc.health.v1.Health",
        {"Check": grpc.unary_unary_rpc_method_handler(lambda req, ctx: answer)}),))
server.add_insecure_port("unix:" + sock)
server.start()
print("ready", flush=True)
server.wait_for_termination()
`;

test("without a socket argument: usage, exit 2", () => {
  const r = probe();
  assert.equal(r.status, 2);
  assert.match(r.stderr, /usage: stagger-agent-health SOCKET/);
});

test("nothing listening: fails", () => {
  const r = probe(path.join(scratch, "none.sock"));
  assert.equal(r.status, 1);
  assert.match(r.stderr, /not SERVING \(answer: none\)/);
});

for (const [status, want] of [["1", 0], ["2", 1], ["none", 1]]) {
  test(`a health server answering ${{ 1: "SERVING", 2: "NOT_SERVING", none: "UNIMPLEMENTED" }[status]}: exit ${want}`, async () => {
    const sock = path.join(scratch, `fake-${status}.sock`);
    const server = await start(PYTHON, ["-c", FAKE, sock, status], /ready/);
    try {
      const r = probe(sock);
      assert.equal(r.status, want, r.stderr);
      if (status === "2") assert.match(r.stderr, /answer: 00000000020802/);
    } finally {
      server.kill("SIGKILL");
      await server.exited;
    }
  });
}

const AGENT = process.argv[2];
if (AGENT && fs.existsSync(AGENT)) {
  // The image's ENTRYPOINT (deploy/Dockerfile, stage stagger-agent), the
  // program's path replaced by the built one.
  const entrypoint = (() => {
    const text = fs.readFileSync(path.join(REPO, "deploy", "Dockerfile"), "utf8");
    const stage = text.slice(text.indexOf("AS stagger-agent"));
    const line = /^ENTRYPOINT (\[.*\])$/m.exec(stage);
    assert.ok(line, "no ENTRYPOINT in the stagger-agent stage");
    return JSON.parse(line[1]).map((a) => a.replace("/usr/local/bin/stagger-agent", AGENT));
  })();
  const agentArgs = (sock) => [...entrypoint.slice(1), `--listen=unix:${sock}`, "--coordinator=127.0.0.1:1", "--metrics_address="];
  const LISTENING = /stagger-agent: listening on unix:/;

  test("the image's entrypoint: the socket is srwxrwx---, the probe passes, SIGTERM exits 0 and the probe then fails", async () => {
    const sock = path.join(scratch, "agent.sock");
    const agent = await start(entrypoint[0], agentArgs(sock), LISTENING);
    try {
      const st = fs.statSync(sock);
      assert.ok(st.isSocket());
      assert.equal((st.mode & 0o777).toString(8), "770", "the entrypoint's umask 0007 makes the socket group-accessible only");
      const r = probe(sock);
      assert.equal(r.status, 0, r.stderr);
    } finally {
      assert.deepEqual(await stop(agent), { code: 0, signal: null });
    }
    assert.equal(probe(sock).status, 1);
  });

  test("two agents on one socket path: the second refuses to start, the first keeps serving (the DaemonSet still never surges)", async () => {
    const sock = path.join(scratch, "shared.sock");
    const first = await start(entrypoint[0], agentArgs(sock), LISTENING);
    try {
      const second = spawnSync(entrypoint[0], agentArgs(sock), { encoding: "utf8", timeout: WAIT_MS });
      assert.equal(second.status, 1, second.stderr);
      assert.match(second.stderr, /another process serves it/);
      assert.equal(probe(sock).status, 0, "the first agent still serves the path");
    } finally {
      assert.deepEqual(await stop(first), { code: 0, signal: null });
    }
    // A socket file left behind by an agent killed -9 is not in use: a new
    // agent replaces it.
    const killed = await start(entrypoint[0], agentArgs(sock), LISTENING);
    killed.kill("SIGKILL");
    await killed.exited;
    const next = await start(entrypoint[0], agentArgs(sock), LISTENING);
    assert.equal(probe(sock).status, 0);
    assert.deepEqual(await stop(next), { code: 0, signal: null });
  });
} else {
  test("a built stagger-agent is given", () => {
    assert.fail(`stagger-agent not built (${AGENT || "no path given"}): build it first (scripts/build)`);
  });
}
