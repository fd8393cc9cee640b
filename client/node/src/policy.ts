// LocalPolicy: what the local fallback decides with (local_engine.ts).
// Its defaults are staggerd's embedded defaults (core/engine/
// config_ranges.h); tests/vectors/client_vectors.json (policy_defaults)
// holds both to them. The same fields as the Python client's LocalPolicy
// and the Go client's, in milliseconds. checkPolicy refuses values outside
// the engine's ranges with messages naming the field
// ("local_policy.backoff_cap: must be in [1ms, 1h], got 0ms") and the
// engine's relations (cap >= base, open_max >= open_base,
// close_after_successes <= half_open_probes).
export interface LocalPolicy {
  // Decorrelated jitter: min(cap, base + u * (3 * previous - base)).
  backoffBaseMs: number;
  backoffCapMs: number;
  maxAttempts: number; // per delivery, counting the first
  initialJitterMs: number; // a first attempt goes after u * this
  retryAfterMaxMs: number; // a longer Retry-After is honoured as this
  // The breaker opens after consecutiveFailures in a row, or when at least
  // failureRatio of the attempts over windowMs failed and there were at
  // least minThroughput of them ...
  consecutiveFailures: number;
  failureRatio: number;
  minThroughput: number;
  windowMs: number;
  // ... for min(openMax, openBase * 2^(trips-1)) * (0.8 + 0.4 u); then
  // halfOpenProbes probes may go and closeAfterSuccesses close it. Probes
  // that never report free their slots after probeTimeoutMs.
  openBaseMs: number;
  openMaxMs: number;
  halfOpenProbes: number;
  closeAfterSuccesses: number;
  probeTimeoutMs: number;
  spreadMs: number; // deferred deliveries come back spread over this
  maxKeyBytes: number; // staggerd's limits.max_key_bytes (the local checks)
  maxEndpoints: number; // remembered at most, least recently used forgotten
}

export const DEFAULT_POLICY: Readonly<LocalPolicy> = Object.freeze({
  backoffBaseMs: 200,
  backoffCapMs: 30_000,
  maxAttempts: 8,
  initialJitterMs: 50,
  retryAfterMaxMs: 30_000,
  consecutiveFailures: 20,
  failureRatio: 0.5,
  minThroughput: 20,
  windowMs: 10_000,
  openBaseMs: 250,
  openMaxMs: 1_000,
  halfOpenProbes: 5,
  closeAfterSuccesses: 3,
  probeTimeoutMs: 10_000,
  spreadMs: 1_000,
  maxKeyBytes: 512,
  maxEndpoints: 100_000,
});

// Endpoints idle this long are dropped (staggerd's limits.idle_eviction).
export const IDLE_EVICTION_MS = 10 * 60_000;

// A deferral or backoff never lands in the last second before a deadline
// (kLastChanceWindow) nor in its last 250 ms (kLastChanceMargin); a
// half-open breaker with its probes taken parks for at least 100 ms.
export const LAST_CHANCE_WINDOW_MS = 1_000;
export const LAST_CHANCE_MARGIN_MS = 250;
export const MIN_HALF_OPEN_WAIT_MS = 100;

export type Random = () => number; // uniform in [0, 1)

// Uniform in [lo, hi): one draw, only when hi > lo (lo otherwise).
export function uniform(random: Random, lo: number, hi: number): number {
  return hi > lo ? lo + random() * (hi - lo) : lo;
}

// The policy's range rows: [field, snake_case name, lo, hi, unit].
const RANGES: [keyof LocalPolicy, string, number, number, "ms" | ""][] = [
  ["backoffBaseMs", "backoff_base", 1, 3_600_000, "ms"],
  ["backoffCapMs", "backoff_cap", 1, 3_600_000, "ms"],
  ["maxAttempts", "max_attempts", 1, 100, ""],
  ["initialJitterMs", "initial_jitter", 0, 10_000, "ms"],
  ["retryAfterMaxMs", "retry_after_max", 0, 86_400_000, "ms"],
  ["consecutiveFailures", "consecutive_failures", 1, 1_000_000, ""],
  ["minThroughput", "min_throughput", 1, 1_000_000_000, ""],
  ["windowMs", "window", 1_000, 600_000, "ms"],
  ["openBaseMs", "open_base", 10, 3_600_000, "ms"],
  ["openMaxMs", "open_max", 10, 86_400_000, "ms"],
  ["halfOpenProbes", "half_open_probes", 1, 1_000, ""],
  ["closeAfterSuccesses", "close_after_successes", 1, 1_000, ""],
  ["probeTimeoutMs", "probe_timeout", 100, 600_000, "ms"],
  ["spreadMs", "spread", 0, 600_000, "ms"],
  ["maxKeyBytes", "max_key_bytes", 1, 4_096, ""],
  ["maxEndpoints", "max_endpoints", 1, 100_000_000, ""],
];

// The policy's errors, one per field ([] if it is valid).
export function checkPolicy(p: LocalPolicy): string[] {
  const errors: string[] = [];
  for (const [field, name, lo, hi, unit] of RANGES) {
    const v = p[field];
    if (!(Number.isFinite(v) && v >= lo && v <= hi)) {
      errors.push(`local_policy.${name}: must be in [${lo}${unit}, ${hi}${unit}], got ${v}${unit}`);
    }
  }
  if (!(p.failureRatio > 0 && p.failureRatio <= 1)) {
    errors.push(`local_policy.failure_ratio: must be in (0, 1], got ${p.failureRatio}`);
  }
  if (errors.length > 0) return errors;
  if (p.backoffCapMs < p.backoffBaseMs) errors.push(`local_policy.backoff_cap: must be >= backoff_base (${p.backoffBaseMs}ms), got ${p.backoffCapMs}ms`);
  if (p.openMaxMs < p.openBaseMs) errors.push(`local_policy.open_max: must be >= open_base (${p.openBaseMs}ms), got ${p.openMaxMs}ms`);
  if (p.closeAfterSuccesses > p.halfOpenProbes) {
    errors.push(`local_policy.close_after_successes: must be <= half_open_probes (${p.halfOpenProbes}), got ${p.closeAfterSuccesses}`);
  }
  return errors;
}
