// Config ranges: the one table of every numeric configuration field's
// range and default. ValidateEngineConfig checks against it, the structs of
// engine_config.h take their defaults from it, and
// tests/core/engine/config_ranges_test.cc holds proto/stagger/v1/config.proto's
// comments ("Default X; lo..hi") to it, so the three cannot drift apart.
//
// Contract:
//  - One row per numeric field of stagger.v1.config, named by its proto
//    message and field; the field name is also the path component of the
//    field's validation errors. Not here: Deferral.release_rate_per_second,
//    whose rule is its own (engine_config.cc).
//  - A value is valid if lo <= v <= hi (lo < v when lo_open). Outside, the
//    error reads "must be in [lo, hi], got v" ("(lo, hi]" when lo_open);
//    durations are written as in a JSON config ("0.2s").
//  - Relations between fields are not rows: ValidateEngineConfig checks
//    them in code (cap >= base, open_max >= open_base,
//    close_after_successes <= half_open_probes), on the second field and
//    only when the first is in its own range; otherwise the second field's
//    own row applies. retry_after_max's default follows cap when unset
//    (server/config); the value here is cap's default.
//  - Constants only (constexpr, no initialisation order issues).
#ifndef STAGGER_CORE_ENGINE_CONFIG_RANGES_H_
#define STAGGER_CORE_ENGINE_CONFIG_RANGES_H_

#include <cstdint>
#include <variant>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace stagger::engine {

template <typename T>
struct FieldRange {
  absl::string_view message;  // proto message, e.g. "Backoff"
  absl::string_view field;    // proto field, e.g. "base"
  T lo;
  T hi;
  T default_value;
  bool lo_open = false;  // (lo, hi] instead of [lo, hi]

  constexpr bool Contains(T v) const {
    return (lo_open ? lo < v : !(v < lo)) && !(hi < v);
  }
};

using IntRange = FieldRange<int64_t>;
using RealRange = FieldRange<double>;  // NaN and infinities never valid
using DurationRange = FieldRange<absl::Duration>;

namespace ranges {

// clang-format off
// Backoff
inline constexpr DurationRange kBackoffBase{
    "Backoff", "base",
    absl::Milliseconds(1), absl::Hours(1), absl::Milliseconds(200)};
inline constexpr DurationRange kBackoffCap{
    "Backoff", "cap",
    absl::Milliseconds(1), absl::Hours(1), absl::Seconds(30)};
inline constexpr IntRange kBackoffMaxAttempts{
    "Backoff", "max_attempts",
    1, 100, 8};
inline constexpr DurationRange kBackoffInitialJitter{
    "Backoff", "initial_jitter",
    absl::ZeroDuration(), absl::Seconds(10), absl::Milliseconds(50)};
inline constexpr DurationRange kBackoffRetryAfterMax{
    "Backoff", "retry_after_max",
    absl::ZeroDuration(), absl::Hours(24), kBackoffCap.default_value};
inline constexpr DurationRange kBackoffHorizon{
    "Backoff", "horizon",
    absl::ZeroDuration(), absl::Hours(24 * 7), absl::ZeroDuration()};

// RetryBudget
inline constexpr RealRange kBudgetRatio{
    "RetryBudget", "ratio",
    0, 10, 0.2};
inline constexpr RealRange kBudgetMinRetriesPerSecond{
    "RetryBudget", "min_retries_per_second",
    0, 1e6, 10};
inline constexpr DurationRange kBudgetWindow{
    "RetryBudget", "window",
    absl::Seconds(1), absl::Minutes(10), absl::Seconds(10)};

// CircuitBreaker
inline constexpr IntRange kBreakerConsecutiveFailures{
    "CircuitBreaker", "consecutive_failures",
    1, 1000000, 20};
inline constexpr RealRange kBreakerFailureRatio{
    "CircuitBreaker", "failure_ratio",
    0, 1, 0.5, /*lo_open=*/true};
inline constexpr IntRange kBreakerMinThroughput{
    "CircuitBreaker", "min_throughput",
    1, 1000000000, 20};
inline constexpr DurationRange kBreakerWindow{
    "CircuitBreaker", "window",
    absl::Seconds(1), absl::Minutes(10), absl::Seconds(10)};
inline constexpr DurationRange kBreakerOpenBase{
    "CircuitBreaker", "open_base",
    absl::Milliseconds(10), absl::Hours(1), absl::Milliseconds(250)};
inline constexpr DurationRange kBreakerOpenMax{
    "CircuitBreaker", "open_max",
    absl::Milliseconds(10), absl::Hours(24), absl::Seconds(1)};
inline constexpr IntRange kBreakerHalfOpenProbes{
    "CircuitBreaker", "half_open_probes",
    1, 1000, 5};
inline constexpr IntRange kBreakerCloseAfterSuccesses{
    "CircuitBreaker", "close_after_successes",
    1, 1000, 3};
inline constexpr DurationRange kBreakerProbeTimeout{
    "CircuitBreaker", "probe_timeout",
    absl::Milliseconds(100), absl::Minutes(10), absl::Seconds(10)};

// Deferral
inline constexpr DurationRange kDeferralSpread{
    "Deferral", "spread",
    absl::ZeroDuration(), absl::Minutes(10), absl::Seconds(1)};

// Disable (0 turns a trigger off)
inline constexpr DurationRange kDisableAfterUnavailable{
    "Disable", "after_unavailable",
    absl::ZeroDuration(), absl::Hours(24 * 30), absl::ZeroDuration()};
inline constexpr IntRange kDisablePermanentFailures{
    "Disable", "permanent_failures",
    0, 1000000, 0};
inline constexpr DurationRange kDisableWindow{
    "Disable", "window",
    absl::Seconds(1), absl::Hours(24 * 30), absl::Hours(1)};

// Limits
inline constexpr IntRange kLimitsMaxKeyBytes{
    "Limits", "max_key_bytes",
    1, 4096, 512};
inline constexpr IntRange kLimitsMaxEndpoints{
    "Limits", "max_endpoints",
    1, 100000000, 1000000};
inline constexpr DurationRange kLimitsIdleEviction{
    "Limits", "idle_eviction",
    absl::Seconds(1), absl::Hours(24 * 7), absl::Minutes(10)};
inline constexpr IntRange kLimitsMaxBatchSize{
    "Limits", "max_batch_size",
    1, 100000, 1000};
// clang-format on

// Every row above, once, for code that checks the table as a whole.
using AnyFieldRange =
    std::variant<const IntRange*, const RealRange*, const DurationRange*>;
inline constexpr AnyFieldRange kAll[] = {
    &kBackoffBase,
    &kBackoffCap,
    &kBackoffMaxAttempts,
    &kBackoffInitialJitter,
    &kBackoffRetryAfterMax,
    &kBackoffHorizon,
    &kBudgetRatio,
    &kBudgetMinRetriesPerSecond,
    &kBudgetWindow,
    &kBreakerConsecutiveFailures,
    &kBreakerFailureRatio,
    &kBreakerMinThroughput,
    &kBreakerWindow,
    &kBreakerOpenBase,
    &kBreakerOpenMax,
    &kBreakerHalfOpenProbes,
    &kBreakerCloseAfterSuccesses,
    &kBreakerProbeTimeout,
    &kDeferralSpread,
    &kDisableAfterUnavailable,
    &kDisablePermanentFailures,
    &kDisableWindow,
    &kLimitsMaxKeyBytes,
    &kLimitsMaxEndpoints,
    &kLimitsIdleEviction,
    &kLimitsMaxBatchSize,
};

}  // namespace ranges
}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_CONFIG_RANGES_H_
