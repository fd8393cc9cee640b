// Engine: the learned release pace (capacity_estimator.h,
// release_pacer.h): a backlog parked behind a closed gate comes back at a
// pace learned from what the endpoint serves, cut on overload, bounded by
// the operator's cap. Fake clock, fixed seed (engine_test_fixture.h).
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "gtest/gtest.h"
#include "tests/core/engine/engine_test_fixture.h"

namespace stagger::engine {
namespace {

// No spread; the breaker trips only on 20 consecutive failures. A 429 with
// Retry-After 5s (it does not feed the breaker) closes the gate, and 1,000
// retries park behind the window. Then the window ends, two retries go at
// the start pace's burst and succeed: the endpoint is back, and the pace
// jumps to release the backlog within 4s (250/s).
class ReleasePaceTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineConfig c = TripAfter(20);
    c.default_policy.deferral.spread = absl::ZeroDuration();
    Make(c);
    Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(5));
    for (int i = 0; i < 1000; ++i) {
      ASSERT_EQ(Admit(kEp, 2).reason, Reason::kRetryAfterWindow);
    }
    clock_.Advance(absl::Seconds(5));
    ASSERT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
    ASSERT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
    clock_.Advance(absl::Milliseconds(250));
    Report(kEp, 2, Outcome::kSuccess);
    Report(kEp, 2, Outcome::kSuccess);
    ASSERT_EQ(Inspect(kEp).pace_source, CapacityEstimator::Source::kGrowth);
  }
  // `n` successes reported over `span`.
  void Successes(int n, absl::Duration span) {
    for (int i = 0; i < n; ++i) {
      Report(kEp, 2, Outcome::kSuccess);
      clock_.Advance(span / n);
    }
  }
};

TEST_F(ReleasePaceTest, AnEndpointThatKeepsUpIsNeverCut) {
  // 250/s + 8/s for the second success; every success adds 8/s more
  // (slow start: x3 per round-trip of 250ms).
  EXPECT_DOUBLE_EQ(Inspect(kEp).release_rate, 258);
  Successes(100, absl::Seconds(1));
  const EndpointSnapshot s = Inspect(kEp);
  EXPECT_DOUBLE_EQ(s.release_rate, 258 + 100 * 8);
  EXPECT_EQ(s.pace_threshold, 0);  // no capacity measured: none seen
  EXPECT_EQ(s.pace_phase, CapacityEstimator::Phase::kReleasing);
  EXPECT_FALSE(s.pace_capped);
}

TEST_F(ReleasePaceTest, AFailureWhileServingCutsThePaceAndWaitsForASlot) {
  // Released retries succeed at ~100/s for 300ms, then some fail. One or
  // two among that many successes are under 5% of the answers: ordinary
  // failures (a backoff, the breaker counts them). The failure that
  // crosses 5% while the endpoint is serving is overload.
  Successes(30, absl::Milliseconds(300));
  Decision d;
  int ordinary = 0;
  for (d = Fail(kEp, 2); d.reason == Reason::kBackoff; d = Fail(kEp, 2)) {
    ++ordinary;
  }
  EXPECT_LE(ordinary, 3);
  const double budget = Inspect(kEp).budget_remaining;
  // The pace goes down to the goodput measured (+5%), which is now the
  // endpoint's measured capacity; the retry waits for a slot on the queue
  // at that pace instead of a backoff, spends no budget, and the breaker
  // does not see the failure.
  EXPECT_TRUE(d.pace_cut);
  EXPECT_EQ(d.verdict, Verdict::kDefer);
  EXPECT_EQ(d.reason, Reason::kPaced);
  EXPECT_EQ(d.attempt, 3);
  EXPECT_GT(d.defer_until, clock_.Now());
  EndpointSnapshot s = Inspect(kEp);
  EXPECT_EQ(s.pace_source, CapacityEstimator::Source::kGoodput);
  EXPECT_LT(s.release_rate, 200);
  EXPECT_GT(s.release_rate, 50);
  EXPECT_DOUBLE_EQ(s.pace_threshold, s.release_rate);
  EXPECT_DOUBLE_EQ(s.budget_remaining, budget);
  EXPECT_EQ(s.consecutive_failures, ordinary);
  // A second failure in the same round-trip: paced too, no second cut.
  const Decision again = Fail(kEp, 2);
  EXPECT_EQ(again.reason, Reason::kPaced);
  EXPECT_FALSE(again.pace_cut);
  EXPECT_DOUBLE_EQ(Inspect(kEp).release_rate, s.release_rate);
}

TEST_F(ReleasePaceTest, AnEndpointThatStopsServingIsTheBreakersAndLeavesNoCut) {
  Successes(30, absl::Milliseconds(300));
  // The endpoint goes down: its first failures look like overload (it was
  // serving a moment ago) and cut the pace ...
  int failures = 1;
  while (!Fail(kEp, 2).pace_cut) ASSERT_LE(++failures, 3);
  ASSERT_GT(Inspect(kEp).pace_threshold, 0);
  // ... but no success follows. Two round-trips later the failures are the
  // breaker's: 20 in a row trip it. The cut was the outage's doing, so it
  // is undone: no capacity is taken as measured.
  clock_.Advance(absl::Milliseconds(600));
  Decision d;
  for (int i = 0; i < 20; ++i) {
    d = Fail(kEp, 2);
    ASSERT_FALSE(d.pace_cut) << i;
  }
  EXPECT_EQ(d.reason, Reason::kCircuitOpen);
  const EndpointSnapshot s = Inspect(kEp);
  EXPECT_EQ(s.breaker_state, BreakerState::kOpen);
  EXPECT_EQ(s.pace_threshold, 0);
  EXPECT_EQ(s.pace_phase, CapacityEstimator::Phase::kClosed);
}

TEST_F(ReleasePaceTest, DuringAReleaseEveryAdmissionTakesASlot) {
  // At ~258/s with 100ms of tolerance: about 26 at once, then the queue.
  int admitted = 0;
  Decision d;
  for (int i = 0; i < 100; ++i) {
    d = Admit(kEp, 1);  // first attempts too: they queue with the backlog
    if (d.verdict == Verdict::kProceed) ++admitted;
  }
  EXPECT_NEAR(admitted, 26, 2);
  EXPECT_EQ(d.reason, Reason::kPaced);
  EXPECT_TRUE(Inspect(kEp).releasing);
  // Once every parked delivery is back (here: no more deferrals for a
  // while), nothing is paced any more.
  clock_.Advance(absl::Seconds(10));
  EXPECT_FALSE(Inspect(kEp).releasing);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(Admit(kEp, 1).reason, Reason::kInitialJitter);
  }
}

TEST_F(EngineTest, TheOperatorsCapBoundsTheLearnedPace) {
  EngineConfig c = NoBreaker();
  c.default_policy.deferral.release_rate_per_second = 20;
  Make(c);
  Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(1));
  for (int i = 0; i < 1000; ++i) Admit(kEp, 2);
  clock_.Advance(absl::Seconds(3));
  Admit(kEp, 2);
  Report(kEp, 2, Outcome::kSuccess);  // backlog 1,000: 250/s, capped at 20
  const EndpointSnapshot s = Inspect(kEp);
  EXPECT_DOUBLE_EQ(s.release_rate, 20);
  EXPECT_TRUE(s.pace_capped);
}

TEST_F(EngineTest, AnEndpointThatNeverFailedHasNoReleaseState) {
  Make(EngineConfig{});
  for (int i = 0; i < 100; ++i) {
    Admit(kEp, 1);
    Report(kEp, 1, Outcome::kSuccess);
  }
  const EndpointSnapshot s = Inspect(kEp);
  EXPECT_FALSE(s.has_release);
  EXPECT_EQ(s.release_rate, 0);
  EXPECT_EQ(s.served_per_second, 100);
}

}  // namespace
}  // namespace stagger::engine
