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
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

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

class Errors {
 public:
  void Add(absl::string_view path, absl::string_view message) {
    lines_.push_back(absl::StrCat(path, ": ", message));
  }

  // Inclusive range [lo, hi].
  void Int(absl::string_view path, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi) {
      Add(path, absl::StrCat("must be in [", lo, ", ", hi, "], got ", v));
    }
  }

  // [lo, hi], or (lo, hi] when `lo_open`; NaN and infinities are refused.
  void Double(absl::string_view path, double v, double lo, double hi,
              bool lo_open = false) {
    if (!std::isfinite(v)) {
      Add(path, absl::StrCat("must be a finite number, got ", v));
      return;
    }
    if ((lo_open ? v <= lo : v < lo) || v > hi) {
      Add(path, absl::StrCat("must be in ", lo_open ? "(" : "[", lo, ", ", hi,
                             "], got ", v));
    }
  }

  // Inclusive range [lo, hi]. Returns whether `v` was in range.
  bool Duration(absl::string_view path, absl::Duration v, absl::Duration lo,
                absl::Duration hi) {
    if (v < lo || v > hi) {
      Add(path, absl::StrCat("must be in [", Secs(lo), ", ", Secs(hi),
                             "], got ", Secs(v)));
      return false;
    }
    return true;
  }

  // [other, hi] where `other` is the value of the sibling field `other_name`
  // (already known to be in its own range).
  void DurationAtLeast(absl::string_view path, absl::Duration v,
                       absl::string_view other_name, absl::Duration other,
                       absl::Duration hi) {
    if (v < other) {
      Add(path, absl::StrCat("must be >= ", other_name, " (", Secs(other),
                             "), got ", Secs(v)));
    } else if (v > hi) {
      Add(path, absl::StrCat("must be <= ", Secs(hi), ", got ", Secs(v)));
    }
  }

  absl::Status ToStatus() const {
    if (lines_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrJoin(lines_, "\n"));
  }

 private:
  std::vector<std::string> lines_;
};

constexpr absl::Duration kDay = absl::Hours(24);

void ValidateBackoff(const BackoffParams& b, const std::string& path,
                     Errors& e) {
  switch (b.kind) {
    case BackoffKind::kExponential:
    case BackoffKind::kEqualJitter:
    case BackoffKind::kFullJitter:
    case BackoffKind::kDecorrelatedJitter:
      break;
    default:
      e.Add(path + ".kind",
            absl::StrCat("unknown value ", static_cast<int>(b.kind)));
  }
  // base: 1ms..cap; cap: base..1h. The relation is reported on cap, and
  // only when base itself is in range (otherwise base's error says it all).
  const bool base_ok =
      e.Duration(path + ".base", b.base, absl::Milliseconds(1), absl::Hours(1));
  if (base_ok) {
    e.DurationAtLeast(path + ".cap", b.cap, "base", b.base, absl::Hours(1));
  } else {
    e.Duration(path + ".cap", b.cap, absl::Milliseconds(1), absl::Hours(1));
  }
  e.Int(path + ".max_attempts", b.max_attempts, 1, 100);
  e.Duration(path + ".initial_jitter", b.initial_jitter, absl::ZeroDuration(),
             absl::Seconds(10));
  e.Duration(path + ".retry_after_max", b.retry_after_max, absl::ZeroDuration(),
             kDay);
  e.Duration(path + ".horizon", b.horizon, absl::ZeroDuration(), 7 * kDay);
}

void ValidateBudget(const BudgetParams& b, const std::string& path, Errors& e) {
  e.Double(path + ".ratio", b.ratio, 0, 10);
  e.Double(path + ".min_retries_per_second", b.min_retries_per_second, 0, 1e6);
  e.Duration(path + ".window", b.window, absl::Seconds(1), absl::Minutes(10));
}

// Checked whether or not the breaker is enabled: a disabled breaker with
// nonsense parameters is a mistake waiting for the day it is enabled.
void ValidateBreaker(const BreakerParams& b, const std::string& path,
                     Errors& e) {
  e.Int(path + ".consecutive_failures", b.consecutive_failures, 1, 1000000);
  e.Double(path + ".failure_ratio", b.failure_ratio, 0, 1, /*lo_open=*/true);
  e.Int(path + ".min_throughput", b.min_throughput, 1, 1000000000);
  e.Duration(path + ".window", b.window, absl::Seconds(1), absl::Minutes(10));
  const bool open_base_ok = e.Duration(path + ".open_base", b.open_base,
                                       absl::Milliseconds(10), absl::Hours(1));
  if (open_base_ok) {
    e.DurationAtLeast(path + ".open_max", b.open_max, "open_base", b.open_base,
                      kDay);
  } else {
    e.Duration(path + ".open_max", b.open_max, absl::Milliseconds(10), kDay);
  }
  const std::string probes_path = path + ".half_open_probes";
  e.Int(probes_path, b.half_open_probes, 1, 1000);
  const std::string close_path = path + ".close_after_successes";
  if (b.half_open_probes >= 1 && b.half_open_probes <= 1000) {
    if (b.close_after_successes < 1) {
      e.Add(close_path,
            absl::StrCat("must be >= 1, got ", b.close_after_successes));
    } else if (b.close_after_successes > b.half_open_probes) {
      e.Add(close_path,
            absl::StrCat("must be <= half_open_probes (", b.half_open_probes,
                         "), got ", b.close_after_successes));
    }
  } else {
    e.Int(close_path, b.close_after_successes, 1, 1000);
  }
  e.Duration(path + ".probe_timeout", b.probe_timeout, absl::Milliseconds(100),
             absl::Minutes(10));
}

void ValidateDeferral(const DeferralParams& d, const std::string& path,
                      Errors& e) {
  e.Duration(path + ".spread", d.spread, absl::ZeroDuration(),
             absl::Minutes(10));
  if (d.release_rate_per_second != 0) {
    e.Double(path + ".release_rate_per_second", d.release_rate_per_second, 1,
             1e6);
  }
}

void ValidatePolicy(const PolicyParams& p, const std::string& path, Errors& e) {
  ValidateBackoff(p.backoff, path + ".backoff", e);
  ValidateBudget(p.budget, path + ".budget", e);
  ValidateBreaker(p.breaker, path + ".breaker", e);
  ValidateDeferral(p.deferral, path + ".deferral", e);
}

}  // namespace

absl::Status ValidateEngineConfig(const EngineConfig& config) {
  Errors e;
  ValidatePolicy(config.default_policy, "default_policy", e);
  for (size_t i = 0; i < config.overrides.size(); ++i) {
    const PolicyOverride& o = config.overrides[i];
    const std::string path = absl::StrCat("overrides[", i, "]");
    switch (o.match) {
      case PolicyOverride::Match::kPrefix:
        if (o.pattern.empty()) e.Add(path + ".prefix", "must not be empty");
        break;
      case PolicyOverride::Match::kGlob:
        if (o.pattern.empty()) e.Add(path + ".glob", "must not be empty");
        break;
      default:
        e.Add(path + ".match",
              absl::StrCat("unknown value ", static_cast<int>(o.match)));
    }
    ValidatePolicy(o.policy, path + ".policy", e);
  }
  const Limits& l = config.limits;
  e.Int("limits.max_key_bytes", l.max_key_bytes, 1, 4096);
  e.Int("limits.max_endpoints", l.max_endpoints, 1, 100000000);
  e.Duration("limits.idle_eviction", l.idle_eviction, absl::Seconds(1),
             7 * kDay);
  e.Int("limits.max_batch_size", l.max_batch_size, 1, 100000);
  return e.ToStatus();
}

}  // namespace stagger::engine
