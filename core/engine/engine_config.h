// Engine configuration: the policy parameters the engine decides with, as
// plain values. Defaults here are the embedded defaults of staggerd. Every
// numeric field's range and default is declared once, in config_ranges.h
// (which a test holds proto/stagger/v1/config.proto's comments to);
// server/config converts and validates the proto into this with
// ValidateEngineConfig, which is usable without protobuf.
#ifndef STAGGER_CORE_ENGINE_ENGINE_CONFIG_H_
#define STAGGER_CORE_ENGINE_ENGINE_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/config_ranges.h"
#include "core/engine/validation_errors.h"

namespace stagger::engine {

enum class BackoffKind : uint8_t {
  kExponential = 1,         // min(cap, base * 2^(n-1))
  kEqualJitter = 2,         // v/2 + uniform(0, v/2)
  kFullJitter = 3,          // uniform(0, v)
  kDecorrelatedJitter = 4,  // min(cap, uniform(base, prev * 3))
};
const char* BackoffKindName(BackoffKind k);

// Ranges and defaults of the fields below: config_ranges.h.

struct BackoffParams {
  BackoffKind kind = BackoffKind::kDecorrelatedJitter;
  absl::Duration base = ranges::kBackoffBase.default_value;
  absl::Duration cap = ranges::kBackoffCap.default_value;
  // Attempts per delivery, counting the first.
  int max_attempts = ranges::kBackoffMaxAttempts.default_value;
  absl::Duration initial_jitter = ranges::kBackoffInitialJitter.default_value;
  absl::Duration retry_after_max = ranges::kBackoffRetryAfterMax.default_value;
  // 0: no horizon.
  absl::Duration horizon = ranges::kBackoffHorizon.default_value;
};

struct BudgetParams {
  // Retries per first attempt.
  double ratio = ranges::kBudgetRatio.default_value;
  double min_retries_per_second =
      ranges::kBudgetMinRetriesPerSecond.default_value;
  absl::Duration window = ranges::kBudgetWindow.default_value;
};

struct BreakerParams {
  bool enabled = true;
  int consecutive_failures = ranges::kBreakerConsecutiveFailures.default_value;
  double failure_ratio = ranges::kBreakerFailureRatio.default_value;
  int min_throughput = ranges::kBreakerMinThroughput.default_value;
  absl::Duration window = ranges::kBreakerWindow.default_value;
  // Short by default: a probe round costs half_open_probes attempts
  // fleet-wide, so probing often is cheap and a recovery is noticed within
  // seconds (bench/sim: 5s/60s reaches 99% delivered ~12 s later).
  absl::Duration open_base = ranges::kBreakerOpenBase.default_value;
  absl::Duration open_max = ranges::kBreakerOpenMax.default_value;
  // Fleet-wide probe attempts admitted while half-open.
  int half_open_probes = ranges::kBreakerHalfOpenProbes.default_value;
  int close_after_successes = ranges::kBreakerCloseAfterSuccesses.default_value;
  absl::Duration probe_timeout = ranges::kBreakerProbeTimeout.default_value;
};

struct DeferralParams {
  absl::Duration spread = absl::Seconds(1);  // 0..10min
  // An operator's cap on the endpoint's learned release pace
  // (capacity_estimator.h), deliveries/s. 0 = no cap (the default): the
  // pace is learned from the endpoint's answers alone.
  double release_rate_per_second = 0;   // 0 or 1..1e6
};

// When the engine disables an endpoint by itself (every Admit is then
// GIVE_UP(ENDPOINT_DISABLED) until an operator enables it; docs/API.md,
// "Disabled endpoints"). Each trigger is off at 0, the default.
struct DisableParams {
  // The breaker has stayed away from CLOSED (OPEN or HALF_OPEN, no probe
  // closed it) this long.
  absl::Duration after_unavailable =
      ranges::kDisableAfterUnavailable.default_value;
  // This many PERMANENT_FAILURE reports (4xx but 408 and 429, e.g. 410
  // Gone), the last within `window` of the first, no success between.
  int permanent_failures = ranges::kDisablePermanentFailures.default_value;
  absl::Duration window = ranges::kDisableWindow.default_value;
};

struct PolicyParams {
  BackoffParams backoff;
  BudgetParams budget;
  BreakerParams breaker;
  DeferralParams deferral;
  DisableParams disable;
};

struct Limits {
  int max_key_bytes = ranges::kLimitsMaxKeyBytes.default_value;
  int64_t max_endpoints = ranges::kLimitsMaxEndpoints.default_value;
  absl::Duration idle_eviction = ranges::kLimitsIdleEviction.default_value;
  int max_batch_size = ranges::kLimitsMaxBatchSize.default_value;
};

// How often whoever owns an engine (staggerd, the client's local fallback)
// calls Engine::EvictIdle: a tenth of the idle-eviction age, clamped to
// [kMinEvictionPeriod, kMaxEvictionPeriod], so an endpoint is dropped at
// most 10% (or 60 s) after it went idle and the sweep (one pass over the
// table) runs at most once a second.
inline constexpr absl::Duration kMinEvictionPeriod = absl::Seconds(1);
inline constexpr absl::Duration kMaxEvictionPeriod = absl::Seconds(60);
absl::Duration EvictionPeriod(absl::Duration idle_eviction);

struct PolicyOverride {
  enum class Match : uint8_t { kPrefix, kGlob };
  Match match = Match::kPrefix;
  std::string pattern;  // non-empty
  PolicyParams policy;

  bool Matches(absl::string_view endpoint) const;
  std::string Name() const;  // "prefix:<pattern>" / "glob:<pattern>"
};

// At most this many overrides: a new endpoint is matched against each in
// turn, and its state keeps the index in 16 bits (endpoint_state.h).
inline constexpr size_t kMaxOverrides = 10000;

struct EngineConfig {
  PolicyParams default_policy;
  std::vector<PolicyOverride> overrides;  // first match wins; <= kMaxOverrides
  Limits limits;
};

// Shell-style glob over the whole string: '*' any run, '?' one byte.
bool GlobMatch(absl::string_view pattern, absl::string_view text);

// Every range error in `config`, one per line, each starting with its field
// path (e.g. "overrides[1].policy.backoff.cap: must be >= base (0.2s), got
// 0.1s"), in field order. OK if none.
absl::Status ValidateEngineConfig(const EngineConfig& config);

// The same errors as data: appended to *errors, below its current path.
void ValidateEngineConfig(const EngineConfig& config, ValidationErrors* errors);

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_ENGINE_CONFIG_H_
