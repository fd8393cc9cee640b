// LocalEngine: the fail-open fallback's decisions, made in-process when
// neither the agent nor a coordinator answers. staggerd's decision order
// (core/engine/decision_path.cc) on its default policy (policy.ts), for
// this process's view of each endpoint, with what needs the fleet left
// out: no retry budget, no learned release pace, no operator pauses.
//
//   Admit:  attempt limit -> GIVE_UP(ATTEMPTS_EXHAUSTED); deadline passed ->
//           GIVE_UP(DEADLINE); breaker OPEN -> DEFER(CIRCUIT_OPEN); a retry
//           inside the Retry-After window -> DEFER(RETRY_AFTER_WINDOW);
//           HALF_OPEN with its probes taken -> DEFER(HALF_OPEN_BUSY), else
//           PROCEED(HALF_OPEN_PROBE); a retry -> PROCEED(ADMITTED, 0); a
//           first attempt -> PROCEED(INITIAL_JITTER, uniform [0, 50 ms)).
//   Report: SUCCESS -> DONE; PERMANENT_FAILURE -> GIVE_UP(NOT_RETRYABLE);
//           a failure remembers its Retry-After (clamped to 30 s), feeds
//           the breaker (not a 429 with Retry-After), then for attempt + 1:
//           attempt limit, breaker OPEN / HALF_OPEN busy as above, else the
//           decorrelated-jitter delay (BACKOFF), or the Retry-After window
//           when longer (RETRY_AFTER); fitted before the deadline
//           (LAST_CHANCE / GIVE_UP(DEADLINE) as the server does).
// Requests must have passed validation.ts first. Deferrals come back at
// max(target, now + spread/2) + uniform[0, spread). Memory: endpoints idle
// for 10 min are dropped by evictIdle(); at most maxEndpoints are kept (a
// new one beyond is decided from fresh state and not remembered).
import { Breaker } from "./breaker";
import {
  DEFAULT_POLICY,
  LAST_CHANCE_MARGIN_MS,
  LAST_CHANCE_WINDOW_MS,
  MIN_HALF_OPEN_WAIT_MS,
  decorrelatedJitterMs,
  uniform,
  type Random,
} from "./policy";
import { Outcome, Reason, Verdict, type AdmitRequest, type ReportRequest } from "./types";

export interface LocalDecision {
  verdict: Verdict;
  reason: Reason;
  delayMs: number;
  deferUntilMs: number; // DEFER only
  attempt: number;
}

interface EndpointState {
  breaker: Breaker;
  previousDelayMs: number; // decorrelated jitter's, reset by a success
  retryAfterUntilMs: number;
  lastSeenMs: number;
}

// One decision's inputs: the endpoint's state, now, the deadline in force.
interface Ctx {
  st: EndpointState;
  now: number;
  deadline: number;
  afterFailure: boolean;
}

const B = DEFAULT_POLICY.backoff;
const SPREAD = DEFAULT_POLICY.deferral.spreadMs;

export class LocalEngine {
  private readonly table = new Map<string, EndpointState>();

  constructor(
    private readonly random: Random = Math.random,
    readonly maxEndpoints = 100_000,
  ) {}

  get size(): number {
    return this.table.size;
  }

  admit(req: AdmitRequest, now: number): LocalDecision {
    const c = this.ctx(req.endpoint, now, req.deadlineMs, false);
    const retry = req.attempt > 1;
    const d = (v: Verdict, r: Reason, delayMs = 0, deferUntilMs = 0): LocalDecision => ({
      verdict: v, reason: r, delayMs, deferUntilMs, attempt: req.attempt,
    });
    if (req.attempt > B.maxAttempts) return d(Verdict.GIVE_UP, Reason.ATTEMPTS_EXHAUSTED);
    if (now > c.deadline) return d(Verdict.GIVE_UP, Reason.DEADLINE);
    const br = c.st.breaker;
    br.refresh(now);
    if (br.state === "OPEN") return this.park(c, Reason.CIRCUIT_OPEN, br.timeMs, req.attempt);
    if (retry && c.st.retryAfterUntilMs > now) {
      return this.park(c, Reason.RETRY_AFTER_WINDOW, c.st.retryAfterUntilMs, req.attempt);
    }
    if (br.state === "HALF_OPEN") {
      if (!br.probeSlotFree(now)) return this.halfOpenBusy(c, req.attempt);
      br.acquireProbe();
      return d(Verdict.PROCEED, Reason.HALF_OPEN_PROBE);
    }
    if (retry) return d(Verdict.PROCEED, Reason.ADMITTED);
    return d(Verdict.PROCEED, Reason.INITIAL_JITTER, uniform(this.random, 0, B.initialJitterMs));
  }

  report(req: ReportRequest, now: number): LocalDecision {
    const c = this.ctx(req.endpoint, now, req.deadlineMs, true);
    const st = c.st;
    st.breaker.refresh(now);
    if (req.outcome === Outcome.SUCCESS || req.outcome === Outcome.PERMANENT_FAILURE) {
      st.breaker.onAnswer(now); // the endpoint answered: it is up
      const success = req.outcome === Outcome.SUCCESS;
      if (success) st.previousDelayMs = 0;
      return {
        verdict: success ? Verdict.DONE : Verdict.GIVE_UP,
        reason: success ? Reason.SUCCEEDED : Reason.NOT_RETRYABLE,
        delayMs: 0, deferUntilMs: 0, attempt: req.attempt,
      };
    }
    // A 429 with Retry-After is the endpoint pacing us, not failing.
    const paced = req.outcome === Outcome.RATE_LIMITED && req.retryAfterMs !== undefined;
    if (req.retryAfterMs !== undefined) {
      const ra = Math.min(req.retryAfterMs, B.retryAfterMaxMs);
      st.retryAfterUntilMs = Math.max(st.retryAfterUntilMs, now + ra);
    }
    if (!paced) st.breaker.onFailure(now, this.random);
    const next = req.attempt + 1;
    if (next > B.maxAttempts) {
      return { verdict: Verdict.GIVE_UP, reason: Reason.ATTEMPTS_EXHAUSTED, delayMs: 0, deferUntilMs: 0, attempt: next };
    }
    const br = st.breaker;
    if (br.state === "OPEN") return this.park(c, Reason.CIRCUIT_OPEN, br.timeMs, next);
    if (br.state === "HALF_OPEN" && !br.probeSlotFree(now)) return this.halfOpenBusy(c, next);
    return this.retryDelay(c, next);
  }

  // Drops endpoints not seen for the idle-eviction age.
  evictIdle(now: number): void {
    for (const [key, st] of this.table) {
      if (now - st.lastSeenMs >= DEFAULT_POLICY.limits.idleEvictionMs) this.table.delete(key);
    }
  }

  private ctx(endpoint: string, now: number, deadline: number | undefined, afterFailure: boolean): Ctx {
    let st = this.table.get(endpoint);
    if (st === undefined) {
      st = { breaker: new Breaker(), previousDelayMs: 0, retryAfterUntilMs: 0, lastSeenMs: now };
      if (this.table.size < this.maxEndpoints) this.table.set(endpoint, st);
    }
    st.lastSeenMs = now;
    return { st, now, deadline: deadline ?? Infinity, afterFailure };
  }

  private halfOpenBusy(c: Ctx, attempt: number): LocalDecision {
    return this.park(c, Reason.HALF_OPEN_BUSY, c.now + Math.max(MIN_HALF_OPEN_WAIT_MS, SPREAD), attempt);
  }

  // DEFER to about `target`, or the last chance before the deadline.
  private park(c: Ctx, reason: Reason, target: number, attempt: number): LocalDecision {
    const back = Math.max(target, c.now + SPREAD / 2) + uniform(this.random, 0, SPREAD);
    if (back <= c.deadline) {
      return { verdict: Verdict.DEFER, reason, delayMs: 0, deferUntilMs: back, attempt };
    }
    const left = c.deadline - c.now;
    if (left <= 0 || (c.afterFailure && left <= LAST_CHANCE_WINDOW_MS)) {
      return { verdict: Verdict.GIVE_UP, reason: Reason.DEADLINE, delayMs: 0, deferUntilMs: 0, attempt };
    }
    if (left <= LAST_CHANCE_WINDOW_MS) {
      return { verdict: Verdict.PROCEED, reason: Reason.LAST_CHANCE, delayMs: 0, deferUntilMs: 0, attempt };
    }
    return { verdict: Verdict.DEFER, reason, delayMs: 0, deferUntilMs: this.lastChanceLanding(c), attempt };
  }

  private lastChanceLanding(c: Ctx): number {
    return c.deadline - LAST_CHANCE_WINDOW_MS +
      uniform(this.random, 0, LAST_CHANCE_WINDOW_MS - LAST_CHANCE_MARGIN_MS);
  }

  // The backoff for `attempt` (a retry), or the Retry-After window when it
  // is longer, fitted before the deadline.
  private retryDelay(c: Ctx, attempt: number): LocalDecision {
    const st = c.st;
    const policyDelay = decorrelatedJitterMs(st.previousDelayMs, this.random);
    let reason = Reason.BACKOFF;
    let delay = policyDelay;
    const raLeft = st.retryAfterUntilMs - c.now;
    if (raLeft > 0 && raLeft >= policyDelay) {
      reason = Reason.RETRY_AFTER;
      delay = raLeft + uniform(this.random, 0, SPREAD);
    }
    const left = c.deadline - c.now;
    const room = left - LAST_CHANCE_WINDOW_MS;
    const proceed = (r: Reason, ms: number): LocalDecision => ({
      verdict: Verdict.PROCEED, reason: r, delayMs: ms, deferUntilMs: 0, attempt,
    });
    let out: LocalDecision;
    if (reason === Reason.BACKOFF && delay > room && room > B.baseMs) {
      out = proceed(Reason.BACKOFF, B.baseMs + uniform(this.random, 0, room - B.baseMs));
    } else if (delay <= left) {
      out = proceed(reason, delay);
    } else if (left <= LAST_CHANCE_WINDOW_MS) {
      return { verdict: Verdict.GIVE_UP, reason: Reason.DEADLINE, delayMs: 0, deferUntilMs: 0, attempt };
    } else {
      out = proceed(Reason.LAST_CHANCE, this.lastChanceLanding(c) - c.now);
    }
    // The fleet-wide (here: process-wide) state grows only from failures
    // the endpoint did not schedule itself.
    if (raLeft <= 0) st.previousDelayMs = policyDelay;
    return out;
  }
}
