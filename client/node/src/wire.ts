// The client's requests and decisions <-> the stagger.v1 messages: the one
// place the generated types meet the client's (core/wire/wire.cc's
// counterpart). Also the checks a request must pass before it can be
// encoded at all, or not as written (a wire int32, a finite duration, a
// key without lone surrogates); everything else is the coordinator's to
// check. Pure.
import { durationFromMs, durationToMs, timestampFromMs, timestampToMs } from "./duration";
import type {
  AdmitRequest as WireAdmit,
  Decision as WireDecision,
  ReportRequest as WireReport,
} from "./gen/stagger/v1/coordinator";
import { checkEndpointKey, MAX_ATTEMPT_NUMBER } from "./validation";
import { Verdict, type AdmitRequest, type Decision, type ReportRequest } from "./types";

const isInt32 = (v: number) => Number.isInteger(v) && v >= -(2 ** 31) && v < 2 ** 31;

// The first reason `req` cannot be put on the wire, or undefined.
export function unencodable(req: AdmitRequest | ReportRequest): string | undefined {
  if (typeof req.endpoint !== "string") return `endpoint: must be a string, got ${typeof req.endpoint}`;
  // A lone UTF-16 surrogate would go out as U+FFFD: another key.
  const key = checkEndpointKey(req.endpoint, Infinity);
  if (key !== undefined && key.includes("UTF-8")) return key;
  if (!isInt32(req.attempt)) {
    return `attempt: must be in [1, ${MAX_ATTEMPT_NUMBER}], got ${req.attempt}`;
  }
  if ("outcome" in req && !isInt32(req.outcome)) return `outcome: unknown value ${req.outcome}`;
  const numbers: [string, number | undefined][] = [
    ["deadline", req.deadlineMs],
    ["first_attempt_time", req.firstAttemptTimeMs],
    ["wait", "waitMs" in req ? req.waitMs : undefined],
    ["retry_after", "retryAfterMs" in req ? req.retryAfterMs : undefined],
  ];
  for (const [field, v] of numbers) {
    if (v !== undefined && !Number.isFinite(v)) {
      return `${field}: must be a finite number of milliseconds, got ${v}`;
    }
  }
  if ("admission" in req && req.admission !== undefined &&
      (req.admission < 0n || req.admission >= 1n << 64n)) {
    return `admission: must be a 64-bit unsigned token, got ${req.admission}`;
  }
  return undefined;
}

export function admitToWire(req: AdmitRequest): WireAdmit {
  const out: WireAdmit = { endpoint: req.endpoint, attempt: req.attempt };
  if (req.deadlineMs !== undefined) out.deadline = timestampFromMs(req.deadlineMs);
  if (req.firstAttemptTimeMs !== undefined) {
    out.firstAttemptTime = timestampFromMs(req.firstAttemptTimeMs);
  }
  if (req.waitMs !== undefined) out.wait = durationFromMs(req.waitMs);
  return out;
}

export function reportToWire(req: ReportRequest): WireReport {
  const out: WireReport = {
    endpoint: req.endpoint,
    attempt: req.attempt,
    outcome: req.outcome,
    admission: req.admission ?? 0n,
  };
  if (req.retryAfterMs !== undefined) out.retryAfter = durationFromMs(req.retryAfterMs);
  if (req.deadlineMs !== undefined) out.deadline = timestampFromMs(req.deadlineMs);
  if (req.firstAttemptTimeMs !== undefined) {
    out.firstAttemptTime = timestampFromMs(req.firstAttemptTimeMs);
  }
  return out;
}

// A coordinator's decision, received at `nowMs`, as the client's; a
// string says why it is unusable (the client then falls back, INTERNAL).
// DEFER times come from defer_for (the clocks need not agree), else from
// defer_until. Negative durations read as zero.
export function decisionFromWire(
  d: WireDecision | undefined,
  nowMs: number,
): Omit<Decision, "source" | "replica" | "waitSupported"> | string {
  if (d === undefined) return "coordinator answered no decision";
  if (!(d.verdict >= Verdict.PROCEED && d.verdict <= Verdict.DONE)) {
    return `coordinator answered an unusable verdict ${d.verdict}`;
  }
  const out = {
    verdict: d.verdict as number as Verdict,
    reason: d.reason as number,
    delayMs: 0,
    deferForMs: 0,
    deferUntilMs: 0,
    attempt: d.attempt,
    admission: d.admission,
  };
  if (out.verdict === Verdict.PROCEED && d.delay !== undefined) {
    const ms = durationToMs(d.delay);
    if (ms === undefined) return `delay: not a valid Duration (seconds=${d.delay.seconds}, nanos=${d.delay.nanos})`;
    out.delayMs = Math.max(0, ms);
  }
  if (out.verdict !== Verdict.DEFER) return out;
  if (d.deferFor !== undefined) {
    const ms = durationToMs(d.deferFor);
    if (ms === undefined) {
      return `defer_for: not a valid Duration (seconds=${d.deferFor.seconds}, nanos=${d.deferFor.nanos})`;
    }
    out.deferForMs = Math.max(0, ms);
    out.deferUntilMs = nowMs + out.deferForMs;
  } else if (d.deferUntil !== undefined) {
    out.deferUntilMs = timestampToMs(d.deferUntil);
    out.deferForMs = Math.max(0, out.deferUntilMs - nowMs);
  } else {
    return "coordinator answered DEFER without a time";
  }
  return out;
}
