// The fail-open fallback's LocalEngine on a fake clock (times are passed
// in) with seeded randomness: staggerd's default policy -- initial jitter,
// decorrelated jitter, the attempt limit, deadlines, the breaker's whole
// cycle, Retry-After -- and its memory bounds.
import assert from "node:assert/strict";
import { test } from "node:test";

import { DEFAULT_POLICY, LocalEngine, Outcome, Reason, Verdict } from "../../../client/node/src/index";

const EP = "https://down.example";
const T0 = 1_767_225_600_000;

// A small deterministic generator (mulberry32).
function seeded(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const fail = (attempt: number, extra = {}) => ({ endpoint: EP, attempt, outcome: Outcome.RETRYABLE_FAILURE, ...extra });

test("first attempts proceed within the 50 ms initial jitter; retries are admitted at once", () => {
  const e = new LocalEngine(seeded(1));
  for (let i = 0; i < 200; i++) {
    const d = e.admit({ endpoint: `k${i}`, attempt: 1 }, T0);
    assert.equal(d.verdict, Verdict.PROCEED);
    assert.equal(d.reason, Reason.INITIAL_JITTER);
    assert.ok(d.delayMs >= 0 && d.delayMs < 50, String(d.delayMs));
  }
  assert.deepEqual(e.admit({ endpoint: EP, attempt: 2 }, T0), {
    verdict: Verdict.PROCEED, reason: Reason.ADMITTED, delayMs: 0, deferUntilMs: 0, attempt: 2,
  });
});

test("decorrelated jitter: min(30 s, uniform[200 ms, 3 x previous]); a success resets it", () => {
  const e = new LocalEngine(seeded(2));
  let prev = 0;
  let t = T0;
  for (let attempt = 1; attempt < DEFAULT_POLICY.maxAttempts; attempt++) {
    const d = e.report(fail(attempt), (t += 10));
    assert.equal(d.verdict, Verdict.PROCEED);
    assert.equal(d.reason, Reason.BACKOFF);
    assert.equal(d.attempt, attempt + 1);
    const hi = Math.min(30_000, 3 * Math.max(prev, 200));
    assert.ok(d.delayMs >= 200 && d.delayMs <= hi, `${d.delayMs} not in [200, ${hi}]`);
    prev = d.delayMs;
  }
  assert.equal(e.report({ endpoint: EP, attempt: 3, outcome: Outcome.SUCCESS }, t).verdict, Verdict.DONE);
  const after = e.report(fail(1), t + 1);
  assert.ok(after.delayMs <= 600, `reset: ${after.delayMs}`);
});

test("the attempt limit (8, counting the first) and a passed deadline give up", () => {
  const e = new LocalEngine(seeded(3));
  const last = e.report(fail(8), T0);
  assert.equal(last.verdict, Verdict.GIVE_UP);
  assert.equal(last.reason, Reason.ATTEMPTS_EXHAUSTED);
  assert.equal(last.attempt, 9);
  assert.equal(e.admit({ endpoint: EP, attempt: 9 }, T0).reason, Reason.ATTEMPTS_EXHAUSTED);
  const late = e.admit({ endpoint: "k", attempt: 2, deadlineMs: T0 - 1 }, T0);
  assert.equal(late.verdict, Verdict.GIVE_UP);
  assert.equal(late.reason, Reason.DEADLINE);
});

test("a backoff is fitted before the deadline; a failure in its last second gives up", () => {
  const e = new LocalEngine(seeded(4));
  const near = e.report(fail(1, { deadlineMs: T0 + 1_500 }), T0);
  assert.equal(near.verdict, Verdict.PROCEED);
  assert.ok(near.delayMs <= 1_500, String(near.delayMs));
  const tooLate = e.report(fail(2, { deadlineMs: T0 + 100 }), T0 + 1);
  // A delay of at least base (200 ms) cannot start in the 99 ms left.
  assert.equal(tooLate.verdict, Verdict.GIVE_UP);
  assert.equal(tooLate.reason, Reason.DEADLINE);
  assert.equal(e.report({ endpoint: EP, attempt: 1, outcome: Outcome.PERMANENT_FAILURE }, T0).reason, Reason.NOT_RETRYABLE);
});

test("the breaker: 20 failures open it, it half-opens, 5 probes, 3 successes close it", () => {
  const e = new LocalEngine(seeded(5));
  let t = T0;
  for (let i = 0; i < 19; i++) assert.equal(e.report(fail(1), (t += 1)).verdict, Verdict.PROCEED, `failure ${i + 1}`);
  const trip = e.report(fail(1), (t += 1));
  assert.equal(trip.verdict, Verdict.DEFER);
  assert.equal(trip.reason, Reason.CIRCUIT_OPEN);
  assert.equal(trip.attempt, 2);
  const open = e.admit({ endpoint: EP, attempt: 2 }, t);
  assert.equal(open.verdict, Verdict.DEFER);
  assert.equal(open.reason, Reason.CIRCUIT_OPEN);
  // Open 250 ms +-20%; the deferral lands at or after it, spread over 1 s.
  assert.ok(open.deferUntilMs >= t + 200 && open.deferUntilMs <= t + 300 + 1_000, String(open.deferUntilMs - t));
  t += 301; // half-open now
  for (let i = 0; i < 5; i++) {
    const probe = e.admit({ endpoint: EP, attempt: 2 }, t);
    assert.equal(probe.reason, Reason.HALF_OPEN_PROBE, `probe ${i + 1}`);
  }
  const busy = e.admit({ endpoint: EP, attempt: 2 }, t);
  assert.equal(busy.verdict, Verdict.DEFER);
  assert.equal(busy.reason, Reason.HALF_OPEN_BUSY);
  for (let i = 0; i < 3; i++) e.report({ endpoint: EP, attempt: 2, outcome: Outcome.SUCCESS }, (t += 1));
  assert.equal(e.admit({ endpoint: EP, attempt: 1 }, t).reason, Reason.INITIAL_JITTER, "closed again");
});

test("a failed probe reopens the breaker for longer", () => {
  const e = new LocalEngine(seeded(6));
  let t = T0;
  for (let i = 0; i < 20; i++) e.report(fail(1), (t += 1));
  t += 301;
  assert.equal(e.admit({ endpoint: EP, attempt: 2 }, t).reason, Reason.HALF_OPEN_PROBE);
  const reopened = e.report(fail(2), (t += 1));
  assert.equal(reopened.reason, Reason.CIRCUIT_OPEN);
  // Second trip: 500 ms +-20%.
  assert.equal(e.admit({ endpoint: EP, attempt: 3 }, t + 399).reason, Reason.CIRCUIT_OPEN);
});

test("Retry-After: honoured over a shorter backoff, clamped to 30 s, holds retries, and a 429 with it does not trip", () => {
  const e = new LocalEngine(seeded(7));
  const d = e.report({ endpoint: EP, attempt: 1, outcome: Outcome.RATE_LIMITED, retryAfterMs: 5_000 }, T0);
  assert.equal(d.reason, Reason.RETRY_AFTER);
  assert.ok(d.delayMs >= 5_000 && d.delayMs < 6_000, String(d.delayMs));
  const held = e.admit({ endpoint: EP, attempt: 2 }, T0 + 1_000);
  assert.equal(held.verdict, Verdict.DEFER);
  assert.equal(held.reason, Reason.RETRY_AFTER_WINDOW);
  assert.ok(held.deferUntilMs >= T0 + 5_000);
  assert.equal(e.admit({ endpoint: EP, attempt: 1 }, T0 + 1_000).verdict, Verdict.PROCEED, "first attempts still go");

  const clamp = new LocalEngine(seeded(8));
  const long = clamp.report({ endpoint: EP, attempt: 1, outcome: Outcome.RATE_LIMITED, retryAfterMs: 3_600_000 }, T0);
  assert.ok(long.delayMs <= 31_000, String(long.delayMs));
  let t = T0;
  for (let i = 0; i < 40; i++) {
    const r = clamp.report({ endpoint: EP, attempt: 1, outcome: Outcome.RATE_LIMITED, retryAfterMs: 1_000 }, (t += 1));
    assert.notEqual(r.reason, Reason.CIRCUIT_OPEN, `report ${i + 1}`);
  }
});

test("memory: idle endpoints are evicted after 10 min; at most maxEndpoints, the least recently used forgotten", () => {
  const e = new LocalEngine(seeded(9), { ...DEFAULT_POLICY, maxEndpoints: 2 });
  e.admit({ endpoint: "a", attempt: 1 }, T0);
  e.admit({ endpoint: "b", attempt: 1 }, T0 + 60_000);
  e.admit({ endpoint: "a", attempt: 1 }, T0 + 60_000);
  e.admit({ endpoint: "c", attempt: 1 }, T0 + 60_000);
  assert.equal(e.size, 2, "b, the least recently used, forgotten");
  e.evictIdle(T0 + 10 * 60_000);
  assert.equal(e.size, 2, "a and c seen a minute in");
  e.evictIdle(T0 + 11 * 60_000);
  assert.equal(e.size, 0);
});
