// The TypeScript client against every conformance scenario
// (tests/conformance/README.md): the real StaggerClient on a scripted
// grpc-js coordinator in this process, a fake clock, the contract's PRNG as
// the fallback's uniform source, and DeliveryLoop run through a recorder.
// One test per scenario; the PRNG against prng.json first.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, test } from "node:test";

import { Server, ServerCredentials, status, type ServiceError } from "@grpc/grpc-js";

import {
  CancelledError,
  DEFAULT_ATTEMPT_TIMEOUT_MS,
  DeliveryLoop,
  InvalidArgumentError,
  Outcome,
  ProtocolError,
  Reason,
  StaggerClient,
  Verdict,
  outcomeFromHttpStatus,
  parseRetryAfter,
  type AdmitRequest,
  type AttemptResult,
  type Coordinator,
  type Decision,
  type DeliveryResult,
  type LocalPolicy,
  type ReportRequest,
} from "../../../client/node/src/index";
import {
  Reason as WireReason,
  RetryCoordinatorService,
  Verdict as WireVerdict,
  type Decision as WireDecision,
  type RetryCoordinatorServer,
} from "../../../client/node/src/gen/stagger/v1/coordinator";

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const T0_MS = 1_767_225_600_000;
const DEFAULT_ENDPOINT = "https://hooks.example.com";
const TOLERANCE = 1e-6;

function root(): string {
  const r = process.env["STAGGER_SOURCE_DIR"];
  if (!r) throw new Error("set STAGGER_SOURCE_DIR to the repository's root (ctest does)");
  return path.join(r, "tests", "conformance");
}

function loadScenarios(): Json[] {
  const dir = path.join(root(), "scenarios");
  return readdirSync(dir).filter((f) => f.endsWith(".json")).sort()
    .flatMap((f) => JSON.parse(readFileSync(path.join(dir, f), "utf8")).scenarios as Json[]);
}

function splitmix(seed: number): () => number {
  const mask = (1n << 64n) - 1n;
  let state = BigInt(seed) & mask;
  return () => {
    state = (state + 0x9e3779b97f4a7c15n) & mask;
    let z = state;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask;
    z ^= z >> 31n;
    return Number(z >> 11n) / 2 ** 53;
  };
}

class FakeClock {
  t = T0_MS;
  now(): number {
    return this.t;
  }
}

// The scenario's fallback policy (seconds, snake_case) as the client's.
function policyOf(p: Json = {}): Partial<LocalPolicy> {
  const ms = (k: string) => (p[k] === undefined ? undefined : p[k] * 1000);
  const out: Json = {
    backoffBaseMs: ms("backoff_base"), backoffCapMs: ms("backoff_cap"), maxAttempts: p.max_attempts,
    initialJitterMs: ms("initial_jitter"), retryAfterMaxMs: ms("retry_after_max"),
    consecutiveFailures: p.consecutive_failures, failureRatio: p.failure_ratio, minThroughput: p.min_throughput,
    windowMs: ms("window"), openBaseMs: ms("open_base"), openMaxMs: ms("open_max"),
    halfOpenProbes: p.half_open_probes, closeAfterSuccesses: p.close_after_successes,
    probeTimeoutMs: ms("probe_timeout"), spreadMs: ms("spread"), maxKeyBytes: p.max_key_bytes,
  };
  for (const k of Object.keys(out)) if (out[k] === undefined) delete out[k];
  return out as Partial<LocalPolicy>;
}

// ---- the scripted coordinator --------------------------------------------

const seconds = (s: number) => {
  const ns = BigInt(Math.round(s * 1e9));
  return { seconds: ns / 1_000_000_000n, nanos: Number(ns % 1_000_000_000n) };
};

function toDecision(d: Json, attempt: number): WireDecision {
  const out: WireDecision = {
    verdict: WireVerdict[d.verdict as keyof typeof WireVerdict] as WireVerdict,
    reason: WireReason[d.reason as keyof typeof WireReason] as WireReason,
    attempt,
    admission: BigInt(d.admission ?? 0),
    waitSupported: d.wait_supported ?? false,
  };
  if (d.delay !== undefined) out.delay = seconds(d.delay);
  if (d.defer_for !== undefined) out.deferFor = seconds(d.defer_for);
  return out;
}

class Script {
  answers: Json[] = [];
  dead = false;
  clock = new FakeClock();
  abort = new AbortController();
  problems: string[] = [];

  // The answer to one call: a decision, or a gRPC error.
  answer(call: { on(e: "cancelled", f: () => void): void; cancelled: boolean }, attempt: number, waitS: number,
    reportFailure: boolean, cb: (e: ServiceError | null, r?: { decision: WireDecision }) => void): void {
    const fail = (code: status, details: string) =>
      cb(Object.assign(new Error(details), { code, details, metadata: undefined as never }));
    if (this.dead) return fail(status.UNAVAILABLE, "scripted: dead");
    const a = this.answers.shift();
    if (a === undefined) {
      this.problems.push(`a call beyond the script (attempt ${attempt})`);
      return fail(status.UNAVAILABLE, "scripted: beyond the script");
    }
    this.clock.t += (a.after ?? 0) * 1000;
    if (a.cancel) {
      this.abort.abort();
      if (waitS > 0) {
        if (call.cancelled) return fail(status.CANCELLED, "scripted: cancelled");
        return call.on("cancelled", () => fail(status.CANCELLED, "scripted: cancelled"));
      }
    }
    if (a.timeout) {
      this.clock.t += (waitS > 0 ? waitS + 1 : 0.05) * 1000;
      return fail(status.DEADLINE_EXCEEDED, "scripted: timeout");
    }
    if (a.error !== undefined) return fail(status[a.error as keyof typeof status] as status, a.message ?? "scripted");
    const d = a.decision;
    const bump = reportFailure && ["PROCEED", "DEFER", "GIVE_UP"].includes(d.verdict);
    cb(null, { decision: toDecision(d, attempt + (bump ? 1 : 0)) });
  }
}

const script = new Script();
const server = new Server();
let target = "";

before(async () => {
  const unimplemented = (_c: unknown, cb: (e: ServiceError) => void) =>
    cb(Object.assign(new Error("fake"), { code: status.UNIMPLEMENTED, details: "fake", metadata: undefined as never }));
  const impl: RetryCoordinatorServer = {
    admit: (call, cb) => {
      const w = call.request.wait;
      const waitS = w === undefined ? 0 : Number(w.seconds) + w.nanos / 1e9;
      script.answer(call, call.request.attempt, waitS, false, cb);
    },
    report: (call, cb) => {
      const o = call.request.outcome as number;
      const failure = o !== Outcome.SUCCESS && o !== Outcome.PERMANENT_FAILURE;
      script.answer(call, call.request.attempt, 0, failure, cb);
    },
    admitBatch: unimplemented,
    reportBatch: unimplemented,
    getEndpoint: unimplemented,
    listEndpoints: unimplemented,
  };
  server.addService(RetryCoordinatorService, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
  target = `127.0.0.1:${port}`;
});

after(() => server.forceShutdown());

// ---- a delivery, recorded -------------------------------------------------

const rel = (ms: number | undefined) => (ms === undefined ? undefined : (ms - T0_MS) / 1000);
const abs = (s: number | undefined) => (s === undefined ? undefined : T0_MS + s * 1000);
const dropUndefined = (o: Json) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

function answerOf(d: Decision): Json {
  const out: Json = { verdict: Verdict[d.verdict], reason: Reason[d.reason], source: d.source };
  if (d.verdict === Verdict.PROCEED) out.delay = d.delayMs / 1000;
  if (d.verdict === Verdict.DEFER) out.defer_for = d.deferForMs / 1000;
  return out;
}

function errorOf(e: unknown): Json {
  if (e instanceof InvalidArgumentError) return { error: "INVALID_ARGUMENT", message: e.message };
  if (e instanceof CancelledError) return { error: "CANCELLED" };
  return { error: String(e) };
}

class Recorder implements Coordinator {
  constructor(private readonly client: StaggerClient, private readonly trace: Json[]) {}

  async admit(req: AdmitRequest, signal?: AbortSignal): Promise<Decision> {
    const args = dropUndefined({
      attempt: req.attempt, wait: req.waitMs === undefined ? undefined : req.waitMs / 1000,
      deadline: rel(req.deadlineMs), first_attempt_time: rel(req.firstAttemptTimeMs),
    });
    return this.record("admit", args, () => this.client.admit(req, signal));
  }

  async report(req: ReportRequest): Promise<Decision> {
    const args = dropUndefined({
      attempt: req.attempt, outcome: Outcome[req.outcome], admission: Number(req.admission ?? 0n),
      retry_after: req.retryAfterMs === undefined ? undefined : req.retryAfterMs / 1000,
      deadline: rel(req.deadlineMs), first_attempt_time: rel(req.firstAttemptTimeMs),
    });
    return this.record("report", args, () => this.client.report(req));
  }

  private async record(kind: string, args: Json, call: () => Promise<Decision>): Promise<Decision> {
    try {
      const d = await call();
      this.trace.push([kind, args, answerOf(d)]);
      return d;
    } catch (e) {
      this.trace.push([kind, args, errorOf(e)]);
      throw e;
    }
  }
}

function endOf(r: DeliveryResult): Json {
  const out: Json = { end: r.end.toUpperCase(), attempts_made: r.attemptsMade, next_attempt: r.nextAttempt };
  if ((r.end === "gave_up" || r.end === "deferred") && r.lastDecision) out.reason = Reason[r.lastDecision.reason];
  if (r.end === "deferred") out.defer_for = (r.deferForMs ?? 0) / 1000;
  if (r.firstAttemptTimeMs !== undefined) out.first_attempt_time = rel(r.firstAttemptTimeMs);
  if (r.end === "error") {
    if (r.error instanceof InvalidArgumentError) Object.assign(out, { error: "INVALID_ARGUMENT", message: r.error.message });
    else if (r.error instanceof ProtocolError) out.error = "PROTOCOL";
    else out.error = String(r.error);
  }
  return out;
}

function sendOf(delivery: Json, trace: Json[]): { fn: (n: number, s: AbortSignal) => Promise<AttemptResult>; left: Json[] } {
  const left: Json[] = [...(delivery.sends ?? [])];
  const fn = async (n: number, signal: AbortSignal): Promise<AttemptResult> => {
    trace.push(["send", n]);
    const s = left.shift();
    if (s === undefined) throw new Error("an attempt beyond the scripted sends");
    script.clock.t += (s.takes ?? 0) * 1000;
    if (s.cancel) script.abort.abort();
    if (s.fails === "io") throw new Error("scripted: connection reset");
    if (s.fails === "timeout") return new Promise((_resolve, reject) => signal.addEventListener("abort", () => reject(signal.reason)));
    if (s.http !== undefined) {
      const h = s.retry_after_header;
      return { outcome: outcomeFromHttpStatus(s.http), retryAfterMs: h === undefined ? undefined : parseRetryAfter(h, script.clock.t) };
    }
    return { outcome: Outcome[s.outcome as keyof typeof Outcome], retryAfterMs: s.retry_after === undefined ? undefined : s.retry_after * 1000 };
  };
  return { fn, left };
}

async function runDelivery(client: StaggerClient, delivery: Json): Promise<Json[]> {
  const trace: Json[] = [];
  const o = delivery.options ?? {};
  script.abort = new AbortController();
  if (delivery.cancel_before) script.abort.abort();
  let sleeps = 0;
  const loop = new DeliveryLoop(new Recorder(client, trace), {
    deadlineMs: abs(o.deadline),
    waiting: o.waiting ?? true,
    parkLimitMs: o.park_limit === undefined ? Infinity : o.park_limit * 1000,
    ...(o.attempt_timeout !== undefined ? { attemptTimeoutMs: o.attempt_timeout * 1000 } : {}),
    signal: script.abort.signal,
    clock: script.clock,
    sleep: async (ms, signal) => {
      trace.push(["sleep", ms / 1000]);
      if (++sleeps === delivery.cancel_in_sleep) {
        script.abort.abort();
        return false;
      }
      if (signal?.aborted) return false;
      script.clock.t += ms;
      return true;
    },
  });
  const send = sendOf(delivery, trace);
  const r = await loop.run(delivery.endpoint ?? DEFAULT_ENDPOINT, send.fn, {
    nextAttempt: o.first_attempt ?? 1,
    ...(o.first_attempt_time !== undefined ? { firstAttemptTimeMs: abs(o.first_attempt_time)! } : {}),
  });
  trace.push(["end", endOf(r)]);
  assert.equal(send.left.length, 0, `${send.left.length} scripted sends not sent`);
  return trace;
}

// ---- comparison -------------------------------------------------------------

function normalize(expected: Json[]): Json[] {
  return expected.map((ev) => {
    if ((ev[0] === "admit" || ev[0] === "report") && ev[2].verdict !== undefined) {
      const a = { source: "coordinator", ...ev[2] };
      if (a.verdict === "PROCEED" && a.delay === undefined) a.delay = 0;
      return [ev[0], ev[1], a];
    }
    return ev;
  });
}

function same(want: Json, got: Json): boolean {
  if (want !== null && typeof want === "object" && !Array.isArray(want) && "range" in want && "value" in want) {
    want = want.value;
  }
  if (typeof want === "number" && typeof got === "number") return Math.abs(want - got) <= TOLERANCE;
  if (Array.isArray(want)) return Array.isArray(got) && want.length === got.length && want.every((w, i) => same(w, got[i]));
  if (want !== null && typeof want === "object") {
    if (got === null || typeof got !== "object" || Array.isArray(got)) return false;
    const wk = Object.keys(want).sort();
    const gk = Object.keys(got).sort();
    return wk.length === gk.length && wk.every((k, i) => k === gk[i] && same(want[k], got[k]));
  }
  return want === got;
}

const SCENARIOS = loadScenarios();

test("the PRNG matches prng.json", () => {
  const seeds = JSON.parse(readFileSync(path.join(root(), "prng.json"), "utf8")).seeds as Record<string, number[]>;
  for (const [seed, draws] of Object.entries(seeds)) {
    const u = splitmix(Number(seed));
    assert.deepEqual(draws.map(() => u()), draws, `seed ${seed}`);
  }
});

test("every scenario is run, and the default attempt timeout is the contract's 30 s", () => {
  const names = SCENARIOS.map((s) => s.name as string);
  assert.equal(new Set(names).size, names.length);
  assert.ok(names.length >= 60, `${names.length} scenarios`);
  assert.equal(DEFAULT_ATTEMPT_TIMEOUT_MS, 30_000);
});

for (const s of SCENARIOS) {
  test(s.name as string, async () => {
    script.clock = new FakeClock();
    script.problems = [];
    script.dead = s.coordinator === "dead";
    script.answers = script.dead ? [] : [...s.coordinator];
    const client = await StaggerClient.create({
      target, callDeadlineMs: 5000, clock: script.clock, random: splitmix(s.seed ?? 1), localPolicy: policyOf(s.policy),
    });
    try {
      assert.ok(await client.waitForCoordinator(10_000), "the scripted coordinator is reachable");
      await new Promise((r) => setTimeout(r, 20)); // the channel's watch sees READY first
      for (const [k, delivery] of (s.deliveries as Json[]).entries()) {
        const got = await runDelivery(client, delivery);
        const want = normalize(delivery.trace);
        assert.ok(same(want, got), `${s.name}, delivery ${k + 1}:\nwant ${JSON.stringify(want)}\ngot  ${JSON.stringify(got)}`);
      }
    } finally {
      client.close();
    }
    assert.deepEqual(script.problems, []);
    assert.equal(script.answers.length, 0, `${script.answers.length} scripted answers not used`);
  });
}
