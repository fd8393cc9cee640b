// Engine configuration helpers: names, override matching, the glob matcher
// and the range validation of EngineConfig. See engine_config.h.
//
// Field paths in validation messages are those of proto/stagger/v1/config.proto
// (snake_case, "overrides[i]" for the repeated field), so the same message
// points at the right place whether the config came from a file or was built
// in code. Durations in messages are written as in a JSON config ("0.2s",
// "3600s"), so the value in the message is the value to write.
#include "server/engine/engine_config.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/engine/validation_errors.h"

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

// Range checks of one field, named by `name` below the current path of `e`.

// Inclusive range [lo, hi].
void CheckInt(ValidationErrors* e, absl::string_view name, int64_t v,
              int64_t lo, int64_t hi) {
  if (v < lo || v > hi) {
    ValidationErrors::ScopedField field(e, name);
    e->Add(absl::StrCat("must be in [", lo, ", ", hi, "], got ", v));
  }
}

// [lo, hi], or (lo, hi] when `lo_open`; NaN and infinities are refused.
void CheckDouble(ValidationErrors* e, absl::string_view name, double v,
                 double lo, double hi, bool lo_open = false) {
  ValidationErrors::ScopedField field(e, name);
  if (!std::isfinite(v)) {
    e->Add(absl::StrCat("must be a finite number, got ", v));
  } else if ((lo_open ? v <= lo : v < lo) || v > hi) {
    e->Add(absl::StrCat("must be in ", lo_open ? "(" : "[", lo, ", ", hi,
                        "], got ", v));
  }
}

// Inclusive range [lo, hi]. Returns whether `v` was in range.
bool CheckDuration(ValidationErrors* e, absl::string_view name,
                   absl::Duration v, absl::Duration lo, absl::Duration hi) {
  if (v >= lo && v <= hi) return true;
  ValidationErrors::ScopedField field(e, name);
  e->Add(absl::StrCat("must be in [", Secs(lo), ", ", Secs(hi), "], got ",
                      Secs(v)));
  return false;
}

// [other, hi] where `other` is the value of the sibling field `other_name`
// (already known to be in its own range).
void CheckDurationAtLeast(ValidationErrors* e, absl::string_view name,
                          absl::Duration v, absl::string_view other_name,
                          absl::Duration other, absl::Duration hi) {
  ValidationErrors::ScopedField field(e, name);
  if (v < other) {
    e->Add(absl::StrCat("must be >= ", other_name, " (", Secs(other), "), got ",
                        Secs(v)));
  } else if (v > hi) {
    e->Add(absl::StrCat("must be <= ", Secs(hi), ", got ", Secs(v)));
  }
}

constexpr absl::Duration kDay = absl::Hours(24);

void ValidateBackoff(const BackoffParams& b, ValidationErrors* e) {
  switch (b.kind) {
    case BackoffKind::kExponential:
    case BackoffKind::kEqualJitter:
    case BackoffKind::kFullJitter:
    case BackoffKind::kDecorrelatedJitter:
      break;
    default: {
      ValidationErrors::ScopedField field(e, "kind");
      e->Add(absl::StrCat("unknown value ", static_cast<int>(b.kind)));
    }
  }
  // base: 1ms..cap; cap: base..1h. The relation is reported on cap, and
  // only when base itself is in range (otherwise base's error says it all).
  const bool base_ok =
      CheckDuration(e, "base", b.base, absl::Milliseconds(1), absl::Hours(1));
  if (base_ok) {
    CheckDurationAtLeast(e, "cap", b.cap, "base", b.base, absl::Hours(1));
  } else {
    CheckDuration(e, "cap", b.cap, absl::Milliseconds(1), absl::Hours(1));
  }
  CheckInt(e, "max_attempts", b.max_attempts, 1, 100);
  CheckDuration(e, "initial_jitter", b.initial_jitter, absl::ZeroDuration(),
                absl::Seconds(10));
  CheckDuration(e, "retry_after_max", b.retry_after_max, absl::ZeroDuration(),
                kDay);
  CheckDuration(e, "horizon", b.horizon, absl::ZeroDuration(), 7 * kDay);
}

void ValidateBudget(const BudgetParams& b, ValidationErrors* e) {
  CheckDouble(e, "ratio", b.ratio, 0, 10);
  CheckDouble(e, "min_retries_per_second", b.min_retries_per_second, 0, 1e6);
  CheckDuration(e, "window", b.window, absl::Seconds(1), absl::Minutes(10));
}

// close_after_successes: 1..half_open_probes, once half_open_probes is
// known to be in its own range (1..1000); else 1..1000.
void ValidateCloseAfterSuccesses(const BreakerParams& b, ValidationErrors* e) {
  if (b.half_open_probes < 1 || b.half_open_probes > 1000) {
    CheckInt(e, "close_after_successes", b.close_after_successes, 1, 1000);
    return;
  }
  ValidationErrors::ScopedField field(e, "close_after_successes");
  if (b.close_after_successes < 1) {
    e->Add(absl::StrCat("must be >= 1, got ", b.close_after_successes));
  } else if (b.close_after_successes > b.half_open_probes) {
    e->Add(absl::StrCat("must be <= half_open_probes (", b.half_open_probes,
                        "), got ", b.close_after_successes));
  }
}

// Checked whether or not the breaker is enabled: a disabled breaker with
// nonsense parameters is a mistake waiting for the day it is enabled.
void ValidateBreaker(const BreakerParams& b, ValidationErrors* e) {
  CheckInt(e, "consecutive_failures", b.consecutive_failures, 1, 1000000);
  CheckDouble(e, "failure_ratio", b.failure_ratio, 0, 1, /*lo_open=*/true);
  CheckInt(e, "min_throughput", b.min_throughput, 1, 1000000000);
  CheckDuration(e, "window", b.window, absl::Seconds(1), absl::Minutes(10));
  const bool open_base_ok = CheckDuration(
      e, "open_base", b.open_base, absl::Milliseconds(10), absl::Hours(1));
  if (open_base_ok) {
    CheckDurationAtLeast(e, "open_max", b.open_max, "open_base", b.open_base,
                         kDay);
  } else {
    CheckDuration(e, "open_max", b.open_max, absl::Milliseconds(10), kDay);
  }
  CheckInt(e, "half_open_probes", b.half_open_probes, 1, 1000);
  ValidateCloseAfterSuccesses(b, e);
  CheckDuration(e, "probe_timeout", b.probe_timeout, absl::Milliseconds(100),
                absl::Minutes(10));
}

void ValidateDeferral(const DeferralParams& d, ValidationErrors* e) {
  CheckDuration(e, "spread", d.spread, absl::ZeroDuration(), absl::Minutes(10));
  CheckDouble(e, "release_rate_per_second", d.release_rate_per_second, 1, 1e6);
}

void ValidatePolicy(const PolicyParams& p, ValidationErrors* e) {
  {
    ValidationErrors::ScopedField field(e, "backoff");
    ValidateBackoff(p.backoff, e);
  }
  {
    ValidationErrors::ScopedField field(e, "budget");
    ValidateBudget(p.budget, e);
  }
  {
    ValidationErrors::ScopedField field(e, "breaker");
    ValidateBreaker(p.breaker, e);
  }
  ValidationErrors::ScopedField field(e, "deferral");
  ValidateDeferral(p.deferral, e);
}

// The pattern is reported under the name of the proto oneof member that
// holds it ("prefix" / "glob").
void ValidateOverride(const PolicyOverride& o, ValidationErrors* e) {
  switch (o.match) {
    case PolicyOverride::Match::kPrefix:
    case PolicyOverride::Match::kGlob:
      if (o.pattern.empty()) {
        ValidationErrors::ScopedField field(
            e, o.match == PolicyOverride::Match::kGlob ? "glob" : "prefix");
        e->Add("must not be empty");
      }
      break;
    default: {
      ValidationErrors::ScopedField field(e, "match");
      e->Add(absl::StrCat("unknown value ", static_cast<int>(o.match)));
    }
  }
  ValidationErrors::ScopedField field(e, "policy");
  ValidatePolicy(o.policy, e);
}

void ValidateLimits(const Limits& l, ValidationErrors* e) {
  CheckInt(e, "max_key_bytes", l.max_key_bytes, 1, 4096);
  CheckInt(e, "max_endpoints", l.max_endpoints, 1, 100000000);
  CheckDuration(e, "idle_eviction", l.idle_eviction, absl::Seconds(1),
                7 * kDay);
  CheckInt(e, "max_batch_size", l.max_batch_size, 1, 100000);
}

}  // namespace

void ValidateEngineConfig(const EngineConfig& config,
                          ValidationErrors* errors) {
  {
    ValidationErrors::ScopedField field(errors, "default_policy");
    ValidatePolicy(config.default_policy, errors);
  }
  {
    ValidationErrors::ScopedField field(errors, "overrides");
    for (size_t i = 0; i < config.overrides.size(); ++i) {
      ValidationErrors::ScopedField index(errors, i);
      ValidateOverride(config.overrides[i], errors);
    }
  }
  ValidationErrors::ScopedField field(errors, "limits");
  ValidateLimits(config.limits, errors);
}

absl::Status ValidateEngineConfig(const EngineConfig& config) {
  ValidationErrors errors;
  ValidateEngineConfig(config, &errors);
  return errors.ToStatus();
}

}  // namespace stagger::engine
