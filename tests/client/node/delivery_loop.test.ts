// DeliveryLoop against a scripted coordinator on a fake clock, in what is
// the TypeScript client's own: admission tokens echoed exactly as bigints,
// the result's message, the attempt timeout that cuts off a hung attempt,
// a throwing attempt's error in the event, a real sleep cut short by the
// signal, InvalidArgumentError's field. The loop's answers to each decision
// are tests/conformance/ (every client runs them).
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
