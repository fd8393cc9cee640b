// Engine configuration helpers: names, override matching, the glob matcher
// and the range validation of EngineConfig. See engine_config.h.
//
// Field paths in validation messages are those of proto/stagger/v1/config.proto
// (snake_case, "overrides[i]" for the repeated field), so the same message
// points at the right place whether the config came from a file or was built
// in code. Durations in messages are written as in a JSON config ("0.2s",
// "3600s"), so the value in the message is the value to write.
#include "core/engine/engine_config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/config_ranges.h"
#include "core/engine/validation_errors.h"

namespace stagger::engine {

const char* BackoffKindName(BackoffKind k) {
  switch (k) {
    case BackoffKind::kExponential:
      return "EXPONENTIAL";
    case BackoffKind::kEqualJitter:
      return "EQUAL_JITTER";
    case BackoffKind::kFullJitter:
      return "FULL_JITTER";
    case BackoffKind::kDecorrelatedJitter:
      return "DECORRELATED_JITTER";
  }
  return "UNKNOWN";
}

bool PolicyOverride::Matches(absl::string_view endpoint) const {
  switch (match) {
    case Match::kPrefix:
      return absl::StartsWith(endpoint, pattern);
    case Match::kGlob:
      return GlobMatch(pattern, endpoint);
  }
  return false;
}

std::string PolicyOverride::Name() const {
  return absl::StrCat(match == Match::kGlob ? "glob:" : "prefix:", pattern);
}

// Iterative matcher with a single backtrack point: on a mismatch only the
// most recent '*' is retried one byte further. That is enough for globs
// (a later '*' can absorb anything an earlier one could), so the work is at
// most O(|pattern| * |text|) and never exponential, whatever the pattern.
// There is no escape syntax and no character classes: every byte other than
// '*' and '?' matches itself.
bool GlobMatch(absl::string_view pattern, absl::string_view text) {
  constexpr size_t kNone = absl::string_view::npos;
  size_t p = 0;
  size_t t = 0;
  size_t star = kNone;  // index in pattern of the last '*' seen
  size_t mark = 0;      // text index that '*' is currently assumed to end at
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;  // let the '*' match the empty run first
    } else if (p < pattern.size() &&
               (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (star != kNone) {
      p = star + 1;  // the '*' absorbs one more byte
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {

// Duration as written in a JSON config: "0.2s", "30s", "-1.5s", "inf".
std::string Secs(absl::Duration d) {
  if (d == absl::InfiniteDuration()) return "inf";
  if (d == -absl::InfiniteDuration()) return "-inf";
  absl::Duration rem;
  const int64_t whole = absl::IDivDuration(d, absl::Seconds(1), &rem);
  int64_t nanos = absl::ToInt64Nanoseconds(rem);  // |nanos| < 1e9
  const bool negative = whole < 0 || nanos < 0;
  std::string out = negative ? "-" : "";
  absl::StrAppend(&out, whole < 0 ? -whole : whole);
  if (nanos != 0) {
    if (nanos < 0) nanos = -nanos;
    std::string frac = absl::StrCat(nanos + 1000000000).substr(1);  // 9 digits
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    absl::StrAppend(&out, ".", frac);
  }
  out += "s";
  return out;
}

using Scoped = ValidationErrors::ScopedField;

std::string Text(int64_t v) { return absl::StrCat(v); }
std::string Text(double v) { return absl::StrCat(v); }
std::string Text(absl::Duration v) { return Secs(v); }

// The value of `range`'s field, below the current path of `e`. Returns
// whether it is in range.
template <typename T>
bool Check(ValidationErrors* e, const FieldRange<T>& range, T v) {
  if (range.Contains(v)) return true;
  Scoped field(e, range.field);
  e->Add(absl::StrCat("must be in ", range.lo_open ? "(" : "[", Text(range.lo),
                      ", ", Text(range.hi), "], got ", Text(v)));
  return false;
}

// Real numbers must be finite first (NaN compares false to every bound).
bool Check(ValidationErrors* e, const RealRange& range, double v) {
  if (!std::isfinite(v)) {
    Scoped field(e, range.field);
    e->Add(absl::StrCat("must be a finite number, got ", v));
    return false;
  }
  return Check<double>(e, range, v);
}

// A real number outside the ranges table (see ValidateDeferral).
void CheckDouble(ValidationErrors* e, absl::string_view name, double v,
                 double lo, double hi) {
  Check(e, RealRange{"", name, lo, hi, lo}, v);
}

// `range`'s field must be at least `other` (the value of the sibling field
// `other_range`, already known to be in its own range) and at most its own
// upper bound.
void CheckAtLeast(ValidationErrors* e, const DurationRange& range,
                  absl::Duration v, const DurationRange& other_range,
                  absl::Duration other) {
  Scoped field(e, range.field);
  if (v < other) {
    e->Add(absl::StrCat("must be >= ", other_range.field, " (", Secs(other),
                        "), got ", Secs(v)));
  } else if (v > range.hi) {
    e->Add(absl::StrCat("must be <= ", Secs(range.hi), ", got ", Secs(v)));
  }
}

void ValidateBackoff(const BackoffParams& b, ValidationErrors* e) {
  switch (b.kind) {
    case BackoffKind::kExponential:
    case BackoffKind::kEqualJitter:
    case BackoffKind::kFullJitter:
    case BackoffKind::kDecorrelatedJitter:
      break;
    default: {
      Scoped field(e, "kind");
      e->Add(absl::StrCat("unknown value ", static_cast<int>(b.kind)));
    }
  }
  // cap >= base is reported on cap, and only when base itself is in range
  // (otherwise base's error says it all).
  if (Check(e, ranges::kBackoffBase, b.base)) {
    CheckAtLeast(e, ranges::kBackoffCap, b.cap, ranges::kBackoffBase, b.base);
  } else {
    Check(e, ranges::kBackoffCap, b.cap);
  }
  Check<int64_t>(e, ranges::kBackoffMaxAttempts, b.max_attempts);
  Check(e, ranges::kBackoffInitialJitter, b.initial_jitter);
  Check(e, ranges::kBackoffRetryAfterMax, b.retry_after_max);
  Check(e, ranges::kBackoffHorizon, b.horizon);
}

void ValidateBudget(const BudgetParams& b, ValidationErrors* e) {
  Check(e, ranges::kBudgetRatio, b.ratio);
  Check(e, ranges::kBudgetMinRetriesPerSecond, b.min_retries_per_second);
  Check(e, ranges::kBudgetWindow, b.window);
}

// close_after_successes <= half_open_probes, once half_open_probes is
// known to be in its own range; else close_after_successes' own range.
void ValidateCloseAfterSuccesses(const BreakerParams& b, ValidationErrors* e) {
  const IntRange& range = ranges::kBreakerCloseAfterSuccesses;
  if (!ranges::kBreakerHalfOpenProbes.Contains(b.half_open_probes)) {
    Check<int64_t>(e, range, b.close_after_successes);
    return;
  }
  Scoped field(e, range.field);
  if (b.close_after_successes < range.lo) {
    e->Add(absl::StrCat("must be >= ", range.lo, ", got ",
                        b.close_after_successes));
  } else if (b.close_after_successes > b.half_open_probes) {
    e->Add(absl::StrCat("must be <= ", ranges::kBreakerHalfOpenProbes.field,
                        " (", b.half_open_probes, "), got ",
                        b.close_after_successes));
  }
}

// Checked whether or not the breaker is enabled: a disabled breaker with
// nonsense parameters is a mistake waiting for the day it is enabled.
void ValidateBreaker(const BreakerParams& b, ValidationErrors* e) {
  Check<int64_t>(e, ranges::kBreakerConsecutiveFailures,
                 b.consecutive_failures);
  Check(e, ranges::kBreakerFailureRatio, b.failure_ratio);
  Check<int64_t>(e, ranges::kBreakerMinThroughput, b.min_throughput);
  Check(e, ranges::kBreakerWindow, b.window);
  // open_max >= open_base: as cap >= base.
  if (Check(e, ranges::kBreakerOpenBase, b.open_base)) {
    CheckAtLeast(e, ranges::kBreakerOpenMax, b.open_max,
                 ranges::kBreakerOpenBase, b.open_base);
  } else {
    Check(e, ranges::kBreakerOpenMax, b.open_max);
  }
  Check<int64_t>(e, ranges::kBreakerHalfOpenProbes, b.half_open_probes);
  ValidateCloseAfterSuccesses(b, e);
  Check(e, ranges::kBreakerProbeTimeout, b.probe_timeout);
}

// DeferralParams writes its defaults out (release_rate_per_second is not a
// row of the table); spread's must still be the table's.
static_assert(DeferralParams{}.spread == ranges::kDeferralSpread.default_value,
              "DeferralParams::spread's default must be config_ranges.h's");

void ValidateDeferral(const DeferralParams& d, ValidationErrors* e) {
  Check(e, ranges::kDeferralSpread, d.spread);
  // 0 = no cap (the pace is learned); a cap is 1..1e6.
  if (d.release_rate_per_second != 0) {
    CheckDouble(e, "release_rate_per_second", d.release_rate_per_second, 1,
                1e6);
  }
}

void ValidateDisable(const DisableParams& d, ValidationErrors* e) {
  Check(e, ranges::kDisableAfterUnavailable, d.after_unavailable);
  Check<int64_t>(e, ranges::kDisablePermanentFailures, d.permanent_failures);
  Check(e, ranges::kDisableWindow, d.window);
}

void ValidatePolicy(const PolicyParams& p, ValidationErrors* e) {
  {
    Scoped field(e, "backoff");
    ValidateBackoff(p.backoff, e);
  }
  {
    Scoped field(e, "budget");
    ValidateBudget(p.budget, e);
  }
  {
    Scoped field(e, "breaker");
    ValidateBreaker(p.breaker, e);
  }
  {
    Scoped field(e, "deferral");
    ValidateDeferral(p.deferral, e);
  }
  Scoped field(e, "disable");
  ValidateDisable(p.disable, e);
}

// The pattern is reported under the name of the proto oneof member that
// holds it ("prefix" / "glob").
void ValidateOverride(const PolicyOverride& o, ValidationErrors* e) {
  switch (o.match) {
    case PolicyOverride::Match::kPrefix:
    case PolicyOverride::Match::kGlob:
      if (o.pattern.empty()) {
        Scoped field(
            e, o.match == PolicyOverride::Match::kGlob ? "glob" : "prefix");
        e->Add("must not be empty");
      }
      break;
    default: {
      Scoped field(e, "match");
      e->Add(absl::StrCat("unknown value ", static_cast<int>(o.match)));
    }
  }
  Scoped field(e, "policy");
  ValidatePolicy(o.policy, e);
}

void ValidateLimits(const Limits& l, ValidationErrors* e) {
  Check<int64_t>(e, ranges::kLimitsMaxKeyBytes, l.max_key_bytes);
  Check<int64_t>(e, ranges::kLimitsMaxEndpoints, l.max_endpoints);
  Check(e, ranges::kLimitsIdleEviction, l.idle_eviction);
  Check<int64_t>(e, ranges::kLimitsMaxBatchSize, l.max_batch_size);
}

}  // namespace

void ValidateEngineConfig(const EngineConfig& config,
                          ValidationErrors* errors) {
  {
    Scoped field(errors, "default_policy");
    ValidatePolicy(config.default_policy, errors);
  }
  {
    Scoped field(errors, "overrides");
    if (config.overrides.size() > kMaxOverrides) {
      errors->Add(absl::StrCat("at most ", kMaxOverrides, " overrides, got ",
                               config.overrides.size()));
    }
    for (size_t i = 0; i < config.overrides.size(); ++i) {
      Scoped index(errors, i);
      ValidateOverride(config.overrides[i], errors);
    }
  }
  Scoped field(errors, "limits");
  ValidateLimits(config.limits, errors);
}

absl::Status ValidateEngineConfig(const EngineConfig& config) {
  ValidationErrors errors;
  ValidateEngineConfig(config, &errors);
  return errors.ToStatus();
}

absl::Duration EvictionPeriod(absl::Duration idle_eviction) {
  return std::clamp(idle_eviction / 10, kMinEvictionPeriod, kMaxEvictionPeriod);
}

}  // namespace stagger::engine
