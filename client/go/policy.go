package stagger

import (
	"math"
	"time"
)

// LocalPolicy is what the local fallback decides with
// (docs/CLIENT_CONTRACT.md, "The fallback"). DefaultPolicy is staggerd's
// embedded defaults (core/engine/config_ranges.h);
// tests/vectors/client_vectors.json (policy_defaults) holds it to them.
// The same fields as the Python and TypeScript clients' LocalPolicy.
type LocalPolicy struct {
	// Decorrelated jitter: min(cap, base + u * (3 * previous - base)).
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// Attempts per delivery, counting the first.
	MaxAttempts int
	// A first attempt goes after u * InitialJitter.
	InitialJitter time.Duration
	// A longer Retry-After is honoured as this.
	RetryAfterMax time.Duration
	// The breaker opens after ConsecutiveFailures in a row, or when at
	// least FailureRatio of the attempts over Window failed and there were
	// at least MinThroughput of them ...
	ConsecutiveFailures int
	FailureRatio        float64
	MinThroughput       int
	Window              time.Duration
	// ... for min(OpenMax, OpenBase * 2^(trips-1)) * (0.8 + 0.4 u); then
	// HalfOpenProbes probes may go and CloseAfterSuccesses close it.
	// Probes that never report free their slots after ProbeTimeout.
	OpenBase            time.Duration
	OpenMax             time.Duration
	HalfOpenProbes      int
	CloseAfterSuccesses int
	ProbeTimeout        time.Duration
	// Deferred deliveries come back spread over this.
	Spread time.Duration
	// staggerd's limits.max_key_bytes, for the local checks.
	MaxKeyBytes int
	// Endpoints remembered at most, the least recently used forgotten first.
	MaxEndpoints int
}

// DefaultPolicy is staggerd's embedded defaults.
func DefaultPolicy() LocalPolicy {
	return LocalPolicy{
		BackoffBase: 200 * time.Millisecond, BackoffCap: 30 * time.Second, MaxAttempts: 8,
		InitialJitter: 50 * time.Millisecond, RetryAfterMax: 30 * time.Second,
		ConsecutiveFailures: 20, FailureRatio: 0.5, MinThroughput: 20, Window: 10 * time.Second,
		OpenBase: 250 * time.Millisecond, OpenMax: time.Second, HalfOpenProbes: 5,
		CloseAfterSuccesses: 3, ProbeTimeout: 10 * time.Second, Spread: time.Second,
		MaxKeyBytes: 512, MaxEndpoints: 100_000,
	}
}

type durationRange struct {
	name   string
	v      time.Duration
	lo, hi time.Duration
}

type intRange struct {
	name   string
	v      int
	lo, hi int
}

// Check refuses values outside the engine's ranges, naming the field
// ("local_policy.backoff_cap: must be in [1ms, 1h0m0s], got 0s"), and the
// engine's relations (cap >= base, open_max >= open_base,
// close_after_successes <= half_open_probes).
func (p LocalPolicy) Check() error {
	for _, r := range []durationRange{
		{"backoff_base", p.BackoffBase, time.Millisecond, time.Hour},
		{"backoff_cap", p.BackoffCap, time.Millisecond, time.Hour},
		{"initial_jitter", p.InitialJitter, 0, 10 * time.Second},
		{"retry_after_max", p.RetryAfterMax, 0, 24 * time.Hour},
		{"window", p.Window, time.Second, 10 * time.Minute},
		{"open_base", p.OpenBase, 10 * time.Millisecond, time.Hour},
		{"open_max", p.OpenMax, 10 * time.Millisecond, 24 * time.Hour},
		{"probe_timeout", p.ProbeTimeout, 100 * time.Millisecond, 10 * time.Minute},
		{"spread", p.Spread, 0, 10 * time.Minute},
	} {
		if r.v < r.lo || r.v > r.hi {
			return invalid("local_policy.%s: must be in [%v, %v], got %v", r.name, r.lo, r.hi, r.v)
		}
	}
	for _, r := range []intRange{
		{"max_attempts", p.MaxAttempts, 1, 100},
		{"consecutive_failures", p.ConsecutiveFailures, 1, 1_000_000},
		{"min_throughput", p.MinThroughput, 1, 1_000_000_000},
		{"half_open_probes", p.HalfOpenProbes, 1, 1000},
		{"close_after_successes", p.CloseAfterSuccesses, 1, 1000},
		{"max_key_bytes", p.MaxKeyBytes, 1, 4096},
		{"max_endpoints", p.MaxEndpoints, 1, 100_000_000},
	} {
		if r.v < r.lo || r.v > r.hi {
			return invalid("local_policy.%s: must be in [%d, %d], got %d", r.name, r.lo, r.hi, r.v)
		}
	}
	if !(p.FailureRatio > 0 && p.FailureRatio <= 1) || math.IsNaN(p.FailureRatio) {
		return invalid("local_policy.failure_ratio: must be in (0, 1], got %v", p.FailureRatio)
	}
	return p.checkRelations()
}

func (p LocalPolicy) checkRelations() error {
	switch {
	case p.BackoffCap < p.BackoffBase:
		return invalid("local_policy.backoff_cap: must be >= backoff_base (%v), got %v", p.BackoffBase, p.BackoffCap)
	case p.OpenMax < p.OpenBase:
		return invalid("local_policy.open_max: must be >= open_base (%v), got %v", p.OpenBase, p.OpenMax)
	case p.CloseAfterSuccesses > p.HalfOpenProbes:
		return invalid("local_policy.close_after_successes: must be <= half_open_probes (%d), got %d",
			p.HalfOpenProbes, p.CloseAfterSuccesses)
	}
	return nil
}
