// CapacityEstimator and ServedRate (core/engine/capacity_estimator.h):
// where a release starts, how the pace grows while released attempts
// succeed, how an overload cuts it to the goodput measured, and why the
// outage's own failures teach it nothing. Fake time only: every instant is
// written out.
#include "core/engine/capacity_estimator.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace stagger::engine {
namespace {

using Phase = CapacityEstimator::Phase;
using Source = CapacityEstimator::Source;

const absl::Time kT0 = absl::FromUnixSeconds(1767225600);  // a whole second
absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

// `n` successes evenly spread over [from, from + span).
void Successes(CapacityEstimator& c, const DeferralParams& p, int n,
               double from, double span, double backlog = 0) {
  for (int i = 0; i < n; ++i) c.OnSuccess(p, At(from + span * i / n), backlog);
}

// Released attempts failing at `at` until the failures are over 5% of the
// recent answers; the signal of the one that crossed it.
CapacityEstimator::FailureSignal FailUntilOverload(CapacityEstimator& c,
                                                   const DeferralParams& p,
                                                   double at) {
  for (int i = 0; i < 1000; ++i) {
    const CapacityEstimator::FailureSignal f = c.OnFailure(p, At(at), true);
    if (f.overload) return f;
  }
  ADD_FAILURE() << "never overloaded";
  return {};
}

TEST(ServedRateTest, CountsTheLastCompleteSecond) {
  ServedRate s;
  EXPECT_EQ(s.PerSecond(At(0)), 0);
  for (int i = 0; i < 300; ++i) s.OnSuccess(At(0.001 * i));  // 300 in [0,1)
  // Within that second: what it has counted so far.
  EXPECT_EQ(s.PerSecond(At(0.5)), 300);
  // The next second: the complete one before it.
  EXPECT_EQ(s.PerSecond(At(1.5)), 300);
  // Two seconds on, nothing recent: 0.
  EXPECT_EQ(s.PerSecond(At(2.5)), 0);
  // One success in the next second: the 300 still show until it is over.
  s.OnSuccess(At(1.2));
  EXPECT_EQ(s.PerSecond(At(1.3)), 300);
  EXPECT_EQ(s.PerSecond(At(2.3)), 1);
}

TEST(CapacityEstimatorTest, AReleaseStartsFromWhatWasServed) {
  const DeferralParams p;
  CapacityEstimator c;
  EXPECT_EQ(c.phase(), Phase::kIdle);
  // The endpoint served 200/s when it went down.
  c.OnGateClosed(At(0), /*served=*/200);
  EXPECT_EQ(c.phase(), Phase::kClosed);
  // Back (a Retry-After window ended): the pace is what it served; nothing
  // confirms yet that it is up, so a failure now is not overload.
  c.OnGateOpened(p, At(5));
  EXPECT_EQ(c.phase(), Phase::kOpening);
  EXPECT_EQ(c.source(), Source::kServed);
  EXPECT_DOUBLE_EQ(c.Pace(p), 200);
  EXPECT_FALSE(c.OnFailure(p, At(5.1), /*released=*/true).overload);
  EXPECT_DOUBLE_EQ(c.Pace(p), 200);
  // The first success: 4,000 parked deliveries are to go within 4 s, so
  // the pace jumps to 1,000/s and keeps growing from there.
  c.OnSuccess(p, At(5.3), /*backlog=*/4000);
  EXPECT_EQ(c.phase(), Phase::kReleasing);
  EXPECT_EQ(c.source(), Source::kBacklog);
  EXPECT_DOUBLE_EQ(c.Pace(p), 1000);
  EXPECT_TRUE(c.growing());
}

TEST(CapacityEstimatorTest, NothingServedStartsAtTheStartPace) {
  const DeferralParams p;
  CapacityEstimator c;
  c.OnGateClosed(At(0), /*served=*/0);
  c.OnGateOpened(p, At(1));
  EXPECT_EQ(c.source(), Source::kStart);
  EXPECT_DOUBLE_EQ(c.Pace(p), CapacityEstimator::kStartPace);  // 10/s
}

TEST(CapacityEstimatorTest, SlowStartTriplesPerRoundTripWhileAllSucceed) {
  const DeferralParams p;
  CapacityEstimator c;
  c.OnGateClosed(At(0), 0);
  c.OnGateOpened(p, At(1));
  c.OnSuccess(p, At(1.25), /*backlog=*/0);  // confirms; pace 10/s
  ASSERT_DOUBLE_EQ(c.Pace(p), 10);
  // Each success adds 2 / rtt (rtt 250 ms until measured): +8/s. The 2.5
  // successes a round-trip of 10/s brings add 20/s: x3 per round-trip.
  Successes(c, p, 10, 1.5, 1.0);
  EXPECT_DOUBLE_EQ(c.Pace(p), 10 + 10 * 8);
  EXPECT_EQ(c.source(), Source::kGrowth);
  // A measured round-trip of 500 ms halves the growth per success.
  c.SampleRtt(absl::Milliseconds(500));
  EXPECT_EQ(c.rtt(), absl::Milliseconds(500));
  Successes(c, p, 10, 2.5, 1.0);
  EXPECT_DOUBLE_EQ(c.Pace(p), 90 + 10 * 4);
}

// A release of 10 deliveries/s confirmed at t=1, then 200 successes/s for
// half a second: goodput ~200/s, pace far above it.
class OverloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.OnGateClosed(At(0), 0);
    c_.OnGateOpened(p_, At(1));
    c_.OnSuccess(p_, At(1), /*backlog=*/40000);  // pace 10,000/s
    Successes(c_, p_, 100, 1.0, 0.5);
    ASSERT_GT(c_.Pace(p_), 10000);
  }
  DeferralParams p_;
  CapacityEstimator c_;
};

TEST_F(OverloadTest, AFailureWhileServingCutsToTheGoodputOncePerRoundTrip) {
  // At t=1.5 released attempts fail alongside the successes (well over 5%
  // of answers): overload. The pace goes to the goodput measured (~200/s,
  // the average of a young release corrected for its age) + 5%, and that
  // is the capacity above which it will grow only slowly.
  // (The first few failures are under 5% of answers: not yet a signal.)
  const CapacityEstimator::FailureSignal f = FailUntilOverload(c_, p_, 1.5);
  EXPECT_TRUE(f.cut);
  EXPECT_EQ(c_.source(), Source::kGoodput);
  EXPECT_NEAR(c_.Pace(p_), 200 * 1.05, 200 * 0.1);
  EXPECT_DOUBLE_EQ(c_.threshold(), c_.Pace(p_));
  EXPECT_FALSE(c_.growing());
  const double cut = c_.Pace(p_);
  // More failures within the same round-trip (250 ms): overload (the
  // caller re-paces them) but no second cut: they came from the old pace.
  for (int i = 0; i < 20; ++i) {
    const auto g = c_.OnFailure(p_, At(1.5 + 0.01 * i), true);
    EXPECT_TRUE(g.overload);
    EXPECT_FALSE(g.cut);
  }
  EXPECT_DOUBLE_EQ(c_.Pace(p_), cut);
  // A round-trip later, still overloaded (a success keeps it "serving"):
  // a new cut, to the goodput again, never up.
  c_.OnSuccess(p_, At(1.76), 0);
  EXPECT_TRUE(c_.OnFailure(p_, At(1.77), true).cut);
  EXPECT_LE(c_.Pace(p_), cut + 1);
}

TEST_F(OverloadTest, AboveTheMeasuredCapacityThePaceGrowsSlowly) {
  ASSERT_TRUE(FailUntilOverload(c_, p_, 1.5).cut);
  const double cut = c_.Pace(p_);
  // Each success now adds 0.1 / rtt = 0.4/s: 100 successes, +40/s.
  Successes(c_, p_, 100, 2.0, 0.5);
  EXPECT_NEAR(c_.Pace(p_), cut + 40, 1e-3);
  EXPECT_FALSE(c_.growing());
}

TEST_F(OverloadTest, FailuresFromAnEndpointServingNothingAreNotOverload) {
  // The last success was at ~1.5; two round-trips (500 ms) later with no
  // success, the endpoint is down, not overloaded: the breaker's business.
  EXPECT_FALSE(c_.OnFailure(p_, At(2.1), true).overload);
  // Failures that were not released by the queue never are.
  EXPECT_FALSE(c_.OnFailure(p_, At(1.5), /*released=*/false).overload);
}

TEST_F(OverloadTest, CutsMadeByTheOutagesFirstFailuresAreUndone) {
  // No capacity measured yet (threshold 0: unlimited). The endpoint goes
  // down: its first failures look like overload and cut the pace ...
  ASSERT_EQ(c_.threshold(), 0);
  ASSERT_TRUE(FailUntilOverload(c_, p_, 1.5).cut);
  ASSERT_GT(c_.threshold(), 0);
  // ... then the breaker trips within the round-trip: those failures were
  // the outage's. The capacity measured is forgotten (unlimited again), and
  // the next release starts from what the endpoint served.
  c_.OnGateClosed(At(1.6), /*served=*/150);
  EXPECT_EQ(c_.threshold(), 0);
  c_.OnGateOpened(p_, At(3));
  EXPECT_DOUBLE_EQ(c_.Pace(p_), 150);
  EXPECT_EQ(c_.source(), Source::kServed);
}

TEST_F(OverloadTest, AnOverloadLongBeforeTheOutageStaysLearned) {
  ASSERT_TRUE(FailUntilOverload(c_, p_, 1.5).cut);
  const double capacity = c_.threshold();
  c_.OnSuccess(p_, At(4), 0);
  c_.OnGateClosed(At(10), /*served=*/0);
  EXPECT_DOUBLE_EQ(c_.threshold(), capacity);
}

TEST(CapacityEstimatorTest, TooFewAnswersHalveInsteadOfMeasuring) {
  const DeferralParams p;
  CapacityEstimator c;
  c.OnGateClosed(At(0), 0);
  c.OnGateOpened(p, At(1));
  c.OnSuccess(p, At(1.01), /*backlog=*/4000);  // 1,000/s
  c.OnSuccess(p, At(1.02), 0);
  // Two successes 20 ms into the release say little about the goodput:
  // the failure halves the pace instead of cutting it to "100/s".
  const double before = c.Pace(p);
  ASSERT_TRUE(c.OnFailure(p, At(1.03), true).cut);  // 1 of 3 answers
  EXPECT_EQ(c.source(), Source::kHalved);
  EXPECT_DOUBLE_EQ(c.Pace(p), before / 2);
}

TEST(CapacityEstimatorTest, TheOperatorsCapBoundsThePace) {
  DeferralParams p;
  p.release_rate_per_second = 50;
  CapacityEstimator c;
  c.OnGateClosed(At(0), /*served=*/400);
  c.OnGateOpened(p, At(1));
  EXPECT_DOUBLE_EQ(c.Pace(p), 50);
  c.OnSuccess(p, At(1.2), /*backlog=*/100000);
  Successes(c, p, 100, 1.3, 1);
  EXPECT_DOUBLE_EQ(c.Pace(p), 50);
}

TEST(CapacityEstimatorTest, RoundTripSamplesAreAveragedAndBounded) {
  CapacityEstimator c;
  EXPECT_EQ(c.rtt(), CapacityEstimator::kDefaultRtt);
  c.SampleRtt(absl::Milliseconds(400));
  EXPECT_EQ(c.rtt(), absl::Milliseconds(400));
  c.SampleRtt(absl::Milliseconds(800));  // 3/4 old + 1/4 new
  EXPECT_EQ(c.rtt(), absl::Milliseconds(500));
  CapacityEstimator d;
  d.SampleRtt(absl::ZeroDuration());
  EXPECT_EQ(d.rtt(), CapacityEstimator::kMinRtt);
  CapacityEstimator e;
  e.SampleRtt(absl::Hours(1));
  EXPECT_EQ(e.rtt(), CapacityEstimator::kMaxRtt);
}

}  // namespace
}  // namespace stagger::engine
