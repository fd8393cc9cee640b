// DeliveryLoop: one delivery's ask -> wait -> send -> report loop, driven
// by the coordinator's decisions. The loop docs/CLIENT_CONTRACT.md states
// for every client language (tests/conformance/ holds this one to it):
//
//   Admit(n)   PROCEED(d)  sleep d, send attempt n, Report(n, outcome,
//                          admission = that Admit's token)
//              DEFER(f)    park f (below), then Admit(n) again
//              GIVE_UP     end "gave_up" (dead-letter; `message` says why)
//   Report(n)  SUCCESS     end "succeeded", whatever the answer
//   (failure)  PROCEED(d)  back off d (below), then Admit(n + 1)
//              DEFER(f)    park f, then Admit(n + 1)
//              GIVE_UP     end "gave_up"
//   DONE to anything but a success report, or an error (an
//   InvalidArgumentError: bad input): end "error".
//
// Waiting admission (`waiting`, on by default): when the answer came from
// a coordinator that holds waiting calls (Decision.waitSupported), a
// backoff d is waited through it -- Admit(n + 1, waitMs = min(d, 60 s)),
// and again for the rest when a PROCEED(ADMITTED) comes back at the end of
// that wait with backoff still owed -- and a DEFER(f) is parked at it with
// Admit(n, waitMs = min(max(f, MIN_PARK_MS), 60 s)). Otherwise the loop
// sleeps the backoff, or max(f, MIN_PARK_MS), then asks without waiting.
// A waiting Admit answered by the local fallback (the coordinator went
// away) first sleeps the rest of what the coordinator's answer owed, then
// acts on the fallback's answer. A run ends "deferred" when the delivery
// would stay parked longer than parkLimitMs since the first DEFER of the
// stretch (Infinity by default; 0: every DEFER ends it, to park the
// delivery in a queue for deferForMs and resume it from nextAttempt).
//
// The attempt function gets an AbortSignal that fires at attemptTimeoutMs
// (real time, default 30 s): an attempt still running then is abandoned
// and reported TIMEOUT. An attempt that throws is reported
// RETRYABLE_FAILURE (a connect error or reset; the error is in the event).
// Cancellation (options.signal) is checked before every sleep, Admit and
// send, and ends any sleep or waiting call at once ("cancelled"); an
// attempt already sent is let finish and reported first, and a final
// answer is never turned into "cancelled". A coordinator that goes away
// never ends a run: StaggerClient decides locally.
import { realClock, realSleep, type Clock, type Sleep } from "./clock";
import { formatMs } from "./duration";
import { CancelledError, ProtocolError } from "./errors";
import { MAX_WAIT_MS } from "./validation";
import {
  Outcome,
  Reason,
  REASON_MEANING,
  Verdict,
  reasonName,
  type Coordinator,
  type Decision,
} from "./types";

// What one attempt produced: named fields, all optional but the outcome,
// so more of what the endpoint said fits without changing callers.
export interface AttemptResult {
  outcome: Outcome;
  retryAfterMs?: number; // the endpoint's Retry-After (parseRetryAfter)
}

// Sends attempt number `attempt`; `signal` fires at the attempt timeout.
export type AttemptFn = (attempt: number, signal: AbortSignal) => Promise<AttemptResult>;

// One decision as the loop received it (logging, examples, tests).
export interface DeliveryEvent {
  call: "admit" | "report";
  attempt: number; // the Admit's attempt, or the attempt Report is about
  outcome?: Outcome; // Report only
  waitMs?: number; // a waiting Admit's wait
  attemptError?: unknown; // Report of an attempt that threw
  decision: Decision;
}

export interface DeliveryOptions {
  deadlineMs?: number; // the whole delivery's deadline (epoch ms)
  attemptTimeoutMs?: number; // the worker's own timeout per attempt (> 0)
  waiting?: boolean; // waiting admission; default true
  parkLimitMs?: number; // longer parks end the run "deferred"; default Infinity
  signal?: AbortSignal; // cancels the run
  onDecision?: (e: DeliveryEvent) => void;
  clock?: Clock; // first attempt's time, owed time; default Date.now
  sleep?: Sleep; // how delays are waited; default setTimeout
}

// Where a parked delivery resumes (a previous result's fields).
export interface ResumePoint {
  nextAttempt: number;
  firstAttemptTimeMs?: number;
}

export type DeliveryEnd = "succeeded" | "gave_up" | "deferred" | "cancelled" | "error";

export interface DeliveryResult {
  end: DeliveryEnd;
  attemptsMade: number; // attempts sent during this run
  // The attempt to send next: one more than the last one sent, or the
  // run's first attempt if none was (resume "deferred" / "cancelled" here).
  nextAttempt: number;
  firstAttemptTimeMs?: number; // to resume with
  lastDecision?: Decision;
  deferForMs?: number; // "deferred": park this long
  // "error": why. "succeeded": an error the success's Report got, if any
  // (the delivery is done; log it).
  error?: Error;
  message: string; // one line saying what happened and why
}

export const DEFAULT_ATTEMPT_TIMEOUT_MS = 30_000;
// A DEFER is never waited or slept for less.
export const MIN_PARK_MS = 10;

export class DeliveryLoop {
  constructor(
    private readonly coordinator: Coordinator,
    private readonly options: DeliveryOptions = {},
  ) {
    const t = options.attemptTimeoutMs;
    if (t !== undefined && !(t > 0 && Number.isFinite(t))) {
      throw new RangeError(`attemptTimeoutMs: must be > 0, got ${t}`);
    }
  }

  async run(endpoint: string, send: AttemptFn, from: ResumePoint = { nextAttempt: 1 }): Promise<DeliveryResult> {
    return new Run(this.coordinator, this.options, endpoint, send, from).go();
  }
}

type WaitKind = "none" | "backoff" | "park";
type Step = DeliveryResult | undefined; // undefined: go on with `d`

// One delivery's run. Between steps, `d` answers `call` about `attempt`
// (Admit: may it be sent; Report: it finished with `outcome`), asked at
// `askedAt` with `waitMs` (kind `waitKind`).
class Run {
  private readonly r: DeliveryResult;
  private readonly sleepFn: Sleep;
  private readonly clock: Clock;
  private attempt: number;
  private call: "admit" | "report" = "admit";
  private outcome: Outcome | undefined;
  private d!: Decision;
  private waitMs: number | undefined;
  private waitKind: WaitKind = "none";
  private askedAt = -Infinity;
  private notBefore = -Infinity; // when the backoff or park ends
  private parkedSince = Infinity; // the first DEFER of the stretch

  constructor(
    private readonly c: Coordinator,
    private readonly o: DeliveryOptions,
    private readonly endpoint: string,
    private readonly send: AttemptFn,
    from: ResumePoint,
  ) {
    this.r = {
      end: "error",
      attemptsMade: 0,
      nextAttempt: from.nextAttempt,
      message: "",
      ...(from.firstAttemptTimeMs !== undefined ? { firstAttemptTimeMs: from.firstAttemptTimeMs } : {}),
    };
    this.attempt = from.nextAttempt;
    this.sleepFn = o.sleep ?? realSleep;
    this.clock = o.clock ?? realClock;
  }

  async go(): Promise<DeliveryResult> {
    try {
      let end = await this.ask(this.r.nextAttempt, "none", undefined);
      while (end === undefined) end = await this.step();
      return end;
    } catch (e) {
      if (e instanceof CancelledError) return this.end("cancelled", cancelled(this.endpoint, this.r.nextAttempt));
      this.r.error = e as Error;
      return this.end("error", `${this.endpoint}: ${(e as Error).name}: ${(e as Error).message}`);
    }
  }

  // Acts on `d`; the result when the run has ended.
  private async step(): Promise<Step> {
    const d = this.d;
    this.r.lastDecision = d;
    if (this.call === "report" && this.outcome === Outcome.SUCCESS) {
      return this.end("succeeded", `delivered to ${this.endpoint} on attempt ${this.attempt}`);
    }
    const upcoming = this.call === "admit" ? this.attempt : this.attempt + 1;
    switch (d.verdict) {
      case Verdict.GIVE_UP:
        return this.end("gave_up", `gave up on ${this.endpoint} at attempt ${upcoming}: ${why(d)}`);
      case Verdict.DONE:
        this.r.error = new ProtocolError("coordinator answered DONE to a call that was not a success report");
        return this.end("error", `${this.endpoint}: ${this.r.error.message}`);
      case Verdict.DEFER:
        return this.park(d, upcoming);
      default:
        break;
    }
    this.parkedSince = Infinity; // a PROCEED ends a stretch
    return this.call === "report" ? this.backoff(d, upcoming) : this.proceed(d);
  }

  // PROCEED(delay) to a failure Report: the retry, after the backoff.
  private async backoff(d: Decision, upcoming: number): Promise<Step> {
    this.notBefore = this.now() + d.delayMs;
    if (this.waits(d) && d.delayMs > 0) return this.ask(upcoming, "backoff", Math.min(d.delayMs, MAX_WAIT_MS));
    if (!(await this.sleep(d.delayMs))) return this.end("cancelled", cancelled(this.endpoint, upcoming));
    return this.ask(upcoming, "none", undefined);
  }

  // DEFER: park, then ask again; or end past the park limit.
  private async park(d: Decision, upcoming: number): Promise<Step> {
    if (!(await this.sleepOwed(d))) return this.end("cancelled", cancelled(this.endpoint, upcoming));
    const now = this.now();
    if (this.parkedSince === Infinity) this.parkedSince = now;
    const park = Math.max(d.deferForMs, MIN_PARK_MS);
    if (now + park - this.parkedSince > (this.o.parkLimitMs ?? Infinity)) {
      this.r.deferForMs = d.deferForMs;
      return this.end("deferred", `deferred ${this.endpoint}: attempt ${upcoming} may go in ${formatMs(d.deferForMs)}: ${why(d)}`);
    }
    this.notBefore = now + park;
    if (this.waits(d)) return this.ask(upcoming, "park", Math.min(park, MAX_WAIT_MS));
    if (!(await this.sleep(park))) return this.end("cancelled", cancelled(this.endpoint, upcoming));
    return this.ask(upcoming, "none", undefined);
  }

  // PROCEED(delay) to an Admit: the delay, the attempt, its Report; or, at
  // the end of a waiting backoff with backoff still owed, wait again.
  private async proceed(d: Decision): Promise<Step> {
    const n = this.attempt;
    if (!(await this.sleepOwed(d))) return this.end("cancelled", cancelled(this.endpoint, n));
    const now = this.now();
    if (this.waitKind === "backoff" && this.waitMs !== undefined && d.source === "coordinator" &&
        d.reason === Reason.ADMITTED && now >= this.askedAt + this.waitMs && this.notBefore > now) {
      return this.ask(n, "backoff", Math.min(this.notBefore - now, MAX_WAIT_MS));
    }
    if (!(await this.sleep(d.delayMs)) || this.o.signal?.aborted) return this.end("cancelled", cancelled(this.endpoint, n));
    if (n === 1 && this.r.firstAttemptTimeMs === undefined) this.r.firstAttemptTimeMs = this.now();
    const { result, error } = await attemptOnce(this.send, n, this.o.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS);
    this.r.attemptsMade++;
    this.r.nextAttempt = n + 1;
    [this.call, this.outcome, this.waitMs, this.waitKind] = ["report", result.outcome, undefined, "none"];
    try {
      this.d = await this.c.report({
        endpoint: this.endpoint, attempt: n, outcome: result.outcome, retryAfterMs: result.retryAfterMs,
        deadlineMs: this.o.deadlineMs, firstAttemptTimeMs: this.r.firstAttemptTimeMs, admission: d.admission,
      });
    } catch (e) {
      if (result.outcome !== Outcome.SUCCESS) throw e;
      this.r.error = e as Error; // delivered: done anyway
      return this.end("succeeded", `delivered to ${this.endpoint} on attempt ${n}`);
    }
    this.o.onDecision?.({ call: "report", attempt: n, outcome: result.outcome, decision: this.d, ...(error !== undefined ? { attemptError: error } : {}) });
    return undefined;
  }

  // The local fallback answered a waiting Admit: first the rest of what
  // the coordinator's answer owed.
  private async sleepOwed(d: Decision): Promise<boolean> {
    if (this.waitMs === undefined || d.source !== "local") return true;
    return this.sleep(this.notBefore - this.now());
  }

  private waits(d: Decision): boolean {
    return (this.o.waiting ?? true) && d.waitSupported && d.source === "coordinator";
  }

  // Admit(attempt), waiting `waitMs` when given; the result if the run is
  // cancelled first (a cancelled waiting call throws CancelledError).
  private async ask(attempt: number, kind: WaitKind, waitMs: number | undefined): Promise<Step> {
    if (this.o.signal?.aborted) return this.end("cancelled", cancelled(this.endpoint, this.r.nextAttempt));
    [this.attempt, this.call, this.outcome] = [attempt, "admit", undefined];
    [this.waitMs, this.waitKind, this.askedAt] = [waitMs, kind, this.now()];
    const o = this.o;
    this.d = await this.c.admit(
      { endpoint: this.endpoint, attempt, deadlineMs: o.deadlineMs, firstAttemptTimeMs: this.r.firstAttemptTimeMs, waitMs },
      waitMs !== undefined ? o.signal : undefined,
    );
    o.onDecision?.({ call: "admit", attempt, decision: this.d, ...(waitMs !== undefined ? { waitMs } : {}) });
    return undefined;
  }

  // Sleeps `ms` (nothing when <= 0); false if cancelled before or during.
  private async sleep(ms: number): Promise<boolean> {
    if (this.o.signal?.aborted) return false;
    if (ms <= 0) return true;
    return this.sleepFn(ms, this.o.signal);
  }

  private now(): number {
    return this.clock.now();
  }

  private end(e: DeliveryEnd, message: string): DeliveryResult {
    return Object.assign(this.r, { end: e, message });
  }
}

// Runs one attempt under the attempt timeout; a throw is a failure.
async function attemptOnce(fn: AttemptFn, attempt: number, timeoutMs: number): Promise<{ result: AttemptResult; error?: unknown }> {
  const ac = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<{ result: AttemptResult }>((resolve) => {
    timer = setTimeout(() => {
      ac.abort(new Error(`attempt ${attempt} timed out after ${formatMs(timeoutMs)}`));
      resolve({ result: { outcome: Outcome.TIMEOUT } });
    }, timeoutMs);
  });
  const ran = Promise.resolve()
    .then(() => fn(attempt, ac.signal))
    .then(
      (result) => ({ result }),
      (error: unknown) => ({ result: { outcome: Outcome.RETRYABLE_FAILURE }, error }),
    );
  try {
    return await Promise.race([ran, timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

// "ATTEMPTS_EXHAUSTED (the attempt limit is reached), decided by the
// coordinator (stagger-1)" / "..., decided locally (UNAVAILABLE: ...)".
function why(d: Decision): string {
  const meaning = REASON_MEANING[d.reason] ?? "a reason this client does not know";
  const by = d.source === "coordinator"
    ? `decided by the coordinator${d.replica !== undefined ? ` (${d.replica})` : ""}`
    : `decided locally (${d.fallbackCause?.code ?? ""}: ${d.fallbackCause?.message ?? ""})`;
  return `${reasonName(d.reason)} (${meaning}), ${by}`;
}

function cancelled(endpoint: string, nextAttempt: number): string {
  return `cancelled ${endpoint} before attempt ${nextAttempt}`;
}
