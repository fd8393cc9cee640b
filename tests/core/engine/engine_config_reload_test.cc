// Engine: configuration changes (SetConfig, a reload): state kept, the new
// policies, overrides and limits applied from the next decision, windows
// that change width started afresh; override matching; an invalid config is
// a programming error. Fake clock (engine_test_fixture.h).
#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "gtest/gtest.h"
#include "tests/core/engine/engine_test_fixture.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::FakeClock;

TEST_F(EngineTest, SetConfigKeepsStateAndAppliesOverrides) {
  Make(NoBreaker());
  const std::string api = "api.example.com/hook";
  const std::string internal = "svc.internal/hook";
  const std::string other = "other.example.com/";
  for (int i = 0; i < 5; ++i) Fail(api, 1);
  Fail(internal, 1);
  Fail(other, 1);
  const absl::Duration api_prev = Inspect(api).previous_delay;
  const absl::Duration other_prev = Inspect(other).previous_delay;
  ASSERT_GT(api_prev, absl::ZeroDuration());

  EngineConfig c = NoBreaker();
  PolicyOverride prefix;
  prefix.match = PolicyOverride::Match::kPrefix;
  prefix.pattern = "api.";
  prefix.policy = c.default_policy;
  prefix.policy.backoff.kind = BackoffKind::kExponential;
  prefix.policy.backoff.base = absl::Seconds(2);
  PolicyOverride glob;
  glob.match = PolicyOverride::Match::kGlob;
  glob.pattern = "*.internal/*";
  glob.policy = c.default_policy;
  glob.policy.backoff.kind = BackoffKind::kExponential;
  glob.policy.backoff.base = absl::Seconds(3);
  // Also matches "api.": first match wins, so never used for it.
  PolicyOverride shadowed = glob;
  shadowed.pattern = "api.*";
  shadowed.policy.backoff.base = absl::Seconds(7);
  c.overrides = {prefix, glob, shadowed};
  engine().SetConfig(c);

  // State kept, policy names resolved.
  EXPECT_EQ(Inspect(api).previous_delay, api_prev);
  EXPECT_EQ(Inspect(api).policy, "prefix:api.");
  EXPECT_EQ(Inspect(internal).policy, "glob:*.internal/*");
  EXPECT_EQ(Inspect(other).policy, "default");
  EXPECT_EQ(Inspect(other).previous_delay, other_prev);
  // New policies apply to the next decision.
  EXPECT_EQ(Fail(api, 1).delay, absl::Seconds(2));
  EXPECT_EQ(Fail(api, 3).delay, absl::Seconds(8));
  EXPECT_EQ(Fail(internal, 1).delay, absl::Seconds(3));
  const Decision d = Fail(other, 1);
  EXPECT_LE(d.delay, std::min(absl::Seconds(30), other_prev * 3));
  // New endpoints resolve too.
  EXPECT_EQ(Fail("api.new/", 2).delay, absl::Seconds(4));
  EXPECT_EQ(engine().config().overrides.size(), 3u);
}

// The last of the most overrides a config may hold (kMaxOverrides) is
// still found: the state keeps its index in 16 bits.
TEST_F(EngineTest, TheLastOfTheMostOverridesApplies) {
  EngineConfig c = NoBreaker();
  PolicyOverride o;
  o.match = PolicyOverride::Match::kPrefix;
  o.policy = c.default_policy;
  o.policy.backoff.kind = BackoffKind::kExponential;
  for (size_t i = 0; i < kMaxOverrides; ++i) {
    o.pattern = "p" + std::to_string(i) + "/";
    o.policy.backoff.base = absl::Milliseconds(i + 1);
    c.overrides.push_back(o);
  }
  Make(c);
  EXPECT_EQ(Fail("p9999/hook", 1).delay, absl::Milliseconds(10000));
  EXPECT_EQ(Inspect("p9999/hook").policy, "prefix:p9999/");
  EXPECT_EQ(Fail("p0/hook", 1).delay, absl::Milliseconds(1));
}

TEST_F(EngineTest, SetConfigKeepsTheBreakerOpen) {
  Make(TripAfter(1));
  const absl::Time until = Trip(kEp, 1);
  EngineConfig c = TripAfter(1);
  c.default_policy.backoff.base = absl::Seconds(1);
  engine().SetConfig(c);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kOpen);
  EXPECT_EQ(Inspect(kEp).open_until, until);
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kCircuitOpen);
}

TEST_F(EngineTest, SetConfigWithANewBudgetWindowStartsTheBudgetAfresh) {
  EngineConfig c = NoBreaker();
  c.default_policy.budget.min_retries_per_second = 0;
  Make(c);
  for (int i = 0; i < 50; ++i) Admit(kEp, 1);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 10.0);
  // Same window width: the counts are kept.
  c.default_policy.budget.ratio = 0.4;
  engine().SetConfig(c);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 20.0);
  Admit(kEp, 1);  // re-resolves the policy
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 20.4);
  // A wider window: counted afresh, and it keeps sliding.
  c.default_policy.budget.window = absl::Seconds(60);
  engine().SetConfig(c);
  Admit(kEp, 1);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 0.4);
  for (int i = 0; i < 9; ++i) Admit(kEp, 1);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 4.0);
  clock_.Advance(absl::Minutes(2));
  Admit(kEp, 1);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 0.4);
}

TEST_F(EngineTest, SetConfigWithAWiderBreakerWindowStillSlides) {
  // Ratio breaker: 50% over >= 10 attempts.
  EngineConfig c;
  c.default_policy.breaker.consecutive_failures = 1000000;
  c.default_policy.breaker.failure_ratio = 0.5;
  c.default_policy.breaker.min_throughput = 10;
  Make(c);
  // 9 failures under the 10s window: below min throughput.
  for (int i = 0; i < 9; ++i) Fail(kEp, 1);
  ASSERT_EQ(Inspect(kEp).breaker_state, BreakerState::kClosed);
  c.default_policy.breaker.window = absl::Minutes(1);
  engine().SetConfig(c);
  // 5 minutes later: those 9 are long out of the 60s window.
  clock_.Advance(absl::Minutes(5));
  Fail(kEp, 1);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kClosed);
}

TEST_F(EngineTest, SetConfigAppliesNewLimits) {
  Make(EngineConfig{});
  Admit(std::string(100, 'k'), 1);
  EngineConfig c;
  c.limits.max_key_bytes = 50;
  c.limits.max_batch_size = 7;
  engine().SetConfig(c);
  EXPECT_EQ(engine().max_batch_size(), 7);
  AdmitInput in;
  const std::string key(51, 'k');
  in.endpoint = key;
  EXPECT_EQ(engine().Admit(in).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, ListStillShowsKeysLongerThanALoweredLimit) {
  // Endpoints tracked before max_key_bytes was lowered stay tracked until
  // evicted; the list must show every endpoint it counts.
  Make(EngineConfig{});
  const std::string long_key(100, 'k');
  Admit(long_key, 1);
  Admit("short", 1);
  EngineConfig c;
  c.limits.max_key_bytes = 50;
  engine().SetConfig(c);
  const ListPage page = engine().List("", 10, std::nullopt);
  EXPECT_EQ(page.total_tracked, 2);
  ASSERT_EQ(page.endpoints.size(), 2u);
  EXPECT_EQ(page.endpoints[0].endpoint, long_key);
  EXPECT_EQ(page.endpoints[1].endpoint, "short");
}

TEST_F(EngineTest, ListPageSizeBelowOneIsOne) {
  Make(EngineConfig{});
  Admit("a", 1);
  Admit("b", 1);
  for (int size : {0, -1}) {
    const ListPage page = engine().List("", size, std::nullopt);
    ASSERT_EQ(page.endpoints.size(), 1u);
    EXPECT_EQ(page.endpoints[0].endpoint, "a");
    EXPECT_EQ(page.next_after, "a");
  }
}

TEST_F(EngineTest, RetryAfterIsRememberedEvenWhenTheDeliveryGivesUp) {
  // The delivery is out of attempts, but the header is news for the fleet.
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.max_attempts = 2;
  Make(c);
  const Decision d = Report(kEp, 2, Outcome::kRateLimited, absl::Seconds(9));
  EXPECT_EQ(d.reason, Reason::kAttemptsExhausted);
  EXPECT_TRUE(d.retry_after_seen);
  EXPECT_EQ(Inspect(kEp).retry_after_until, clock_.Now() + absl::Seconds(9));
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kRetryAfterWindow);
}

TEST_F(EngineTest, PacedFailureReportWhileHalfOpenAndBusyDefers) {
  // Half-open with its one probe slot taken: a 429 + Retry-After (which
  // does not feed the breaker) is told to come back, not to retry.
  EngineConfig c = TripAfter(1);
  c.default_policy.breaker.half_open_probes = 1;
  c.default_policy.breaker.close_after_successes = 1;
  Make(c);
  clock_.Set(Trip(kEp, 1));
  ASSERT_EQ(Admit(kEp, 2).reason, Reason::kHalfOpenProbe);
  const Decision d =
      Report(kEp, 1, Outcome::kRateLimited, absl::Milliseconds(10));
  EXPECT_EQ(d.verdict, Verdict::kDefer);
  EXPECT_EQ(d.reason, Reason::kHalfOpenBusy);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kHalfOpen);
}

TEST_F(EngineTest, OverridesMatchByPrefixAndGlobFirstMatchWins) {
  EngineConfig c;
  auto add = [&c](PolicyOverride::Match m, const char* pattern) {
    PolicyOverride o;
    o.match = m;
    o.pattern = pattern;
    c.overrides.push_back(o);
  };
  add(PolicyOverride::Match::kGlob, "https://*.slow.example/*");
  add(PolicyOverride::Match::kPrefix, "https://api.");
  add(PolicyOverride::Match::kGlob, "*/v?/hook");
  Make(c);
  struct Want {
    const char* key;
    const char* policy;
  };
  const Want wants[] = {
      {"https://a.slow.example/x", "glob:https://*.slow.example/*"},
      // the glob is anchored at both ends: no trailing path, no match
      {"https://a.slow.example", "default"},
      {"https://api.slow.example/x", "glob:https://*.slow.example/*"},
      {"https://api.example.com/v1/hook", "prefix:https://api."},
      {"https://b.example.com/v1/hook", "glob:*/v?/hook"},
      {"https://b.example.com/v10/hook", "default"},
      {"http://api.example.com/", "default"},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.key);
    Admit(w.key, 1);
    EXPECT_EQ(Inspect(w.key).policy, w.policy);
  }
}

TEST(EngineDeathTest, InvalidConfigIsAProgrammingError) {
  // The loader validates first; an engine never runs on a bad config.
  FakeClock clock;
  SeededRandom random(1);
  EngineConfig c;
  c.default_policy.backoff.cap = absl::Milliseconds(1);  // below base
  EXPECT_DEATH(Engine(c, &clock, &random), "backoff.cap");
}

}  // namespace
}  // namespace stagger::engine
