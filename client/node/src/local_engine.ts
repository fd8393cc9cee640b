// LocalEngine: the fail-open fallback's decisions, made in-process when
// neither the agent nor a coordinator answers: docs/CLIENT_CONTRACT.md's
// fallback subset of staggerd's decision order (core/engine/
// decision_path.cc) on a LocalPolicy (policy.ts, staggerd's defaults), for
// this process's view of each endpoint, with what needs the fleet left to
// the coordinator: no retry budget, no learned release pace, no pauses.
//
//   Admit:  attempt limit -> GIVE_UP(ATTEMPTS_EXHAUSTED); deadline passed ->
//           GIVE_UP(DEADLINE); breaker OPEN -> DEFER(CIRCUIT_OPEN); a retry
//           inside the Retry-After window -> DEFER(RETRY_AFTER_WINDOW);
//           HALF_OPEN with its probes taken -> DEFER(HALF_OPEN_BUSY), else
//           PROCEED(HALF_OPEN_PROBE); a retry -> PROCEED(ADMITTED, 0); a
//           first attempt -> PROCEED(INITIAL_JITTER, u * initialJitter).
//   Report: SUCCESS -> DONE; PERMANENT_FAILURE -> GIVE_UP(NOT_RETRYABLE);
//           a failure remembers its Retry-After (clamped to
//           retryAfterMax), feeds the breaker (not a 429 with
//           Retry-After), then for attempt + 1: attempt limit, breaker
//           OPEN / HALF_OPEN busy as above, else the decorrelated-jitter
//           delay (BACKOFF), or the Retry-After window when longer
//           (RETRY_AFTER, + u * spread); fitted before the deadline
//           (LAST_CHANCE / GIVE_UP(DEADLINE) as the server does).
// Deferrals come back at max(target, now + spread/2) + u * spread. Every u
// is one draw from `random`, in the order above, only for a range of
// positive width (the contract states the order: a scripted source gives
// exact delays). Requests must have passed validation.ts first. Memory: at
// most maxEndpoints endpoints, the least recently used forgotten first;
// evictIdle() drops those idle for 10 minutes.
import { Breaker } from "./breaker";
import {
  DEFAULT_POLICY,
  IDLE_EVICTION_MS,
  LAST_CHANCE_MARGIN_MS,
  LAST_CHANCE_WINDOW_MS,
  MIN_HALF_OPEN_WAIT_MS,
  uniform,
  type LocalPolicy,
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
  attempt: number; // the attempt the decision is about
}

const answer = (verdict: Verdict, reason: Reason, attempt: number, delayMs = 0, deferUntilMs = 0): LocalDecision =>
  ({ verdict, reason, delayMs, deferUntilMs, attempt });

export class LocalEngine {
  private readonly table = new Map<string, EndpointState>();

  constructor(
    private readonly random: Random = Math.random,
    readonly policy: Readonly<LocalPolicy> = DEFAULT_POLICY,
  ) {}

  get size(): number {
    return this.table.size;
  }

  admit(req: AdmitRequest, now: number): LocalDecision {
    const p = this.policy;
    const c = this.ctx(req.endpoint, now, req.deadlineMs, false, req.attempt);
    const retry = req.attempt > 1;
    if (req.attempt > p.maxAttempts) return answer(Verdict.GIVE_UP, Reason.ATTEMPTS_EXHAUSTED, c.attempt);
    if (now > c.deadline) return answer(Verdict.GIVE_UP, Reason.DEADLINE, c.attempt);
    const br = c.st.breaker;
    br.refresh(now);
    if (br.state === "OPEN") return this.park(c, Reason.CIRCUIT_OPEN, br.timeMs);
    if (retry && c.st.retryAfterUntilMs > now) {
      return this.park(c, Reason.RETRY_AFTER_WINDOW, c.st.retryAfterUntilMs);
    }
    if (br.state === "HALF_OPEN") {
      if (!br.probeSlotFree(now)) return this.halfOpenBusy(c);
      br.acquireProbe();
      return answer(Verdict.PROCEED, Reason.HALF_OPEN_PROBE, c.attempt);
    }
    if (retry) return answer(Verdict.PROCEED, Reason.ADMITTED, c.attempt);
    return answer(Verdict.PROCEED, Reason.INITIAL_JITTER, c.attempt, uniform(this.random, 0, p.initialJitterMs));
  }

  report(req: ReportRequest, now: number): LocalDecision {
    const c = this.ctx(req.endpoint, now, req.deadlineMs, true, req.attempt + 1);
    const st = c.st;
    st.breaker.refresh(now);
    if (req.outcome === Outcome.SUCCESS || req.outcome === Outcome.PERMANENT_FAILURE) {
      st.breaker.onAnswer(now); // the endpoint answered: it is up
      const success = req.outcome === Outcome.SUCCESS;
      if (success) st.previousDelayMs = 0;
      return success
        ? answer(Verdict.DONE, Reason.SUCCEEDED, req.attempt)
        : answer(Verdict.GIVE_UP, Reason.NOT_RETRYABLE, req.attempt);
    }
    // A 429 with Retry-After is the endpoint pacing us, not failing.
    const paced = req.outcome === Outcome.RATE_LIMITED && req.retryAfterMs !== undefined;
    if (req.retryAfterMs !== undefined) {
      const ra = Math.min(req.retryAfterMs, this.policy.retryAfterMaxMs);
      st.retryAfterUntilMs = Math.max(st.retryAfterUntilMs, now + ra);
    }
    if (!paced) st.breaker.onFailure(now, this.random);
    if (c.attempt > this.policy.maxAttempts) return answer(Verdict.GIVE_UP, Reason.ATTEMPTS_EXHAUSTED, c.attempt);
    const br = st.breaker;
    if (br.state === "OPEN") return this.park(c, Reason.CIRCUIT_OPEN, br.timeMs);
    if (br.state === "HALF_OPEN" && !br.probeSlotFree(now)) return this.halfOpenBusy(c);
    return this.retryDelay(c);
  }

  // Drops endpoints not seen for the idle-eviction age.
  evictIdle(now: number): void {
    for (const [key, st] of this.table) {
      if (now - st.lastSeenMs >= IDLE_EVICTION_MS) this.table.delete(key);
    }
  }

  // The endpoint's state, most recently used last (a Map keeps insertion
  // order): the least recently used is forgotten beyond maxEndpoints.
  private ctx(endpoint: string, now: number, deadline: number | undefined, afterFailure: boolean, attempt: number): Ctx {
    let st = this.table.get(endpoint);
    if (st === undefined) {
      st = { breaker: new Breaker(this.policy), previousDelayMs: 0, retryAfterUntilMs: 0, lastSeenMs: now };
    } else {
      this.table.delete(endpoint);
    }
    this.table.set(endpoint, st);
    if (this.table.size > this.policy.maxEndpoints) this.table.delete(this.table.keys().next().value as string);
    st.lastSeenMs = now;
    return { st, now, deadline: deadline ?? Infinity, afterFailure, attempt };
  }

  private halfOpenBusy(c: Ctx): LocalDecision {
    return this.park(c, Reason.HALF_OPEN_BUSY, c.now + Math.max(MIN_HALF_OPEN_WAIT_MS, this.policy.spreadMs));
  }

  // DEFER to about `target`, or the last chance before the deadline.
  private park(c: Ctx, reason: Reason, target: number): LocalDecision {
    const spread = this.policy.spreadMs;
    const back = Math.max(target, c.now + spread / 2) + uniform(this.random, 0, spread);
    if (back <= c.deadline) return answer(Verdict.DEFER, reason, c.attempt, 0, back);
    const left = c.deadline - c.now;
    if (left <= 0 || (c.afterFailure && left <= LAST_CHANCE_WINDOW_MS)) {
      return answer(Verdict.GIVE_UP, Reason.DEADLINE, c.attempt);
    }
    if (left <= LAST_CHANCE_WINDOW_MS) return answer(Verdict.PROCEED, Reason.LAST_CHANCE, c.attempt);
    return answer(Verdict.DEFER, reason, c.attempt, 0, this.lastChanceLanding(c));
  }

  private lastChanceLanding(c: Ctx): number {
    return c.deadline - LAST_CHANCE_WINDOW_MS +
      uniform(this.random, 0, LAST_CHANCE_WINDOW_MS - LAST_CHANCE_MARGIN_MS);
  }

  // The backoff for the retry, or the Retry-After window when it is
  // longer, fitted before the deadline.
  private retryDelay(c: Ctx): LocalDecision {
    const p = this.policy;
    const st = c.st;
    const prev = Math.min(Math.max(st.previousDelayMs, p.backoffBaseMs), Math.max(p.backoffBaseMs, p.backoffCapMs));
    const policyDelay = Math.min(p.backoffCapMs, uniform(this.random, p.backoffBaseMs, prev * 3));
    let reason = Reason.BACKOFF;
    let delay = policyDelay;
    const raLeft = st.retryAfterUntilMs - c.now;
    if (raLeft > 0 && raLeft >= policyDelay) {
      reason = Reason.RETRY_AFTER;
      delay = raLeft + uniform(this.random, 0, p.spreadMs);
    }
    const out = this.fitBeforeDeadline(c, reason, delay);
    // The process-wide state grows only from failures the endpoint did
    // not schedule itself.
    if (out.verdict !== Verdict.GIVE_UP && raLeft <= 0) st.previousDelayMs = policyDelay;
    return out;
  }

  private fitBeforeDeadline(c: Ctx, reason: Reason, delay: number): LocalDecision {
    const base = this.policy.backoffBaseMs;
    const left = c.deadline - c.now;
    const room = left - LAST_CHANCE_WINDOW_MS;
    if (reason === Reason.BACKOFF && delay > room && room > base) {
      return answer(Verdict.PROCEED, Reason.BACKOFF, c.attempt, base + uniform(this.random, 0, room - base));
    }
    if (delay <= left) return answer(Verdict.PROCEED, reason, c.attempt, delay);
    if (left <= LAST_CHANCE_WINDOW_MS) return answer(Verdict.GIVE_UP, Reason.DEADLINE, c.attempt);
    return answer(Verdict.PROCEED, Reason.LAST_CHANCE, c.attempt, this.lastChanceLanding(c) - c.now);
  }
}
