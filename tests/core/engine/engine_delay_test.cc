// Engine: the delay of a retry that may go: the endpoint's backoff policy
// (the decorrelated state shared by every worker, reset by success only,
// never by time), Retry-After (wins when longer, clamped, remembered for the
// whole fleet), and the jitter of first attempts. Fake clock, fixed seeds
// (engine_test_fixture.h).
#include <algorithm>
#include <set>

#include "absl/time/time.h"
#include "core/engine/backoff.h"
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

// ---------------------------------------------------------------------------
// The delay from the endpoint's policy.

struct PolicyCase {
  BackoffKind kind;
  int attempt;    // the attempt that failed
  double lo, hi;  // delay range, seconds (base 1s, cap 100s)
};

class EnginePolicyTest : public EngineTest,
                         public ::testing::WithParamInterface<PolicyCase> {};

TEST_P(EnginePolicyTest, DelayFromThePolicy) {
  const PolicyCase pc = GetParam();
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.kind = pc.kind;
  c.default_policy.backoff.base = absl::Seconds(1);
  c.default_policy.backoff.cap = absl::Seconds(100);
  c.default_policy.backoff.max_attempts = 100;
  // Each failed retry below spends from the budget: a floor of 1e6/s
  // (1e7 per window) keeps it out of the way of 2000 of them.
  c.default_policy.budget.min_retries_per_second = 1e6;
  Make(c);
  double lo = 1e9, hi = 0;
  for (int i = 0; i < 2000; ++i) {
    // Reset the shared decorrelated state so every draw starts from base.
    Report(kEp, 1, Outcome::kSuccess);
    const Decision d = Fail(kEp, pc.attempt);
    ASSERT_EQ(d.verdict, Verdict::kProceed);
    ASSERT_EQ(d.reason, Reason::kBackoff);
    ASSERT_EQ(d.attempt, pc.attempt + 1);
    const double s = absl::ToDoubleSeconds(d.delay);
    ASSERT_GE(s, pc.lo);
    ASSERT_LE(s, pc.hi);
    lo = std::min(lo, s);
    hi = std::max(hi, s);
  }
  // The draws fill the range (a plain policy has lo == hi).
  EXPECT_LT(lo, pc.lo + (pc.hi - pc.lo) * 0.01 + 1e-9);
  EXPECT_GT(hi, pc.hi - (pc.hi - pc.lo) * 0.01 - 1e-9);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, EnginePolicyTest,
    ::testing::Values(
        // attempt 1 failed: first retry, v = base = 1s
        PolicyCase{BackoffKind::kExponential, 1, 1, 1},
        PolicyCase{BackoffKind::kExponential, 4, 8, 8},
        PolicyCase{BackoffKind::kExponential, 20, 100, 100},
        PolicyCase{BackoffKind::kEqualJitter, 3, 2, 4},
        PolicyCase{BackoffKind::kFullJitter, 3, 0, 4},
        PolicyCase{BackoffKind::kFullJitter, 30, 0, 100},
        // decorrelated from a reset state: [base, 3 * base]
        PolicyCase{BackoffKind::kDecorrelatedJitter, 1, 1, 3},
        PolicyCase{BackoffKind::kDecorrelatedJitter, 9, 1, 3}));

TEST_F(EngineTest, DecorrelatedStateIsSharedAcrossWorkers) {
  // Three workers, three deliveries, one endpoint: each failure report grows
  // from the previous delay any of them was given.
  Make(NoBreaker());
  const BackoffParams p = EngineConfig{}.default_policy.backoff;
  absl::Duration prev = absl::ZeroDuration();
  for (int i = 0; i < 30; ++i) {
    // Worker i % 3 reports its delivery's first attempt failed.
    const Decision d = Fail(kEp, 1);
    ASSERT_EQ(d.reason, Reason::kBackoff);
    ASSERT_GE(d.delay, p.base);
    ASSERT_LE(d.delay, std::min(p.cap, std::max(prev, p.base) * 3)) << i;
    ASSERT_EQ(Inspect(kEp).previous_delay, Ns(d.delay));
    prev = d.delay;
  }
  // Thirty shared steps reach the cap; thirty independent first retries
  // would all stay within [base, 3 * base].
  EXPECT_GT(prev, p.base * 3);
}

TEST_F(EngineTest, DecorrelatedStateResetsOnSuccessOnlyNeverByTime) {
  Make(NoBreaker());
  // Fail until the shared delay has grown well past base (jitter decides
  // how many reports that takes; 200 is far more than any seed needs).
  Fail(kEp, 1);
  for (int i = 0; i < 200 && Inspect(kEp).previous_delay <=
                                 absl::Milliseconds(600); ++i) {
    Fail(kEp, 1);
  }
  const absl::Duration built = Inspect(kEp).previous_delay;
  ASSERT_GT(built, absl::Milliseconds(600));
  // Hours pass with no report at all: the state is unchanged.
  clock_.Advance(absl::Hours(5));
  EXPECT_EQ(Inspect(kEp).previous_delay, built);
  // A not-retryable answer is not a success: unchanged.
  Report(kEp, 1, Outcome::kNotRetryable);
  EXPECT_EQ(Inspect(kEp).previous_delay, built);
  // The next failure grows from it.
  const Decision d = Fail(kEp, 1);
  EXPECT_LE(d.delay, std::min(absl::Seconds(30), built * 3));
  EXPECT_EQ(Inspect(kEp).previous_delay, Ns(d.delay));
  // A success resets it: the next failure is within [base, 3 * base].
  Report(kEp, 1, Outcome::kSuccess);
  EXPECT_EQ(Inspect(kEp).previous_delay, absl::ZeroDuration());
  const Decision after = Fail(kEp, 1);
  EXPECT_GE(after.delay, absl::Milliseconds(200));
  EXPECT_LE(after.delay, absl::Milliseconds(600));
}

TEST_F(EngineTest, DelaysDoNotDependOnElapsedTime) {
  // Twin engines, same seed, same reports; one of them sees five hours pass
  // before the last report. A policy whose attempt counter decays with
  // time would answer differently; a correct one gives the very same
  // delay.
  FakeClock clock_a, clock_b;
  SeededRandom random_a(5), random_b(5);
  Engine a(NoBreaker(), &clock_a, &random_a);
  Engine b(NoBreaker(), &clock_b, &random_b);
  ReportInput in;
  in.endpoint = kEp;
  in.outcome = Outcome::kRetryableFailure;
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(a.Report(in)->delay, b.Report(in)->delay);
  }
  // The shared state is above the base, so a reset would show.
  ASSERT_GT(b.Inspect(kEp)->previous_delay, absl::Milliseconds(200));
  clock_b.Advance(absl::Hours(5));
  const Decision da = *a.Report(in);
  const Decision db = *b.Report(in);
  EXPECT_EQ(db.reason, Reason::kBackoff);
  EXPECT_EQ(da.delay, db.delay);
}

TEST_F(EngineTest, NonDecorrelatedPoliciesLeaveTheStateAlone) {
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.kind = BackoffKind::kFullJitter;
  Make(c);
  for (int i = 0; i < 5; ++i) Fail(kEp, 3);
  EXPECT_EQ(Inspect(kEp).previous_delay, absl::ZeroDuration());
}

// ---------------------------------------------------------------------------
// Retry-After.

TEST_F(EngineTest, RetryAfterAboveTheComputedDelayWins) {
  Make(NoBreaker());
  // Decorrelated from base 200ms: at most 600ms. Retry-After 5s wins; the
  // retry lands spread after the instant (default spread 1s).
  const Decision d = Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(5));
  EXPECT_EQ(d.verdict, Verdict::kProceed);
  EXPECT_EQ(d.reason, Reason::kRetryAfter);
  EXPECT_GE(d.delay, absl::Seconds(5));
  EXPECT_LT(d.delay, absl::Seconds(6));
  EXPECT_TRUE(d.retry_after_seen);
  EXPECT_FALSE(d.retry_after_clamped);
  EXPECT_EQ(Inspect(kEp).retry_after_until, clock_.Now() + absl::Seconds(5));
}

TEST_F(EngineTest, RetryAfterBelowTheComputedDelayIsSeenButLoses) {
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.kind = BackoffKind::kExponential;
  c.default_policy.backoff.base = absl::Seconds(10);
  c.default_policy.backoff.cap = absl::Seconds(60);
  Make(c);
  const Decision d = Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(1));
  EXPECT_EQ(d.reason, Reason::kBackoff);
  EXPECT_EQ(d.delay, absl::Seconds(10));
  EXPECT_TRUE(d.retry_after_seen);
}

TEST_F(EngineTest, RetryAfterIsClampedAndCounted) {
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.retry_after_max = absl::Seconds(30);
  Make(c);
  // "Retry-After: 3600": clamped to 30s.
  const Decision d = Report(kEp, 1, Outcome::kRateLimited, absl::Hours(1));
  EXPECT_EQ(d.reason, Reason::kRetryAfter);
  EXPECT_TRUE(d.retry_after_seen);
  EXPECT_TRUE(d.retry_after_clamped);
  EXPECT_GE(d.delay, absl::Seconds(30));
  EXPECT_LT(d.delay, absl::Seconds(31));
  EXPECT_EQ(Inspect(kEp).retry_after_until, clock_.Now() + absl::Seconds(30));
  // Exactly at the maximum accepted value (24h): accepted, clamped.
  const Decision top = Report(kEp, 1, Outcome::kRateLimited, kMaxRetryAfter);
  EXPECT_TRUE(top.retry_after_clamped);
  // At the clamp: not clamped.
  const Decision at = Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(30));
  EXPECT_TRUE(at.retry_after_seen);
  EXPECT_FALSE(at.retry_after_clamped);
  // No header: not seen.
  EXPECT_FALSE(Fail(kEp, 1).retry_after_seen);
}

TEST_F(EngineTest, RetryAfterIsRememberedForTheWholeFleet) {
  Make(NoBreaker());
  const absl::Time t0 = clock_.Now();
  // Worker A's delivery gets 429 with Retry-After 20s.
  Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(20));
  const absl::Time window_end = t0 + absl::Seconds(20);
  // 3s later worker B's (different) delivery to the same endpoint fails
  // with a plain 503: its retry waits at least until the window end.
  clock_.Advance(absl::Seconds(3));
  const Decision b = Fail(kEp, 1);
  EXPECT_EQ(b.verdict, Verdict::kProceed);
  EXPECT_EQ(b.reason, Reason::kRetryAfter);
  EXPECT_GE(clock_.Now() + b.delay, window_end);
  EXPECT_LT(clock_.Now() + b.delay, window_end + absl::Seconds(1));
  EXPECT_FALSE(b.retry_after_seen);  // this report carried none
  // Worker C, who never saw the header, asks to send a retry at t0+5s:
  // deferred until after the window end.
  clock_.Advance(absl::Seconds(2));
  const Decision c = Admit(kEp, 2);
  EXPECT_EQ(c.verdict, Verdict::kDefer);
  EXPECT_EQ(c.reason, Reason::kRetryAfterWindow);
  EXPECT_GE(c.defer_until, window_end);
  // Other endpoints are not affected.
  EXPECT_EQ(Admit("https://other.example.com/", 2).reason, Reason::kAdmitted);
  // A shorter Retry-After later does not shorten the window.
  Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(1));
  EXPECT_EQ(Inspect(kEp).retry_after_until, window_end);
  // After the window: retries proceed.
  clock_.Set(window_end);
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
  EXPECT_EQ(Fail(kEp, 1).reason, Reason::kBackoff);
}

TEST_F(EngineTest, RetryAfterWindowDeferralsAreSpread) {
  Make(NoBreaker());
  Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(10));
  const absl::Time end = clock_.Now() + absl::Seconds(10);
  std::set<absl::Time> distinct;
  for (int i = 0; i < 100; ++i) {
    const Decision d = Admit(kEp, 2);
    ASSERT_EQ(d.reason, Reason::kRetryAfterWindow);
    ASSERT_GE(d.defer_until, end);
    distinct.insert(d.defer_until);
  }
  EXPECT_GT(distinct.size(), 95u);
}

TEST_F(EngineTest, RateLimitedWithRetryAfterDoesNotTripTheBreaker) {
  Make(TripAfter(3));
  // The endpoint is pacing us, not failing.
  for (int i = 0; i < 10; ++i) {
    Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(1));
  }
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kClosed);
  // A 429 without Retry-After counts as a failure.
  for (int i = 0; i < 3; ++i) Report(kEp, 1, Outcome::kRateLimited);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kOpen);
}

TEST_F(EngineTest, TimeoutsFeedTheBreaker) {
  Make(TripAfter(3));
  for (int i = 0; i < 3; ++i) Report(kEp, 1, Outcome::kTimeout);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kOpen);
}

// ---------------------------------------------------------------------------
// First attempts.

TEST_F(EngineTest, FirstAttemptsAreJitteredWithinInitialJitter) {
  Make(EngineConfig{});  // initial_jitter 50ms
  absl::Duration lo = absl::InfiniteDuration(), hi = absl::ZeroDuration();
  for (int i = 0; i < 2000; ++i) {
    const Decision d = Admit(kEp, 1);
    ASSERT_EQ(d.verdict, Verdict::kProceed);
    ASSERT_EQ(d.reason, Reason::kInitialJitter);
    ASSERT_GE(d.delay, absl::ZeroDuration());
    ASSERT_LT(d.delay, absl::Milliseconds(50));
    lo = std::min(lo, d.delay);
    hi = std::max(hi, d.delay);
  }
  EXPECT_LT(lo, absl::Milliseconds(1));
  EXPECT_GT(hi, absl::Milliseconds(49));
}

TEST_F(EngineTest, NoInitialJitterMeansNoDelay) {
  EngineConfig c;
  c.default_policy.backoff.initial_jitter = absl::ZeroDuration();
  Make(c);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(Admit(kEp, 1).delay, absl::ZeroDuration());
  }
}

}  // namespace
}  // namespace stagger::engine
