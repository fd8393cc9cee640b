// DeliveryLoop: one delivery's ask -> wait -> send -> report loop, driven
// by the coordinator's decisions (the C++ client's RetryLoop,
// client/retry_loop.h, with waiting admission):
//
//   Admit(n) -> PROCEED(delay)  wait delay, send attempt n, Report(n, outcome,
//                               admission = that Admit's token)
//   Report   -> DONE            end "succeeded"
//            -> PROCEED(d)      retry n + 1: if waiting is on and the
//                               answering replica has shown wait_supported,
//                               Admit(n + 1, wait = min(d, 60 s)) at once;
//                               else sleep d, then Admit(n + 1)
//            -> GIVE_UP         end "gave_up" (dead-letter; `message` says why)
//   any DEFER(for)              waiting on: Admit(same attempt, wait =
//                               min(for, 60 s)), a call deadline of wait +
//                               1 s. A waiting call answered DEFER ends the
//                               run "deferred" (park the delivery for
//                               deferForMs, then run again from nextAttempt):
//                               an old server answering at once never makes
//                               a hot loop. Waiting off: every DEFER parks.
//
// The attempt function gets an AbortSignal that fires at attemptTimeoutMs
// (real time, default 30 s): an attempt still running then is abandoned and
// reported TIMEOUT. An attempt that throws is reported RETRYABLE_FAILURE (a
// connect error or reset; the error is in the event). Cancellation
// (options.signal) ends any wait or waiting call at once ("cancelled"); an
// attempt already sent is let finish and reported first. An
// InvalidArgumentError (bad input) ends the run "error". Nothing else ends
// it: a coordinator that goes away yields local decisions (StaggerClient).
import { realClock, realSleep, type Clock, type Sleep } from "./clock";
import { formatMs } from "./duration";
import { CancelledError } from "./errors";
import { MAX_WAIT_MS } from "./validation";
import {
  Outcome,
  REASON_MEANING,
  Verdict,
  reasonName,
  type Coordinator,
  type Decision,
} from "./types";

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
  attemptTimeoutMs?: number; // the worker's own timeout per attempt
  waiting?: boolean; // waiting admission; default true
  signal?: AbortSignal; // cancels the run
  onDecision?: (e: DeliveryEvent) => void;
  clock?: Clock; // first attempt's time; default Date.now
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
  nextAttempt: number; // the attempt to admit when resuming
  firstAttemptTimeMs?: number; // to resume with
  lastDecision?: Decision;
  deferForMs?: number; // "deferred": park this long
  error?: Error; // "error"
  message: string; // one line saying what happened and why
}

export const DEFAULT_ATTEMPT_TIMEOUT_MS = 30_000;

export class DeliveryLoop {
  constructor(
    private readonly coordinator: Coordinator,
    private readonly options: DeliveryOptions = {},
  ) {}

  async run(endpoint: string, send: AttemptFn, from: ResumePoint = { nextAttempt: 1 }) {
    const o = this.options;
    const r: DeliveryResult = {
      end: "error",
      attemptsMade: 0,
      nextAttempt: from.nextAttempt,
      message: "",
      ...(from.firstAttemptTimeMs !== undefined ? { firstAttemptTimeMs: from.firstAttemptTimeMs } : {}),
    };
    const sleep = o.sleep ?? realSleep;
    const waiting = o.waiting ?? true;
    const admit = (attempt: number, waitMs?: number) => {
      const d = this.coordinator.admit(
        { endpoint, attempt, deadlineMs: o.deadlineMs, firstAttemptTimeMs: r.firstAttemptTimeMs, waitMs },
        o.signal,
      );
      return d.then((decision) => {
        o.onDecision?.({ call: "admit", attempt, decision, ...(waitMs !== undefined ? { waitMs } : {}) });
        return decision;
      });
    };
    const end = (e: DeliveryEnd, message: string) => Object.assign(r, { end: e, message });

    let attempt = from.nextAttempt; // the attempt the decision `d` is about
    let afterReport = false; // `d` answers a Report (about attempt + 1)
    let held = false; // `d` answers a waiting call
    try {
      let d = await admit(attempt);
      for (;;) {
        r.lastDecision = d;
        const upcoming: number = afterReport ? attempt + 1 : attempt;
        r.nextAttempt = upcoming;
        if (d.verdict === Verdict.GIVE_UP) {
          return end("gave_up", `gave up on ${endpoint} at attempt ${upcoming}: ${why(d)}`);
        }
        if (d.verdict === Verdict.DONE) {
          return end("error", `coordinator answered DONE to a call that was not a success report`);
        }
        if (d.verdict === Verdict.DEFER) {
          if (!waiting || held) {
            r.deferForMs = d.deferForMs;
            return end("deferred", `deferred ${endpoint}: attempt ${upcoming} may go in ${formatMs(d.deferForMs)}: ${why(d)}`);
          }
          [attempt, afterReport, held] = [upcoming, false, true];
          d = await admit(attempt, Math.min(d.deferForMs, MAX_WAIT_MS));
          continue;
        }
        if (afterReport) {
          // PROCEED after a failure: the retry, after d.delayMs.
          [attempt, afterReport] = [upcoming, false];
          held = waiting && d.source === "coordinator" && d.waitSupported && d.delayMs > 0;
          if (held) {
            d = await admit(attempt, Math.min(d.delayMs, MAX_WAIT_MS));
          } else {
            if (!(await sleep(d.delayMs, o.signal))) return end("cancelled", cancelled(endpoint, attempt));
            d = await admit(attempt);
          }
          continue;
        }
        // PROCEED to an Admit: wait, send, report.
        if (!(await sleep(d.delayMs, o.signal))) return end("cancelled", cancelled(endpoint, attempt));
        if (attempt === 1 && r.firstAttemptTimeMs === undefined) {
          r.firstAttemptTimeMs = (o.clock ?? realClock).now();
        }
        const { result, error } = await this.send(send, attempt);
        r.attemptsMade++;
        d = await this.coordinator.report({
          endpoint,
          attempt,
          outcome: result.outcome,
          retryAfterMs: result.retryAfterMs,
          deadlineMs: o.deadlineMs,
          firstAttemptTimeMs: r.firstAttemptTimeMs,
          admission: d.admission,
        });
        o.onDecision?.({ call: "report", attempt, outcome: result.outcome, decision: d, ...(error !== undefined ? { attemptError: error } : {}) });
        if (result.outcome === Outcome.SUCCESS) {
          r.lastDecision = d;
          r.nextAttempt = attempt;
          return end("succeeded", `delivered to ${endpoint} on attempt ${attempt}`);
        }
        [afterReport, held] = [true, false];
        if (o.signal?.aborted) {
          r.lastDecision = d;
          r.nextAttempt = attempt + 1;
          return end("cancelled", cancelled(endpoint, attempt + 1));
        }
      }
    } catch (e) {
      if (e instanceof CancelledError) return end("cancelled", cancelled(endpoint, r.nextAttempt));
      r.error = e as Error;
      return end("error", `${endpoint}: ${(e as Error).name}: ${(e as Error).message}`);
    }
  }

  // Runs one attempt under the attempt timeout; a throw is a failure.
  private async send(fn: AttemptFn, attempt: number): Promise<{ result: AttemptResult; error?: unknown }> {
    const timeoutMs = this.options.attemptTimeoutMs ?? DEFAULT_ATTEMPT_TIMEOUT_MS;
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
