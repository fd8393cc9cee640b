// The local fallback's policy: staggerd's embedded defaults
// (core/engine/config_ranges.h, engine_config.h, decision_path.h), the
// fields the fallback uses. Milliseconds. Constants.
export const DEFAULT_POLICY = {
  backoff: {
    baseMs: 200,
    capMs: 30_000,
    maxAttempts: 8, // counting the first
    initialJitterMs: 50,
    retryAfterMaxMs: 30_000,
  },
  breaker: {
    consecutiveFailures: 20,
    failureRatio: 0.5,
    minThroughput: 20,
    windowMs: 10_000,
    openBaseMs: 250,
    openMaxMs: 1_000,
    halfOpenProbes: 5,
    closeAfterSuccesses: 3,
    probeTimeoutMs: 10_000,
  },
  deferral: { spreadMs: 1_000 },
  limits: {
    maxKeyBytes: 512,
    idleEvictionMs: 10 * 60_000,
  },
} as const;

// A deferral or backoff never lands in the last second before a deadline
// (kLastChanceWindow) nor in its last 250 ms (kLastChanceMargin); a
// half-open breaker with its probes taken parks for at least 100 ms.
export const LAST_CHANCE_WINDOW_MS = 1_000;
export const LAST_CHANCE_MARGIN_MS = 250;
export const MIN_HALF_OPEN_WAIT_MS = 100;

export type Random = () => number; // uniform in [0, 1)

// Uniform in [lo, hi) (lo for an empty range).
export function uniform(random: Random, lo: number, hi: number): number {
  return hi > lo ? lo + random() * (hi - lo) : lo;
}

// Decorrelated jitter, as core/engine/backoff.cc:
// min(cap, uniform[base, 3 * clamp(previous, base, cap)]).
export function decorrelatedJitterMs(previousMs: number, random: Random): number {
  const { baseMs, capMs } = DEFAULT_POLICY.backoff;
  const prev = Math.min(Math.max(previousMs, baseMs), Math.max(baseMs, capMs));
  return Math.min(capMs, uniform(random, baseMs, prev * 3));
}
