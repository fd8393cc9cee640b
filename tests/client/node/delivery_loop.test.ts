// DeliveryLoop against a scripted coordinator on a fake clock: the ask ->
// wait -> send -> report order, admission tokens echoed, waiting admission
// (after a DEFER; after a backoff only with wait_supported), parking, the
// attempt timeout, cancellation, and how each run ends.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  DeliveryLoop,
  InvalidArgumentError,
  LOCAL_ADMISSION,
  Outcome,
  Reason,
  Verdict,
  type AttemptFn,
  type Decision,
  type DeliveryEvent,
} from "../../../client/node/src/index";
import { decision, FakeClock, ScriptedCoordinator } from "./helpers";

const EP = "https://hooks.example.com";
const ok: AttemptFn = async () => ({ outcome: Outcome.SUCCESS });
const fails: AttemptFn = async () => ({ outcome: Outcome.RETRYABLE_FAILURE });
const proceed = (p: Partial<Decision> = {}) => decision({ verdict: Verdict.PROCEED, ...p });
const done = decision({ verdict: Verdict.DONE, reason: Reason.SUCCEEDED });
const defer = (ms: number, p = {}) =>
  decision({ verdict: Verdict.DEFER, reason: Reason.CIRCUIT_OPEN, deferForMs: ms, ...p });

function loop(c: ScriptedCoordinator, clock: FakeClock, extra = {}) {
  return new DeliveryLoop(c, { clock, sleep: clock.sleep, ...extra });
}

test("first attempt: waits the delay, sends, reports with the Admit's admission token", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([proceed({ delayMs: 30, admission: 0xfedcba9876543210n }), done]);
  const sent: number[] = [];
  const r = await loop(c, clock, { deadlineMs: clock.t + 60_000 }).run(EP, async (n) => {
    sent.push(n);
    return { outcome: Outcome.SUCCESS };
  });
  assert.equal(r.end, "succeeded");
  assert.equal(r.attemptsMade, 1);
  assert.deepEqual(sent, [1]);
  assert.deepEqual(clock.slept, [30]);
  assert.equal(r.firstAttemptTimeMs, 1_767_225_600_030);
  const report = c.calls[1]!;
  assert.equal(report.call, "report");
  assert.equal(report.req.admission, 0xfedcba9876543210n);
  assert.equal(report.req.attempt, 1);
  assert.equal(report.req.deadlineMs, clock.t - 30 + 60_000);
  assert.match(r.message, /delivered to https:\/\/hooks.example.com on attempt 1/);
});

test("a locally admitted attempt reports admission 1; each attempt echoes its own token", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([
    proceed({ source: "local", admission: LOCAL_ADMISSION }),
    proceed({ delayMs: 100, attempt: 2 }),
    proceed({ admission: 42n, attempt: 2 }),
    done,
  ]);
  let n = 0;
  const r = await loop(c, clock).run(EP, async () => ({ outcome: ++n === 1 ? Outcome.TIMEOUT : Outcome.SUCCESS }));
  assert.equal(r.end, "succeeded");
  const reports = c.calls.filter((x) => x.call === "report").map((x) => x.req.admission);
  assert.deepEqual(reports, [1n, 42n]);
});

test("backoff without wait_supported: sleeps the delay, then asks without waiting", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([proceed(), proceed({ delayMs: 500, attempt: 2 }), proceed({ attempt: 2 }), done]);
  let n = 0;
  await loop(c, clock).run(EP, async () => ({ outcome: ++n === 1 ? Outcome.RETRYABLE_FAILURE : Outcome.SUCCESS }));
  assert.deepEqual(clock.slept, [0, 500, 0]);
  const admit2 = c.calls[2]!;
  assert.equal(admit2.call, "admit");
  assert.equal(admit2.req.attempt, 2);
  assert.equal("waitMs" in admit2.req ? admit2.req.waitMs : undefined, undefined);
});

test("backoff with wait_supported: Admit(attempt + 1, wait = delay) at once, no sleep", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([
    proceed(),
    proceed({ delayMs: 500, attempt: 2, waitSupported: true }),
    proceed({ reason: Reason.RELEASED, attempt: 2 }),
    done,
  ]);
  const events: DeliveryEvent[] = [];
  let n = 0;
  const r = await loop(c, clock, { onDecision: (e: DeliveryEvent) => events.push(e) }).run(EP, async () => ({
    outcome: ++n === 1 ? Outcome.RETRYABLE_FAILURE : Outcome.SUCCESS,
  }));
  assert.equal(r.end, "succeeded");
  assert.deepEqual(clock.slept, [0, 0]); // the two Admits' zero delays only
  const admit2 = c.calls[2]!;
  assert.equal(admit2.call, "admit");
  assert.equal(admit2.req.attempt, 2);
  assert.equal((admit2.req as { waitMs?: number }).waitMs, 500);
  assert.equal(events[2]!.waitMs, 500);
});

test("backoff: the wait is clamped to 60 s; local answers and waiting off never wait", async () => {
  for (const [p, extra, wantWait] of [
    [{ delayMs: 90_000, waitSupported: true }, {}, 60_000],
    [{ delayMs: 500, waitSupported: false, source: "local" as const }, {}, undefined],
    [{ delayMs: 500, waitSupported: true }, { waiting: false }, undefined],
  ] as const) {
    const clock = new FakeClock();
    const c = new ScriptedCoordinator([proceed(), proceed({ attempt: 2, ...p }), proceed({ attempt: 2 }), done]);
    let n = 0;
    await loop(c, clock, extra).run(EP, async () => ({ outcome: ++n === 1 ? Outcome.TIMEOUT : Outcome.SUCCESS }));
    assert.equal((c.calls[2]!.req as { waitMs?: number }).waitMs, wantWait, JSON.stringify(p));
    assert.equal(clock.slept.includes(p.delayMs!), wantWait === undefined, JSON.stringify(p));
  }
});

test("DEFER: re-asks the same attempt with wait = its defer time (clamped to 60 s)", async () => {
  for (const [deferFor, wantWait] of [
    [5_000, 5_000],
    [300_000, 60_000],
  ] as const) {
    const clock = new FakeClock();
    const c = new ScriptedCoordinator([defer(deferFor), proceed({ reason: Reason.RELEASED }), done]);
    const r = await loop(c, clock).run(EP, ok);
    assert.equal(r.end, "succeeded");
    assert.deepEqual(
      c.calls.map((x) => [x.call, x.req.attempt, (x.req as { waitMs?: number }).waitMs]),
      [["admit", 1, undefined], ["admit", 1, wantWait], ["report", 1, undefined]],
    );
  }
});

test("a waiting call answered DEFER parks the delivery: two calls, never a hot loop", async () => {
  const clock = new FakeClock();
  // An old server answers a waiting Admit at once, DEFER again.
  const c = new ScriptedCoordinator([defer(5_000), defer(4_990, { reason: Reason.PACED })]);
  const r = await loop(c, clock).run(EP, ok);
  assert.equal(r.end, "deferred");
  assert.equal(c.calls.length, 2);
  assert.equal(r.deferForMs, 4_990);
  assert.equal(r.nextAttempt, 1);
  assert.equal(r.attemptsMade, 0);
  assert.match(r.message, /attempt 1 may go in 4\.99s: PACED/);
});

test("a DEFER to a failure report re-asks attempt + 1; a DEFER to its waiting call parks", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([proceed(), defer(2_000, { attempt: 2 }), defer(1_000, { attempt: 2 })]);
  const r = await loop(c, clock).run(EP, fails);
  assert.equal(r.end, "deferred");
  assert.equal(r.nextAttempt, 2);
  assert.equal(r.attemptsMade, 1);
  assert.deepEqual(c.calls.map((x) => [x.call, x.req.attempt]), [["admit", 1], ["report", 1], ["admit", 2]]);
});

test("waiting off: a DEFER parks at once", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([defer(5_000)]);
  const r = await loop(c, clock, { waiting: false }).run(EP, ok);
  assert.equal(r.end, "deferred");
  assert.equal(c.calls.length, 1);
});

test("GIVE_UP: the run ends gave_up, saying at which attempt, why, and who decided", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([
    proceed(),
    decision({ verdict: Verdict.GIVE_UP, reason: Reason.ATTEMPTS_EXHAUSTED, attempt: 2, replica: "stagger-1" }),
  ]);
  const r = await loop(c, clock).run(EP, fails);
  assert.equal(r.end, "gave_up");
  assert.equal(r.nextAttempt, 2);
  assert.equal(r.lastDecision?.reason, Reason.ATTEMPTS_EXHAUSTED);
  assert.equal(
    r.message,
    "gave up on https://hooks.example.com at attempt 2: ATTEMPTS_EXHAUSTED (the attempt limit is reached), decided by the coordinator (stagger-1)",
  );
  const local = new ScriptedCoordinator([
    decision({ verdict: Verdict.GIVE_UP, reason: Reason.DEADLINE, source: "local",
               fallbackCause: { code: "UNAVAILABLE", message: "coordinator: connect failed" } }),
  ]);
  const r2 = await loop(local, clock).run(EP, ok);
  assert.match(r2.message, /DEADLINE \(.*\), decided locally \(UNAVAILABLE: coordinator: connect failed\)$/);
});

test("an attempt that hangs is cut off at the attempt timeout and reported TIMEOUT", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([proceed(), proceed({ attempt: 2 }), proceed({ attempt: 2 }), done]);
  let aborted = false;
  let n = 0;
  const r = await loop(c, clock, { attemptTimeoutMs: 20 }).run(EP, (attempt, signal) => {
    if (++n > 1) return Promise.resolve({ outcome: Outcome.SUCCESS });
    signal.addEventListener("abort", () => (aborted = true));
    return new Promise(() => {}); // never settles
  });
  assert.equal(r.end, "succeeded");
  assert.ok(aborted, "the hung attempt's signal fired");
  const first = c.calls[1]!;
  assert.equal(first.call, "report");
  assert.equal((first.req as { outcome: Outcome }).outcome, Outcome.TIMEOUT);
});

test("an attempt that throws is reported RETRYABLE_FAILURE, with the error in the event", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([proceed(), decision({ verdict: Verdict.GIVE_UP, reason: Reason.DEADLINE })]);
  const events: DeliveryEvent[] = [];
  await loop(c, clock, { onDecision: (e: DeliveryEvent) => events.push(e) }).run(EP, async () => {
    throw new Error("ECONNREFUSED");
  });
  assert.equal((c.calls[1]!.req as { outcome: Outcome }).outcome, Outcome.RETRYABLE_FAILURE);
  assert.equal((events[1]!.attemptError as Error).message, "ECONNREFUSED");
});

test("the Retry-After an attempt saw is reported", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([proceed(), decision({ verdict: Verdict.GIVE_UP, reason: Reason.DEADLINE })]);
  await loop(c, clock).run(EP, async () => ({ outcome: Outcome.RATE_LIMITED, retryAfterMs: 7_000 }));
  assert.equal((c.calls[1]!.req as { retryAfterMs?: number }).retryAfterMs, 7_000);
});

test("cancellation: during a wait ends the run at once; before the run, nothing is sent", async () => {
  const ac = new AbortController();
  const c = new ScriptedCoordinator([proceed({ delayMs: 10_000 })]);
  const hangingSleep = (_ms: number, signal?: AbortSignal) =>
    new Promise<boolean>((resolve) => signal?.addEventListener("abort", () => resolve(false)));
  const sent: number[] = [];
  const run = new DeliveryLoop(c, { signal: ac.signal, sleep: hangingSleep }).run(EP, async (n) => {
    sent.push(n);
    return { outcome: Outcome.SUCCESS };
  });
  setImmediate(() => ac.abort());
  const r = await run;
  assert.equal(r.end, "cancelled");
  assert.deepEqual(sent, []);
  assert.equal(r.nextAttempt, 1);
});

test("cancellation during an attempt: the attempt finishes and is reported, then the run ends", async () => {
  const ac = new AbortController();
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([proceed(), proceed({ attempt: 2, delayMs: 100 })]);
  const r = await loop(c, clock, { signal: ac.signal }).run(EP, async () => {
    ac.abort();
    return { outcome: Outcome.RETRYABLE_FAILURE };
  });
  assert.equal(r.end, "cancelled");
  assert.equal(r.attemptsMade, 1);
  assert.equal(r.nextAttempt, 2);
  assert.deepEqual(c.calls.map((x) => x.call), ["admit", "report"]);
});

test("bad input: the InvalidArgumentError ends the run as error, named, never retried", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([new InvalidArgumentError("endpoint: must not be empty")]);
  const r = await loop(c, clock).run("", ok);
  assert.equal(r.end, "error");
  assert.ok(r.error instanceof InvalidArgumentError);
  assert.equal(r.error.field, "endpoint");
  assert.match(r.message, /InvalidArgumentError: endpoint: must not be empty/);
});

test("a broken peer's DONE to an Admit ends the run as error", async () => {
  const clock = new FakeClock();
  const r = await loop(new ScriptedCoordinator([done]), clock).run(EP, ok);
  assert.equal(r.end, "error");
  assert.match(r.message, /DONE to a call that was not a success report/);
});

test("resume: a parked delivery starts from its next attempt and first attempt's time", async () => {
  const clock = new FakeClock();
  const c = new ScriptedCoordinator([proceed({ attempt: 3 }), done]);
  const r = await loop(c, clock).run(EP, ok, { nextAttempt: 3, firstAttemptTimeMs: 1234 });
  assert.equal(r.end, "succeeded");
  assert.equal(c.calls[0]!.req.attempt, 3);
  assert.equal(c.calls[0]!.req.firstAttemptTimeMs, 1234);
  assert.equal(c.calls[1]!.req.firstAttemptTimeMs, 1234);
});
