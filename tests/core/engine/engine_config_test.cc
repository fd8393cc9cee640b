// Tests of core/engine/engine_config.cc: ValidateEngineConfig (every
// documented range, by field path, all errors at once), GlobMatch and
// PolicyOverride matching/naming.
#include "core/engine/engine_config.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stagger::engine {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A config with two overrides, so that override paths can be exercised.
EngineConfig TwoOverrides() {
  EngineConfig c;
  PolicyOverride prefix;
  prefix.match = PolicyOverride::Match::kPrefix;
  prefix.pattern = "https://a.example/";
  PolicyOverride glob;
  glob.match = PolicyOverride::Match::kGlob;
  glob.pattern = "*.b.example";
  c.overrides = {prefix, glob};
  return c;
}

TEST(ValidateEngineConfigTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateEngineConfig(EngineConfig{}).ok());
  EXPECT_TRUE(ValidateEngineConfig(TwoOverrides()).ok());
}

struct BadCase {
  const char* name;
  std::function<void(EngineConfig&)> mutate;
  // The whole message: exactly one line, path first.
  std::string want;
};

class ValidateBadFieldTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(ValidateBadFieldTest, ReportsExactlyThisFieldWithItsPath) {
  EngineConfig c = TwoOverrides();
  GetParam().mutate(c);
  const absl::Status s = ValidateEngineConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), GetParam().want);
}

// Shorthands for the table.
BackoffParams& Bo(EngineConfig& c) { return c.default_policy.backoff; }
BudgetParams& Bu(EngineConfig& c) { return c.default_policy.budget; }
BreakerParams& Br(EngineConfig& c) { return c.default_policy.breaker; }
DeferralParams& De(EngineConfig& c) { return c.default_policy.deferral; }

const BadCase kBadCases[] = {
    // --- backoff
    {"BaseZero", [](EngineConfig& c) { Bo(c).base = absl::ZeroDuration(); },
     "default_policy.backoff.base: must be in [0.001s, 3600s], got 0s"},
    {"BaseTooLong", [](EngineConfig& c) { Bo(c).base = absl::Hours(2); },
     "default_policy.backoff.base: must be in [0.001s, 3600s], got 7200s"},
    {"CapBelowBase",
     [](EngineConfig& c) { Bo(c).cap = absl::Milliseconds(100); },
     "default_policy.backoff.cap: must be >= base (0.2s), got 0.1s"},
    {"CapTooLong", [](EngineConfig& c) { Bo(c).cap = absl::Hours(2); },
     "default_policy.backoff.cap: must be <= 3600s, got 7200s"},
    {"MaxAttemptsZero", [](EngineConfig& c) { Bo(c).max_attempts = 0; },
     "default_policy.backoff.max_attempts: must be in [1, 100], got 0"},
    {"MaxAttempts101", [](EngineConfig& c) { Bo(c).max_attempts = 101; },
     "default_policy.backoff.max_attempts: must be in [1, 100], got 101"},
    {"InitialJitterNegative",
     [](EngineConfig& c) { Bo(c).initial_jitter = absl::Milliseconds(-1); },
     "default_policy.backoff.initial_jitter: must be in [0s, 10s], got "
     "-0.001s"},
    {"InitialJitterTooLong",
     [](EngineConfig& c) { Bo(c).initial_jitter = absl::Seconds(11); },
     "default_policy.backoff.initial_jitter: must be in [0s, 10s], got 11s"},
    {"RetryAfterMaxOverADay",
     [](EngineConfig& c) { Bo(c).retry_after_max = absl::Hours(25); },
     "default_policy.backoff.retry_after_max: must be in [0s, 86400s], got "
     "90000s"},
    {"HorizonOverAWeek",
     [](EngineConfig& c) { Bo(c).horizon = absl::Hours(24 * 8); },
     "default_policy.backoff.horizon: must be in [0s, 604800s], got 691200s"},
    {"HorizonInfinite",
     [](EngineConfig& c) { Bo(c).horizon = absl::InfiniteDuration(); },
     "default_policy.backoff.horizon: must be in [0s, 604800s], got inf"},
    {"UnknownKind",
     [](EngineConfig& c) { Bo(c).kind = static_cast<BackoffKind>(9); },
     "default_policy.backoff.kind: unknown value 9"},
    // --- budget
    {"RatioNegative", [](EngineConfig& c) { Bu(c).ratio = -0.1; },
     "default_policy.budget.ratio: must be in [0, 10], got -0.1"},
    {"RatioTooBig", [](EngineConfig& c) { Bu(c).ratio = 10.5; },
     "default_policy.budget.ratio: must be in [0, 10], got 10.5"},
    {"RatioNaN", [](EngineConfig& c) { Bu(c).ratio = kNaN; },
     "default_policy.budget.ratio: must be a finite number, got nan"},
    {"RatioInf", [](EngineConfig& c) { Bu(c).ratio = kInf; },
     "default_policy.budget.ratio: must be a finite number, got inf"},
    {"MinRetriesTooBig",
     [](EngineConfig& c) { Bu(c).min_retries_per_second = 2e6; },
     "default_policy.budget.min_retries_per_second: must be in [0, 1e+06], "
     "got 2e+06"},
    {"MinRetriesMinusInf",
     [](EngineConfig& c) { Bu(c).min_retries_per_second = -kInf; },
     "default_policy.budget.min_retries_per_second: must be a finite "
     "number, got -inf"},
    {"BudgetWindowShort",
     [](EngineConfig& c) { Bu(c).window = absl::Milliseconds(500); },
     "default_policy.budget.window: must be in [1s, 600s], got 0.5s"},
    {"BudgetWindowLong",
     [](EngineConfig& c) { Bu(c).window = absl::Minutes(11); },
     "default_policy.budget.window: must be in [1s, 600s], got 660s"},
    // --- breaker
    {"ConsecutiveFailuresZero",
     [](EngineConfig& c) { Br(c).consecutive_failures = 0; },
     "default_policy.breaker.consecutive_failures: must be in [1, 1000000], "
     "got 0"},
    {"FailureRatioZero", [](EngineConfig& c) { Br(c).failure_ratio = 0; },
     "default_policy.breaker.failure_ratio: must be in (0, 1], got 0"},
    {"FailureRatioAboveOne", [](EngineConfig& c) { Br(c).failure_ratio = 1.5; },
     "default_policy.breaker.failure_ratio: must be in (0, 1], got 1.5"},
    {"FailureRatioNaN", [](EngineConfig& c) { Br(c).failure_ratio = kNaN; },
     "default_policy.breaker.failure_ratio: must be a finite number, got nan"},
    {"MinThroughputZero", [](EngineConfig& c) { Br(c).min_throughput = 0; },
     "default_policy.breaker.min_throughput: must be in [1, 1000000000], got "
     "0"},
    {"BreakerWindowZero",
     [](EngineConfig& c) { Br(c).window = absl::ZeroDuration(); },
     "default_policy.breaker.window: must be in [1s, 600s], got 0s"},
    {"OpenBaseShort",
     [](EngineConfig& c) { Br(c).open_base = absl::Milliseconds(5); },
     "default_policy.breaker.open_base: must be in [0.01s, 3600s], got "
     "0.005s"},
    {"OpenMaxBelowOpenBase",
     [](EngineConfig& c) { Br(c).open_max = absl::Milliseconds(200); },
     "default_policy.breaker.open_max: must be >= open_base (0.25s), got "
     "0.2s"},
    {"OpenMaxOverADay",
     [](EngineConfig& c) { Br(c).open_max = absl::Hours(48); },
     "default_policy.breaker.open_max: must be <= 86400s, got 172800s"},
    {"HalfOpenProbesZero",
     [](EngineConfig& c) {
       Br(c).half_open_probes = 0;
       Br(c).close_after_successes = 1;
     },
     "default_policy.breaker.half_open_probes: must be in [1, 1000], got 0"},
    {"HalfOpenProbes1001",
     [](EngineConfig& c) { Br(c).half_open_probes = 1001; },
     "default_policy.breaker.half_open_probes: must be in [1, 1000], got "
     "1001"},
    {"CloseAfterZero", [](EngineConfig& c) { Br(c).close_after_successes = 0; },
     "default_policy.breaker.close_after_successes: must be >= 1, got 0"},
    {"CloseAfterAboveProbes",
     [](EngineConfig& c) { Br(c).close_after_successes = 6; },
     "default_policy.breaker.close_after_successes: must be <= "
     "half_open_probes (5), got 6"},
    {"ProbeTimeoutShort",
     [](EngineConfig& c) { Br(c).probe_timeout = absl::Milliseconds(50); },
     "default_policy.breaker.probe_timeout: must be in [0.1s, 600s], got "
     "0.05s"},
    {"DisabledBreakerStillChecked",
     [](EngineConfig& c) {
       Br(c).enabled = false;
       Br(c).min_throughput = -3;
     },
     "default_policy.breaker.min_throughput: must be in [1, 1000000000], got "
     "-3"},
    // --- deferral
    {"SpreadNegative",
     [](EngineConfig& c) { De(c).spread = absl::Seconds(-1); },
     "default_policy.deferral.spread: must be in [0s, 600s], got -1s"},
    {"SpreadLong", [](EngineConfig& c) { De(c).spread = absl::Minutes(11); },
     "default_policy.deferral.spread: must be in [0s, 600s], got 660s"},
    {"ReleaseRateBelowOne",
     [](EngineConfig& c) { De(c).release_rate_per_second = 0.5; },
     "default_policy.deferral.release_rate_per_second: must be in [1, "
     "1e+06], got 0.5"},
    {"ReleaseRateInf",
     [](EngineConfig& c) { De(c).release_rate_per_second = kInf; },
     "default_policy.deferral.release_rate_per_second: must be a finite "
     "number, got inf"},
    // --- overrides
    {"EmptyPrefix", [](EngineConfig& c) { c.overrides[0].pattern.clear(); },
     "overrides[0].prefix: must not be empty"},
    {"EmptyGlob", [](EngineConfig& c) { c.overrides[1].pattern.clear(); },
     "overrides[1].glob: must not be empty"},
    {"OverrideCapBelowBase",
     [](EngineConfig& c) {
       c.overrides[1].policy.backoff.base = absl::Seconds(2);
       c.overrides[1].policy.backoff.cap = absl::Seconds(1);
     },
     "overrides[1].policy.backoff.cap: must be >= base (2s), got 1s"},
    {"OverrideBudgetWindow",
     [](EngineConfig& c) {
       c.overrides[0].policy.budget.window = absl::Nanoseconds(1);
     },
     "overrides[0].policy.budget.window: must be in [1s, 600s], got "
     "0.000000001s"},
    // --- limits
    {"MaxKeyBytesZero", [](EngineConfig& c) { c.limits.max_key_bytes = 0; },
     "limits.max_key_bytes: must be in [1, 4096], got 0"},
    {"MaxKeyBytesTooBig",
     [](EngineConfig& c) { c.limits.max_key_bytes = 4097; },
     "limits.max_key_bytes: must be in [1, 4096], got 4097"},
    {"MaxEndpointsZero", [](EngineConfig& c) { c.limits.max_endpoints = 0; },
     "limits.max_endpoints: must be in [1, 100000000], got 0"},
    {"MaxEndpointsTooBig",
     [](EngineConfig& c) { c.limits.max_endpoints = 100000001; },
     "limits.max_endpoints: must be in [1, 100000000], got 100000001"},
    {"IdleEvictionShort",
     [](EngineConfig& c) { c.limits.idle_eviction = absl::Milliseconds(999); },
     "limits.idle_eviction: must be in [1s, 604800s], got 0.999s"},
    {"MaxBatchSizeTooBig",
     [](EngineConfig& c) { c.limits.max_batch_size = 100001; },
     "limits.max_batch_size: must be in [1, 100000], got 100001"},
};

INSTANTIATE_TEST_SUITE_P(AllRanges, ValidateBadFieldTest,
                         ::testing::ValuesIn(kBadCases),
                         [](const ::testing::TestParamInfo<BadCase>& info) {
                           return std::string(info.param.name);
                         });

// Values on the edge of every range are accepted.
TEST(ValidateEngineConfigTest, BoundaryValuesAreValid) {
  EngineConfig c = TwoOverrides();
  Bo(c).base = absl::Milliseconds(1);
  Bo(c).cap = absl::Milliseconds(1);  // cap == base
  Bo(c).max_attempts = 100;
  Bo(c).initial_jitter = absl::ZeroDuration();
  Bo(c).retry_after_max = absl::Hours(24);
  Bo(c).horizon = absl::Hours(24 * 7);
  Bu(c).ratio = 0;
  Bu(c).min_retries_per_second = 1e6;
  Bu(c).window = absl::Minutes(10);
  Br(c).consecutive_failures = 1000000;
  Br(c).failure_ratio = 1;
  Br(c).min_throughput = 1000000000;
  Br(c).window = absl::Seconds(1);
  Br(c).open_base = absl::Hours(1);
  Br(c).open_max = absl::Hours(1);  // == open_base
  Br(c).half_open_probes = 1000;
  Br(c).close_after_successes = 1000;  // == half_open_probes
  Br(c).probe_timeout = absl::Milliseconds(100);
  De(c).spread = absl::ZeroDuration();
  De(c).release_rate_per_second = 1;
  c.overrides[0].policy.backoff.cap = absl::Hours(1);
  c.limits.max_key_bytes = 4096;
  c.limits.max_endpoints = 1;
  c.limits.idle_eviction = absl::Hours(24 * 7);
  c.limits.max_batch_size = 1;
  EXPECT_TRUE(ValidateEngineConfig(c).ok()) << ValidateEngineConfig(c);
}

TEST(ValidateEngineConfigTest, ListsEveryErrorOnePerLineInFieldOrder) {
  EngineConfig c = TwoOverrides();
  // Four unrelated mistakes in four places of the config.
  Bo(c).cap = absl::Milliseconds(100);
  Br(c).failure_ratio = kNaN;
  c.overrides[1].pattern.clear();
  c.overrides[1].policy.deferral.spread = absl::Minutes(20);
  c.limits.max_key_bytes = 0;
  const absl::Status s = ValidateEngineConfig(c);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::vector<std::string> lines = absl::StrSplit(s.message(), '\n');
  EXPECT_THAT(lines,
              ElementsAreArray({
                  "default_policy.backoff.cap: must be >= base (0.2s), got "
                  "0.1s",
                  "default_policy.breaker.failure_ratio: must be a finite "
                  "number, got nan",
                  "overrides[1].glob: must not be empty",
                  "overrides[1].policy.deferral.spread: must be in [0s, "
                  "600s], got 1200s",
                  "limits.max_key_bytes: must be in [1, 4096], got 0",
              }));
}

// An out-of-range base is reported on base alone, not again as "cap must be
// >= base".
// The override count is a limit of its own: an endpoint's state keeps its
// override's index in 16 bits (core/engine/endpoint_state.h).
TEST(ValidateEngineConfigTest, OverridesAreLimitedTo10000) {
  EngineConfig c;
  PolicyOverride o;
  o.match = PolicyOverride::Match::kPrefix;
  o.pattern = "https://a.example/";
  c.overrides.assign(kMaxOverrides, o);
  EXPECT_TRUE(ValidateEngineConfig(c).ok()) << ValidateEngineConfig(c);
  c.overrides.push_back(o);
  const absl::Status s = ValidateEngineConfig(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "overrides: at most 10000 overrides, got 10001");
}

TEST(ValidateEngineConfigTest, InvalidBaseIsNotReportedTwice) {
  EngineConfig c;
  Bo(c).base = absl::Hours(3);
  Bo(c).cap = absl::Hours(2);
  EXPECT_EQ(ValidateEngineConfig(c).message(),
            "default_policy.backoff.base: must be in [0.001s, 3600s], got "
            "10800s\n"
            "default_policy.backoff.cap: must be in [0.001s, 3600s], got "
            "7200s");
}

TEST(BackoffKindNameTest, NamesEqualTheProtoEnum) {
  EXPECT_STREQ(BackoffKindName(BackoffKind::kExponential), "EXPONENTIAL");
  EXPECT_STREQ(BackoffKindName(BackoffKind::kEqualJitter), "EQUAL_JITTER");
  EXPECT_STREQ(BackoffKindName(BackoffKind::kFullJitter), "FULL_JITTER");
  EXPECT_STREQ(BackoffKindName(BackoffKind::kDecorrelatedJitter),
               "DECORRELATED_JITTER");
  EXPECT_STREQ(BackoffKindName(static_cast<BackoffKind>(0)), "UNKNOWN");
}

struct GlobCase {
  const char* pattern;
  const char* text;
  bool want;
};

class GlobMatchTest : public ::testing::TestWithParam<GlobCase> {};

TEST_P(GlobMatchTest, MatchesTheWholeKey) {
  const GlobCase& c = GetParam();
  EXPECT_EQ(GlobMatch(c.pattern, c.text), c.want)
      << "pattern \"" << c.pattern << "\" text \"" << c.text << "\"";
}

INSTANTIATE_TEST_SUITE_P(
    Table, GlobMatchTest,
    ::testing::ValuesIn(std::vector<GlobCase>{
        {"", "", true},
        {"", "a", false},
        {"*", "", true},
        {"*", "anything/at/all", true},
        {"**", "", true},
        {"?", "", false},
        {"?", "a", true},
        {"?", "ab", false},
        {"abc", "abc", true},
        {"abc", "abcd", false},  // whole key, not a prefix
        {"abc", "xabc", false},
        {"ABC", "abc", false},  // case-sensitive
        {"a*c", "ac", true},
        {"a*c", "abbbc", true},
        {"a*c", "abbb", false},
        {"a?c", "ac", false},
        {"a?c", "abc", true},
        {"*a", "baa", true},
        {"*a", "aab", false},
        {"a**b", "ab", true},
        {"a*b*c", "aXbYc", true},
        {"a*b*c", "aXcYb", false},
        {"*ab*cd*", "xxabyycdzz", true},
        {"*ab*cd", "abcdcd", true},  // the last '*' must retry
        {"ab*", "ab", true},
        {"a*", "a*", true},  // '*' in the key is an ordinary byte
        {"?", "*", true},
        {"?", "\xc3\xa9", false},  // '?' is one byte, "é" is two
        {"??", "\xc3\xa9", true},
        {"https://*.payments.example/*", "https://eu.payments.example/v1/hook",
         true},
        {"https://*.payments.example/*", "https://payments.example/v1", false},
        {"*.example.com", "api.example.com", true},
        {"*.example.com", "api.example.com.evil", false},
    }));

// A pattern that makes a backtracking matcher explore every way of
// splitting the key among its stars (about 4096^30 of them here) must be
// decided at once: the matcher retries only the last star, so its work is
// bounded by |pattern| * |key| ~ 250k steps, whatever the input.
TEST(GlobMatchTest, HostilePatternIsDecidedInBoundedWork) {
  std::string pattern;
  for (int i = 0; i < 30; ++i) pattern += "a*";
  pattern += "b";
  const std::string key(4096, 'a');  // the longest key allowed
  const absl::Time start = absl::Now();
  EXPECT_FALSE(GlobMatch(pattern, key));
  EXPECT_TRUE(GlobMatch(pattern, key + "b"));
  EXPECT_FALSE(GlobMatch("*?*?*?*?*?*?*?*?*?*?b", key));
  // Generous: the three calls take well under a millisecond; an exponential
  // matcher would not finish in the lifetime of the machine.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(PolicyOverrideTest, PrefixMatchesKeysStartingWithIt) {
  PolicyOverride o;
  o.match = PolicyOverride::Match::kPrefix;
  o.pattern = "https://a.example/";
  EXPECT_TRUE(o.Matches("https://a.example/"));
  EXPECT_TRUE(o.Matches("https://a.example/hooks/1"));
  EXPECT_FALSE(o.Matches("https://a.example"));
  EXPECT_FALSE(o.Matches("https://b.example/"));
  // '*' is literal in a prefix.
  o.pattern = "https://*";
  EXPECT_FALSE(o.Matches("https://a.example/"));
  EXPECT_TRUE(o.Matches("https://*x"));
  EXPECT_EQ(o.Name(), "prefix:https://*");
}

TEST(PolicyOverrideTest, GlobMatchesTheWholeKey) {
  PolicyOverride o;
  o.match = PolicyOverride::Match::kGlob;
  o.pattern = "*.b.example";
  EXPECT_TRUE(o.Matches("api.b.example"));
  EXPECT_FALSE(o.Matches("api.b.example/x"));
  EXPECT_EQ(o.Name(), "glob:*.b.example");
}

}  // namespace
}  // namespace stagger::engine
