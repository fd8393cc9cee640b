// CapacityEstimator and ServedRate (core/engine/capacity_estimator.h): where
// a release starts (evidence of capacity, never the backlog), how the pace
// grows (per round, only while the fleet is sent at it), how the first
// refusal cuts it below the goodput measured, how a limiter's word and a
// growing queue set it, and why the outage's own failures teach it nothing.
// Fake time only: every instant is written out. The round is 250 ms here
// (the default round trip, until a probe measures one).
#include "core/engine/capacity_estimator.h"

#include <algorithm>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace stagger::engine {
namespace {

using Phase = CapacityEstimator::Phase;
using Source = CapacityEstimator::Source;
using Failure = CapacityEstimator::Failure;

const absl::Time kT0 = absl::FromUnixSeconds(1767225600);  // a whole second
absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }

const Failure kRefused{/*released=*/true, /*rate_limited=*/true, {}};
const Failure kFailed500{/*released=*/true, /*rate_limited=*/false, {}};

// `n` admissions through the pace evenly over [from, from + span), each
// answered a success `answer_after` later (none: no answer).
void Sent(CapacityEstimator& c, const DeferralParams& p, int n, double from,
          double span, double answer_after = -1) {
  for (int i = 0; i < n; ++i) {
    const double t = from + span * i / n;
    c.OnAdmitted(p, At(t));
    if (answer_after >= 0) c.OnSuccess(p, At(t + answer_after));
  }
}

// A release that started at t=1 at 10/s: the gate closed with nothing
// served and `backlog` parked, opened at t=1, the first success at t=1.
CapacityEstimator Released(const DeferralParams& p, double backlog = 0) {
  CapacityEstimator c;
  c.OnGateClosed(At(0), /*served=*/0);
  c.OnGateOpened(p, At(1), backlog);
  c.OnSuccess(p, At(1));
  return c;
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

TEST(CapacityEstimatorTest, AReleaseStartsFromWhatWasServedNeverTheBacklog) {
  const DeferralParams p;
  CapacityEstimator c;
  EXPECT_EQ(c.phase(), Phase::kIdle);
  // The endpoint served 200/s when it went down.
  c.OnGateClosed(At(0), /*served=*/200);
  EXPECT_EQ(c.phase(), Phase::kClosed);
  // Back, with 4,000 deliveries parked: the pace is what it served (the
  // only evidence of capacity there is); nothing confirms yet that it is
  // up, so a refusal now is not overload.
  c.OnGateOpened(p, At(5), /*backlog=*/4000);
  EXPECT_EQ(c.phase(), Phase::kOpening);
  EXPECT_EQ(c.source(), Source::kServed);
  EXPECT_DOUBLE_EQ(c.Pace(p), 200);
  EXPECT_FALSE(c.OnFailure(p, At(5.1), kRefused).overload);
  // The first success starts the release at that pace: the backlog does
  // not size it (it once jumped to 4,000 / 4 s = 1,000/s here).
  c.OnSuccess(p, At(5.3));
  EXPECT_EQ(c.phase(), Phase::kReleasing);
  EXPECT_DOUBLE_EQ(c.Pace(p), 200);
  EXPECT_TRUE(c.growing());
}

TEST(CapacityEstimatorTest, NothingServedStartsAtTheStartPace) {
  const DeferralParams p;
  CapacityEstimator c;
  c.OnGateClosed(At(0), /*served=*/0);
  c.OnGateOpened(p, At(1), 0);
  EXPECT_EQ(c.source(), Source::kStart);
  EXPECT_DOUBLE_EQ(c.Pace(p), CapacityEstimator::kStartPace);  // 10/s
}

TEST(CapacityEstimatorTest, SuccessesAloneDoNotGrowThePace) {
  // A thousand successes in a second, but nothing sent at the pace (the
  // answers of attempts the queue never let through, say): the pace stays.
  const DeferralParams p;
  CapacityEstimator c = Released(p);
  for (int i = 0; i < 1000; ++i) c.OnSuccess(p, At(1 + 0.001 * i));
  EXPECT_DOUBLE_EQ(c.Pace(p), 10);
}

TEST(CapacityEstimatorTest, ARoundSentAtThePaceDoublesIt) {
  const DeferralParams p;
  CapacityEstimator c = Released(p);
  // [1, 1.25): 3 sent at 10/s (2.5 a round), all answered: x2 at its end.
  Sent(c, p, 3, 1.0, 0.25, 0.01);
  c.OnAdmitted(p, At(1.25));
  EXPECT_DOUBLE_EQ(c.Pace(p), 20);
  EXPECT_EQ(c.source(), Source::kGrowth);
  // [1.25, 1.5): 5 at 20/s, all answered within it: x2 again.
  Sent(c, p, 5, 1.25, 0.24, 0.01);
  c.OnAdmitted(p, At(1.5));
  EXPECT_DOUBLE_EQ(c.Pace(p), 40);
}

TEST(CapacityEstimatorTest, SlowStartGrowsByWhatTheRoundDelivered) {
  // Answers take a round trip: a round's successes answer the round
  // before's admissions. Doubling a pace already doubled before they came
  // would send 4x what the endpoint was seen to take. So the pace grows
  // by the round's delivered rate at most, as TCP's window grows by one
  // per ACK.
  const DeferralParams p;
  CapacityEstimator c = Released(p);
  Sent(c, p, 3, 1.0, 0.25, 0.01);
  c.OnAdmitted(p, At(1.25));
  ASSERT_DOUBLE_EQ(c.Pace(p), 20);
  // [1.25, 1.5): 5 sent at 20/s; the 3 successes in it answer the round
  // before (12/s delivered): 20 + 12 = 32, not 40.
  for (int i = 0; i < 5; ++i) c.OnAdmitted(p, At(1.26 + 0.048 * i));
  for (int i = 0; i < 3; ++i) c.OnSuccess(p, At(1.3 + 0.05 * i));
  c.OnAdmitted(p, At(1.5));
  EXPECT_NEAR(c.Pace(p), 32, 1e-3);
}

TEST(CapacityEstimatorTest, ARoundTheFleetDidNotFillLeavesThePace) {
  // One delivery a round at a pace of 10/s: the demand, not the pace, is
  // what the endpoint saw, so nothing says it takes more.
  const DeferralParams p;
  CapacityEstimator c = Released(p);
  for (int i = 0; i < 8; ++i) {
    c.OnAdmitted(p, At(1 + 0.25 * i));
    c.OnSuccess(p, At(1.01 + 0.25 * i));
  }
  EXPECT_DOUBLE_EQ(c.Pace(p), 10);
}

TEST(CapacityEstimatorTest, ADeepBacklogLetsTheFirstRoundsGrowFasterAtSmallRisk) {
  // 10,000 parked: a round at 10/s may grow while its overshoot would cost
  // at most 1% of them (100 over-capacity answers) should the capacity be
  // just above 10/s: x (1 + 100 / (10/s x 250 ms)) = x41.
  const DeferralParams p;
  CapacityEstimator c = Released(p, /*backlog=*/10000);
  Sent(c, p, 3, 1.0, 0.25, 0.01);
  c.OnAdmitted(p, At(1.25));
  EXPECT_NEAR(c.Pace(p), 10 * (1 + 100 / (10 * 0.25)), 1);
  // At 410/s the same risk allows less than x2: slow start's x2 from here.
  // (All 103 answered within the round: it delivered 412/s.)
  const double pace = c.Pace(p);
  Sent(c, p, 103, 1.25, 0.24, 0.001);
  c.OnAdmitted(p, At(1.5));
  EXPECT_NEAR(c.Pace(p), 2 * pace, 1);
}

// A release at 400/s against a limiter taking 200/s: each round 100 sent,
// 50 succeed, the rest refused (after the first round).
class OverloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c_.OnGateClosed(At(0), /*served=*/400);
    c_.OnGateOpened(p_, At(1), 0);
    c_.OnSuccess(p_, At(1));
    // [1, 1.25): 100 sent, 50 succeed (200/s).
    for (int i = 0; i < 100; ++i) {
      const double t = 1 + 0.0025 * i;
      c_.OnAdmitted(p_, At(t));
      if (i % 2 == 0) c_.OnSuccess(p_, At(t + 0.001));
    }
  }
  DeferralParams p_;
  CapacityEstimator c_;
};

TEST_F(OverloadTest, TheFirstRefusalIsOverloadAndCutsBelowTheGoodput) {
  // The next round's first refusal (429 or 503) from a released attempt,
  // while the endpoint serves: overload at once, and the pace is cut to
  // just below the goodput the last round measured (200/s).
  c_.OnAdmitted(p_, At(1.25));
  const CapacityEstimator::FailureSignal f = c_.OnFailure(p_, At(1.251), kRefused);
  EXPECT_TRUE(f.overload);
  EXPECT_TRUE(f.cut);
  EXPECT_EQ(c_.source(), Source::kGoodput);
  EXPECT_NEAR(c_.threshold(), 200, 1);
  EXPECT_NEAR(c_.Pace(p_), 200 * CapacityEstimator::kCutShare, 1);
  EXPECT_FALSE(c_.growing());
  // More refusals within the round: overload (the caller re-paces them),
  // no second cut: they were sent at the old pace.
  for (int i = 0; i < 20; ++i) {
    const CapacityEstimator::FailureSignal g =
        c_.OnFailure(p_, At(1.26 + 0.005 * i), kRefused);
    EXPECT_TRUE(g.overload);
    EXPECT_FALSE(g.cut);
  }
}

TEST_F(OverloadTest, AFailureOtherThanARefusalIsOverloadOnlyInNumbers) {
  // A 500 among 50 successes is under 5% of the answers: the breaker's, not
  // the pace's; more of them are overload.
  EXPECT_FALSE(c_.OnFailure(p_, At(1.251), kFailed500).overload);
  bool overload = false;
  for (int i = 0; i < 10 && !overload; ++i) {
    overload = c_.OnFailure(p_, At(1.252), kFailed500).overload;
  }
  EXPECT_TRUE(overload);
}

TEST_F(OverloadTest, RefusalsInTheCutRoundMeasureTheLimiterWithoutItsBurst) {
  ASSERT_TRUE(c_.OnFailure(p_, At(1.25), kRefused).cut);
  // Attempts sent before the cut keep coming back: from the first refusal
  // on the limiter has no burst left, so what it lets through since is its
  // rate. 30 successes in 200 ms: 150/s.
  for (int i = 0; i < 30; ++i) c_.OnSuccess(p_, At(1.25 + 0.2 * i / 30));
  c_.OnFailure(p_, At(1.45), kRefused);
  EXPECT_NEAR(c_.threshold(), 150, 1);
  EXPECT_NEAR(c_.Pace(p_), 150 * CapacityEstimator::kCutShare, 1);
}

TEST_F(OverloadTest, AboveTheCutThePaceProbesAlongCubicsCurve) {
  ASSERT_TRUE(c_.OnFailure(p_, At(1.25), kRefused).cut);
  const double capacity = c_.threshold();
  ASSERT_NEAR(capacity, 200, 1);
  // Rounds of 250 ms, the fleet sent at the pace, all succeeding: from 95%
  // of the capacity the pace probes along CUBIC's curve, capacity x (1 +
  // 0.05 x (t - 1 s)^3), t from the cut round's end (1.5): back near the
  // capacity fast, flat around it, then faster.
  int rounds = 0;
  auto probe_until = [&](double t) {
    for (; 0.25 * rounds < t; ++rounds) {
      const double from = 1.5 + 0.25 * rounds;
      Sent(c_, p_, static_cast<int>(c_.Pace(p_) / 4) + 1, from, 0.25, 0.001);
    }
    c_.OnAdmitted(p_, At(1.5 + t));  // ends the last round
    return c_.Pace(p_);
  };
  auto curve = [&](double t) {
    return capacity * (1 + 0.05 * (t - 1) * (t - 1) * (t - 1));
  };
  EXPECT_NEAR(probe_until(0.75), curve(0.75), 0.01);  // 99.9%
  EXPECT_NEAR(probe_until(1.25), curve(1.25), 0.01);  // 100.1%
  EXPECT_NEAR(probe_until(2.25), curve(2.25), 0.01);  // 110%
  EXPECT_DOUBLE_EQ(c_.threshold(), capacity);
  // Past +25% (t = 2.7) with no overload, the capacity stays until the
  // endpoint has served past +25% too (its goodput over about kRateTau
  // lags the pace). Then it is forgotten: it grew. Slow start again.
  probe_until(2.75);
  EXPECT_DOUBLE_EQ(c_.threshold(), capacity);
  probe_until(3.5);
  EXPECT_EQ(c_.threshold(), 0);
}

TEST_F(OverloadTest, ALimitersWordPausesTheReleaseAndHoldsThePace) {
  // A 429 with Retry-After: 2 (or RateLimit-Reset: 2): nothing goes before
  // then, the pace is set as for a cut, and it does not probe upward for
  // 2 s / (1 - kCutShare) = 40 s: each word costs a pause.
  Failure word = kRefused;
  word.limiter_wait = absl::Seconds(2);
  const CapacityEstimator::FailureSignal f = c_.OnFailure(p_, At(1.25), word);
  EXPECT_TRUE(f.overload);
  EXPECT_EQ(f.pause_until, At(3.25));
  EXPECT_EQ(c_.source(), Source::kLimiter);
  const double pace = c_.Pace(p_);
  for (int r = 0; r < 12; ++r) {
    Sent(c_, p_, static_cast<int>(pace / 4) + 1, 3.25 + 0.25 * r, 0.25, 0.001);
  }
  EXPECT_DOUBLE_EQ(c_.Pace(p_), pace);
}

TEST_F(OverloadTest, ALimitersWordCutsToWhatItServedPausesIncluded) {
  // After 200/s in [1, 1.25), a second with nothing sent (a pause), then
  // [2.25, 2.5) at 300/s: the burst the pause refilled. Then "429,
  // Retry-After: 1". That round's goodput holds the burst (a cut to 95% of
  // it floods the limiter again after the pause); the pace goes to 95% of
  // what was served over about kRateTau, the pause included.
  Sent(c_, p_, 75, 2.25, 0.25, 0.001);
  Failure word = kRefused;
  word.limiter_wait = absl::Seconds(1);
  ASSERT_TRUE(c_.OnFailure(p_, At(2.501), word).cut);
  EXPECT_EQ(c_.source(), Source::kLimiter);
  EXPECT_NEAR(c_.Pace(p_),
              CapacityEstimator::kCutShare * c_.Goodput(At(2.501)), 1e-3);
  EXPECT_LT(c_.Pace(p_), 200 * CapacityEstimator::kCutShare);
}

TEST_F(OverloadTest, AWordsHoldEndsOnceProbingCouldPayForAnotherWord) {
  // "Retry-After: 1" at 1.25: the pause ends at 2.25. Probing gains at
  // most 5% of the rate; another word would cost a whole second of it. So
  // the pace holds for 1 s / 0.05 = 20 s after the pause, then probes.
  Failure word = kRefused;
  word.limiter_wait = absl::Seconds(1);
  ASSERT_TRUE(c_.OnFailure(p_, At(1.25), word).cut);
  const double pace = c_.Pace(p_);
  auto rounds_from = [&](double from, int n) {
    for (int r = 0; r < n; ++r) {
      const double t = from + 0.25 * r;
      Sent(c_, p_, static_cast<int>(c_.Pace(p_) / 4) + 1, t, 0.25, 0.001);
    }
  };
  rounds_from(2.25, 79);  // up to 22 s: still held
  c_.OnAdmitted(p_, At(22.2));
  EXPECT_DOUBLE_EQ(c_.Pace(p_), pace);
  rounds_from(22.25, 4);  // from 22.25 on it probes
  c_.OnAdmitted(p_, At(23.25));
  EXPECT_GT(c_.Pace(p_), pace);
}

TEST(CapacityEstimatorTest, RefusalsThatComeBackInALimitersPauseMeasureIt) {
  // A release at 400/s into a limiter of 200/s, answers in 50 ms. Its
  // first 429 says "Retry-After: 1" at 2.0: the pause runs to 3.0. The
  // round's goodput (its burst included) and the recent average (the
  // ramp included) say little about the rate. But the attempts sent in
  // the 50 ms before the word keep coming back: refused at 2.0 and 2.05,
  // the limiter held under one token at each, and between them it let 10
  // through: 200/s, give or take one success. The pace goes to the lower
  // bound, 9 / 0.05 s = 180/s, below 95% of 200.
  DeferralParams p;
  CapacityEstimator c;
  c.SampleRtt(absl::Milliseconds(50));
  c.OnGateClosed(At(0), /*served=*/0);
  c.OnGateOpened(p, At(1), 0);
  c.OnSuccess(p, At(1));
  Sent(c, p, 400, 1.0, 1.0, 0.001);  // the ramp: 400/s, all pass
  Failure word = kRefused;
  word.limiter_wait = absl::Seconds(1);
  ASSERT_TRUE(c.OnFailure(p, At(2.0), word).cut);
  EXPECT_EQ(c.source(), Source::kLimiter);
  for (int i = 0; i < 10; ++i) {
    c.OnSuccess(p, At(2.0025 + 0.005 * i));
    const CapacityEstimator::FailureSignal f =
        c.OnFailure(p, At(2.004 + 0.005 * i), word);
    EXPECT_TRUE(f.overload);
    EXPECT_FALSE(f.cut);  // answers to what went before the word
  }
  EXPECT_NEAR(c.threshold(), 10 / 0.049, 1);
  EXPECT_NEAR(c.Pace(p), 9 / 0.049, 1);
}

TEST(CapacityEstimatorTest, ALimitersPauseEndsItsEpisodeOfRefusals) {
  // Answers take 2 s, so a round lasts 2 s. A word of 1 s at 2.0; one more
  // refusal comes back in the pause (2.5). The pause ends at 3.0: the
  // limiter has refilled, and the 30 successes then are its burst. A
  // refusal at 3.2 starts a new episode: the burst does not count as the
  // rate, and the pace stays.
  DeferralParams p;
  CapacityEstimator c;
  c.SampleRtt(absl::Seconds(2));
  c.OnGateClosed(At(0), /*served=*/0);
  c.OnGateOpened(p, At(1), 0);
  c.OnSuccess(p, At(1));
  Sent(c, p, 200, 1.0, 1.0, 0.001);
  Failure word = kRefused;
  word.limiter_wait = absl::Seconds(1);
  ASSERT_TRUE(c.OnFailure(p, At(2.0), word).cut);
  EXPECT_TRUE(c.OnFailure(p, At(2.5), word).overload);
  const double pace = c.Pace(p);
  for (int i = 0; i < 30; ++i) c.OnSuccess(p, At(3.0 + 0.005 * i));
  const CapacityEstimator::FailureSignal f = c.OnFailure(p, At(3.2), word);
  EXPECT_TRUE(f.overload);
  EXPECT_FALSE(f.cut);  // the round after the pause
  EXPECT_DOUBLE_EQ(c.Pace(p), pace);
}

TEST_F(OverloadTest, APaceTheDemandDidNotFillForgetsNoCapacity) {
  // Cut at 200/s. Then the fleet is sent at 76% of the pace (enough to
  // count as busy), all succeeding, but no faster than 200/s: the demand,
  // not the endpoint, bounds it. The pace probes past 125% of the
  // capacity, yet the endpoint never served past it: the capacity stays
  // (a gate that closes keeps it, and the next release does not slow
  // start into the limiter).
  ASSERT_TRUE(c_.OnFailure(p_, At(1.25), kRefused).cut);
  const double capacity = c_.threshold();
  for (int r = 0; r < 20; ++r) {
    const int n = std::min(50, static_cast<int>(0.76 * c_.Pace(p_) / 4) + 1);
    Sent(c_, p_, n, 1.5 + 0.25 * r, 0.25, 0.001);
  }
  c_.OnAdmitted(p_, At(6.5));
  ASSERT_GT(c_.Pace(p_), CapacityEstimator::kStaleCapacity * capacity);
  EXPECT_DOUBLE_EQ(c_.threshold(), capacity);
}

TEST_F(OverloadTest, ALimitersPauseAndTheRoundAfterItMakeNoFurtherCut) {
  // "Retry-After: 2" at 1.25: the cut, and nothing released before 3.25.
  Failure word = kRefused;
  word.limiter_wait = absl::Seconds(2);
  ASSERT_TRUE(c_.OnFailure(p_, At(1.25), word).cut);
  const double pace = c_.Pace(p_);
  // Attempts sent before it keep coming back refused, with words of their
  // own, through the pause (the limiter answers for itself: overload,
  // though nothing succeeds) and the round after it: the caller re-paces
  // them, but they say nothing of the pace now (nothing went at it), and
  // a cut on each would collapse the pace to nothing.
  for (double t : {1.3, 2.0, 3.0, 3.26}) {
    const CapacityEstimator::FailureSignal f = c_.OnFailure(p_, At(t), word);
    EXPECT_TRUE(f.overload) << t;
    EXPECT_FALSE(f.cut) << t;
  }
  c_.OnSuccess(p_, At(3.3));
  EXPECT_FALSE(c_.OnFailure(p_, At(3.49), word).cut);
  EXPECT_DOUBLE_EQ(c_.Pace(p_), pace);
  // A round after the pause a refusal is the new pace's: it cuts.
  EXPECT_TRUE(c_.OnFailure(p_, At(3.51), word).cut);
}

TEST(CapacityEstimatorTest, OneFailureAmongFewAnswersIsNoOverload) {
  // A release answered at 16/s for 2 s; then 500s. One or two among so
  // few answers are over 5% of them but are noise (a 3% failure rate
  // gives them): not overload. A third within about kRateTau is.
  const DeferralParams p;
  CapacityEstimator c = Released(p);
  Sent(c, p, 32, 1, 2, 0.001);
  EXPECT_FALSE(c.OnFailure(p, At(3.0), kFailed500).overload);
  EXPECT_FALSE(c.OnFailure(p, At(3.05), kFailed500).overload);
  EXPECT_TRUE(c.OnFailure(p, At(3.1), kFailed500).overload);
}

TEST(CapacityEstimatorTest, TooFewAnswersHalveButNotBelowTheGoodput) {
  // 8 successes/s for 2 s at a pace of 10/s: too few answers in a round
  // or in kRateTau to measure, so a refusal halves the pace; but the
  // endpoint was seen to serve about 8/s, and the pace stays just below
  // that (halving again and again would collapse it).
  const DeferralParams p;
  CapacityEstimator c = Released(p);
  for (int i = 0; i < 16; ++i) c.OnSuccess(p, At(1 + i / 8.0));
  ASSERT_TRUE(c.OnFailure(p, At(3.0), kRefused).cut);
  EXPECT_EQ(c.source(), Source::kHalved);
  EXPECT_GT(c.Pace(p), 10.0 / 2);
  EXPECT_NEAR(c.Pace(p), CapacityEstimator::kCutShare * c.Goodput(At(3.0)),
              1e-3);
}

TEST_F(OverloadTest, FailuresFromAnEndpointServingNothingAreNotOverload) {
  // The last success was at ~1.25; two round trips (500 ms) later with no
  // success, the endpoint is down, not overloaded: the breaker's business.
  EXPECT_FALSE(c_.OnFailure(p_, At(1.8), kRefused).overload);
  // Failures the queue did not release never are.
  EXPECT_FALSE(c_.OnFailure(p_, At(1.26), Failure{}).overload);
}

TEST_F(OverloadTest, CutsMadeByTheOutagesFirstFailuresAreUndone) {
  // No capacity measured yet. The endpoint goes down: its first failures
  // look like overload and cut the pace ...
  ASSERT_EQ(c_.threshold(), 0);
  ASSERT_TRUE(c_.OnFailure(p_, At(1.25), kRefused).cut);
  ASSERT_GT(c_.threshold(), 0);
  // ... then the breaker trips: no success came a round after that cut,
  // so it was the outage's. The capacity is forgotten, and the next release
  // starts from what the endpoint served.
  c_.OnGateClosed(At(1.4), /*served=*/150);
  EXPECT_EQ(c_.threshold(), 0);
  c_.OnGateOpened(p_, At(3), 0);
  EXPECT_DOUBLE_EQ(c_.Pace(p_), 150);
  EXPECT_EQ(c_.source(), Source::kServed);
}

TEST_F(OverloadTest, ACutTheEndpointOutlivedStaysLearned) {
  ASSERT_TRUE(c_.OnFailure(p_, At(1.25), kRefused).cut);
  const double capacity = c_.threshold();
  c_.OnSuccess(p_, At(1.6));  // a round after the cut: it still serves
  c_.OnGateClosed(At(10), /*served=*/400);
  EXPECT_DOUBLE_EQ(c_.threshold(), capacity);
  // The next release starts below it, whatever was served.
  c_.OnGateOpened(p_, At(12), 0);
  EXPECT_NEAR(c_.Pace(p_), CapacityEstimator::kCutShare * capacity, 1e-3);
}

TEST(CapacityEstimatorTest, AnswersFallingBehindTheAdmissionsDrainThePace) {
  // A server that queues. [1, 1.25): 100 go in at 400/s and come back at
  // once: x2. [1.25, 1.5): 200 go in at 800/s, but answers come back at
  // 100/s only (its latency grows): under half of the round before's
  // admissions. The pace goes below that goodput before anything is
  // refused.
  const DeferralParams p;
  CapacityEstimator c;
  c.OnGateClosed(At(0), /*served=*/400);
  c.OnGateOpened(p, At(1), 0);
  c.OnSuccess(p, At(1));
  Sent(c, p, 100, 1.0, 0.25, 0.001);
  c.OnAdmitted(p, At(1.25));
  ASSERT_DOUBLE_EQ(c.Pace(p), 800);
  for (int i = 0; i < 25; ++i) c.OnSuccess(p, At(1.26 + 0.0096 * i));
  Sent(c, p, 200, 1.26, 0.24);
  c.OnAdmitted(p, At(1.5));
  EXPECT_EQ(c.source(), Source::kGoodput);
  EXPECT_NEAR(c.threshold(), 100, 1);
  EXPECT_NEAR(c.Pace(p), 100 * CapacityEstimator::kCutShare, 1);
}

TEST(CapacityEstimatorTest, TooFewAnswersHalveInsteadOfMeasuring) {
  const DeferralParams p;
  CapacityEstimator c;
  c.OnGateClosed(At(0), /*served=*/1000);
  c.OnGateOpened(p, At(1), 0);
  c.OnSuccess(p, At(1.01));
  c.OnSuccess(p, At(1.02));
  // Two successes 20 ms into the release say little about the goodput:
  // the refusal halves the pace instead of cutting it to almost nothing.
  ASSERT_TRUE(c.OnFailure(p, At(1.03), kRefused).cut);
  EXPECT_EQ(c.source(), Source::kHalved);
  EXPECT_DOUBLE_EQ(c.Pace(p), 500);
}

TEST(CapacityEstimatorTest, TheOperatorsCapBoundsThePace) {
  DeferralParams p;
  p.release_rate_per_second = 50;
  CapacityEstimator c;
  c.OnGateClosed(At(0), /*served=*/400);
  c.OnGateOpened(p, At(1), /*backlog=*/100000);
  EXPECT_DOUBLE_EQ(c.Pace(p), 50);
  c.OnSuccess(p, At(1.2));
  for (int r = 0; r < 4; ++r) Sent(c, p, 13, 1.2 + 0.25 * r, 0.25, 0.001);
  c.OnAdmitted(p, At(2.3));
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
  // A round lasts a round trip, at least kMinRound.
  EXPECT_EQ(d.round(), CapacityEstimator::kMinRound);
  CapacityEstimator e;
  e.SampleRtt(absl::Hours(1));
  EXPECT_EQ(e.rtt(), CapacityEstimator::kMaxRtt);
}

}  // namespace
}  // namespace stagger::engine
