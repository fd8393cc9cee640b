// staggerd's request checks, with its messages word for word (the wire's
// core/wire/wire.cc first, then the engine's core/engine/engine.cc and
// key_validation.cc), for the local fallback: bad input is an error there
// too, the same error the coordinator would have given.
//
// Order (the server's): Report: outcome set and known; then the endpoint
// key, the attempt number, the Retry-After range. Admit: the endpoint key,
// the attempt number, the wait range. Each returns the first problem's
// message, or undefined. Pure.
import { formatMs } from "./duration";
import { Outcome, type AdmitRequest, type ReportRequest } from "./types";

export const MAX_ATTEMPT_NUMBER = 1_000_000;
export const MAX_RETRY_AFTER_MS = 24 * 3600 * 1000;
export const MAX_WAIT_MS = 60 * 1000;
export const DEFAULT_MAX_KEY_BYTES = 512;

export function checkAdmit(req: AdmitRequest, maxKeyBytes = DEFAULT_MAX_KEY_BYTES) {
  return (
    checkTimes(req) ??
    checkEndpointKey(req.endpoint, maxKeyBytes) ??
    checkAttempt(req.attempt) ??
    checkRange("wait", req.waitMs, MAX_WAIT_MS)
  );
}

export function checkReport(req: ReportRequest, maxKeyBytes = DEFAULT_MAX_KEY_BYTES) {
  return (
    checkOutcome(req.outcome) ??
    checkTimes(req) ??
    checkEndpointKey(req.endpoint, maxKeyBytes) ??
    checkAttempt(req.attempt) ??
    checkRange("retry_after", req.retryAfterMs, MAX_RETRY_AFTER_MS)
  );
}

function checkOutcome(o: number): string | undefined {
  if (o === 0) return "outcome: must be set";
  if (!Number.isInteger(o) || o < Outcome.SUCCESS || o > Outcome.PERMANENT_FAILURE) {
    return `outcome: unknown value ${o}`;
  }
  return undefined;
}

function checkAttempt(attempt: number): string | undefined {
  if (Number.isInteger(attempt) && attempt >= 1 && attempt <= MAX_ATTEMPT_NUMBER) return undefined;
  return `attempt: must be in [1, ${MAX_ATTEMPT_NUMBER}], got ${attempt}`;
}

// An optional duration in [0, max]: "<field>: must be >= 0, got -1s".
function checkRange(field: string, ms: number | undefined, maxMs: number): string | undefined {
  if (ms === undefined) return undefined;
  if (Number.isNaN(ms)) return `${field}: must be a number of milliseconds, got NaN`;
  if (ms < 0) return `${field}: must be >= 0, got ${formatMs(ms)}`;
  if (ms > maxMs) return `${field}: must be <= ${formatMs(maxMs)}, got ${formatMs(ms)}`;
  return undefined;
}

// Timestamps must lie in 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z.
function checkTimes(req: { deadlineMs?: number; firstAttemptTimeMs?: number }) {
  for (const [field, ms] of [
    ["deadline", req.deadlineMs],
    ["first_attempt_time", req.firstAttemptTimeMs],
  ] as const) {
    if (ms === undefined) continue;
    if (!Number.isFinite(ms) || ms < -62135596800000 || ms >= 253402300800000) {
      const seconds = Number.isFinite(ms) ? Math.floor(ms / 1000) : ms;
      const nanos = Number.isFinite(ms) ? Math.round((ms - Math.floor(ms / 1000) * 1000) * 1e6) : 0;
      return `${field}: not a valid Timestamp (seconds=${seconds}, nanos=${nanos})`;
    }
  }
  return undefined;
}

// Non-empty, at most maxKeyBytes UTF-8 bytes, no control character, valid
// UTF-8 (a lone UTF-16 surrogate is where a C++ client's bytes would stop
// being UTF-8: its offset is reported as that byte).
export function checkEndpointKey(key: string, maxKeyBytes: number): string | undefined {
  if (key === "") return "endpoint: must not be empty";
  const bytes = Buffer.byteLength(key, "utf8");
  if (bytes > maxKeyBytes) {
    return `endpoint: ${bytes} bytes, over the limit of ${maxKeyBytes} (limits.max_key_bytes)`;
  }
  let offset = 0;
  let invalidAt: number | undefined;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) {
      return `endpoint: control character 0x${c.toString(16).padStart(2, "0")} at byte ${offset}`;
    }
    const high = c >= 0xd800 && c <= 0xdbff;
    const low = c >= 0xdc00 && c <= 0xdfff;
    if (high && i + 1 < key.length && isLow(key.charCodeAt(i + 1))) {
      offset += 4;
      i++;
      continue;
    }
    if ((high || low) && invalidAt === undefined) invalidAt = offset;
    offset += c < 0x80 ? 1 : c < 0x800 ? 2 : 3;
  }
  if (invalidAt !== undefined) return `endpoint: not valid UTF-8 at byte ${invalidAt}`;
  return undefined;
}

const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;
