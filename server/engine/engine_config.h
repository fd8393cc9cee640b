// Engine configuration: the policy parameters the engine decides with, as
// plain values. Defaults here are the embedded defaults of staggerd and equal
// those documented in proto/stagger/v1/config.proto; server/config converts
// and validates the proto into this. Ranges are checked there
// (ValidateEngineConfig here is the same check, usable without protobuf).
#ifndef STAGGER_SERVER_ENGINE_ENGINE_CONFIG_H_
#define STAGGER_SERVER_ENGINE_ENGINE_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/validation_errors.h"

namespace stagger::engine {

enum class BackoffKind : uint8_t {
  kExponential = 1,         // min(cap, base * 2^(n-1))
  kEqualJitter = 2,         // v/2 + uniform(0, v/2)
  kFullJitter = 3,          // uniform(0, v)
  kDecorrelatedJitter = 4,  // min(cap, uniform(base, prev * 3))
};
const char* BackoffKindName(BackoffKind k);

struct BackoffParams {
  BackoffKind kind = BackoffKind::kDecorrelatedJitter;
  absl::Duration base = absl::Milliseconds(200);   // 1ms..cap
  absl::Duration cap = absl::Seconds(30);          // base..1h
  int max_attempts = 8;                            // 1..100, counts the first
  absl::Duration initial_jitter = absl::Milliseconds(50);  // 0..10s
  absl::Duration retry_after_max = absl::Seconds(30);      // 0..1 day
  absl::Duration horizon = absl::ZeroDuration();   // 0 = none; 0..7 days
};

struct BudgetParams {
  double ratio = 0.2;                    // 0..10 retries per first attempt
  double min_retries_per_second = 10.0;  // 0..1e6
  absl::Duration window = absl::Seconds(10);  // 1s..10min
};

struct BreakerParams {
  bool enabled = true;
  int consecutive_failures = 20;   // 1..1e6
  double failure_ratio = 0.5;      // (0, 1]
  int min_throughput = 20;         // 1..1e9
  absl::Duration window = absl::Seconds(10);       // 1s..10min
  // Short by default: a probe round costs half_open_probes attempts
  // fleet-wide, so probing often is cheap and a recovery is noticed within
  // seconds (bench/sim: 5s/60s reaches 99% delivered ~12 s later).
  absl::Duration open_base = absl::Seconds(1);     // 10ms..1h
  absl::Duration open_max = absl::Seconds(4);      // open_base..1 day
  int half_open_probes = 5;        // 1..1000, fleet-wide
  int close_after_successes = 3;   // 1..half_open_probes
  absl::Duration probe_timeout = absl::Seconds(10);  // 100ms..10min
};

struct DeferralParams {
  absl::Duration spread = absl::Seconds(1);  // 0..10min
  // Deferred deliveries released per second, at most: the ceiling of the
  // endpoint's adaptive release pace (engine.h), which halves on failures
  // while a backlog is released and grows back, never below 1/64 of this.
  double release_rate_per_second = 1000.0;   // 1..1e6
};

struct PolicyParams {
  BackoffParams backoff;
  BudgetParams budget;
  BreakerParams breaker;
  DeferralParams deferral;
};

struct Limits {
  int max_key_bytes = 512;           // 1..4096
  int64_t max_endpoints = 1000000;   // 1..1e8
  absl::Duration idle_eviction = absl::Minutes(10);  // 1s..7 days
  int max_batch_size = 1000;         // 1..100000
};

struct PolicyOverride {
  enum class Match : uint8_t { kPrefix, kGlob };
  Match match = Match::kPrefix;
  std::string pattern;  // non-empty
  PolicyParams policy;

  bool Matches(absl::string_view endpoint) const;
  std::string Name() const;  // "prefix:<pattern>" / "glob:<pattern>"
};

struct EngineConfig {
  PolicyParams default_policy;
  std::vector<PolicyOverride> overrides;  // first match wins
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

#endif  // STAGGER_SERVER_ENGINE_ENGINE_CONFIG_H_
