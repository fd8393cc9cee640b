// Engine: the learned release pace (capacity_estimator.h,
// release_pacer.h): a backlog parked behind a closed gate comes back at a
// pace that starts from evidence of capacity, grows per round while the
// fleet is sent at it, and is cut below the goodput by the first refusal;
// a refused delivery waits at the front of the line and uses up no attempt;
// a limiter's Retry-After or RateLimit-Reset sets the pace directly; the
// operator's cap bounds it. Fake clock, fixed seed (engine_test_fixture.h).
#include <optional>

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
// retries park behind the window. Then the window ends and the release
// starts at 10/s (nothing was served): one retry goes at once and
// succeeds.
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
    clock_.Advance(absl::Milliseconds(50));
    Report(kEp, 2, Outcome::kSuccess);
    ASSERT_EQ(Inspect(kEp).pace_phase, CapacityEstimator::Phase::kReleasing);
    ASSERT_DOUBLE_EQ(Inspect(kEp).release_rate, 10);
  }
  // For `span`, a retry asks every millisecond and goes whenever the pace
  // has a slot, answered `outcome` at once: the fleet sent at the pace (a
  // refused one is re-paced, which keeps the release going). Returns how
  // many went.
  int SendAtThePace(absl::Duration span, Outcome outcome = Outcome::kSuccess) {
    int sent = 0;
    const absl::Time end = clock_.Now() + span;
    while (clock_.Now() < end) {
      if (Admit(kEp, 2).verdict == Verdict::kProceed) {
        ++sent;
        Report(kEp, 2, outcome);
      }
      clock_.Advance(absl::Milliseconds(1));
    }
    return sent;
  }
  // `attempt` asks every millisecond until the pace has a slot for it
  // (SendAtThePace may have taken the last one): its PROCEED.
  Decision AdmitAtThePace(int attempt) {
    for (int i = 0; i < 1000; ++i) {
      const Decision d = Admit(kEp, attempt);
      if (d.verdict == Verdict::kProceed) return d;
      clock_.Advance(absl::Milliseconds(1));
    }
    ADD_FAILURE() << "no slot within a second";
    return Decision{};
  }
  // A failure Report of `attempt` admitted with the coordinator's token.
  Decision Refused(int attempt, std::optional<absl::Duration> retry_after,
                   std::optional<absl::Duration> ratelimit_reset) {
    ReportInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    in.outcome = Outcome::kRateLimited;
    in.retry_after = retry_after;
    in.ratelimit_reset = ratelimit_reset;
    in.admission = kCoordinatorAdmission;
    absl::StatusOr<Decision> d = engine().Report(in);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : Decision{};
  }
};

TEST_F(ReleasePaceTest, ThePaceGrowsPerRoundOnlyWhileTheFleetIsSentAtIt) {
  // Nobody asks for rounds on end: the pace has nothing to learn from and
  // stays (successes of attempts sent otherwise would not move it either).
  clock_.Advance(absl::Milliseconds(600));
  Report(kEp, 1, Outcome::kSuccess);
  EXPECT_DOUBLE_EQ(Inspect(kEp).release_rate, 10);
  // The fleet takes every slot for a second and everything succeeds: the
  // pace grows round after round (250 ms each, the round trip until a
  // probe measures one): x2 at least, more while a round's overshoot would
  // cost at most 1% of the 1,000 waiting.
  SendAtThePace(absl::Seconds(1));
  const EndpointSnapshot s = Inspect(kEp);
  EXPECT_EQ(s.pace_source, CapacityEstimator::Source::kGrowth);
  EXPECT_GT(s.release_rate, 10 * 2 * 2 * 2);
  EXPECT_EQ(s.pace_threshold, 0);  // no capacity measured: none seen
  EXPECT_FALSE(s.pace_capped);
}

TEST_F(ReleasePaceTest, TheFirstRefusalCutsBelowTheGoodputAndUsesNoAttempt) {
  // A second at the pace, all succeeding; then a paced attempt is refused
  // (429, no Retry-After) while the endpoint serves: overload at once.
  SendAtThePace(absl::Seconds(1));
  const double before = Inspect(kEp).release_rate;
  const double budget = Inspect(kEp).budget_remaining;
  ASSERT_EQ(AdmitAtThePace(7).verdict, Verdict::kProceed);
  const Decision d = Refused(7, std::nullopt, std::nullopt);
  EXPECT_TRUE(d.pace_cut);
  EXPECT_EQ(d.verdict, Verdict::kDefer);
  EXPECT_EQ(d.reason, Reason::kPaced);
  // The same attempt again: the pace's overshoot is not the delivery's.
  EXPECT_EQ(d.attempt, 7);
  // At the front of the line: the next slot at the new pace, not the tail
  // of the queue the parked backlog booked.
  EXPECT_LE(d.defer_until, clock_.Now() + absl::Seconds(1));
  const EndpointSnapshot s = Inspect(kEp);
  EXPECT_EQ(s.pace_source, CapacityEstimator::Source::kGoodput);
  EXPECT_LT(s.release_rate, s.pace_threshold);  // below the goodput
  EXPECT_LT(s.release_rate, before);
  EXPECT_DOUBLE_EQ(s.budget_remaining, budget);  // no budget spent
  EXPECT_EQ(s.consecutive_failures, 0);         // the breaker saw nothing
  // Even on the last attempt the policy allows (8 by default).
  ASSERT_EQ(Admit(kEp, 8).verdict, Verdict::kDefer);  // paced now
  const Decision last = Refused(8, std::nullopt, std::nullopt);
  EXPECT_EQ(last.verdict, Verdict::kDefer);
  EXPECT_EQ(last.attempt, 8);
}

TEST_F(ReleasePaceTest, ALimitersRetryAfterPausesTheReleaseAndSetsThePace) {
  SendAtThePace(absl::Seconds(1));
  ASSERT_EQ(AdmitAtThePace(3).verdict, Verdict::kProceed);
  // "429, Retry-After: 2" from a paced attempt: the limiter names when it
  // takes more. The whole release waits for it (no slot before), and the
  // pace is set from what it let through; no fleet-wide window closes the
  // gate (the release goes on at that pace after it).
  const absl::Time now = clock_.Now();
  const Decision d = Refused(3, absl::Seconds(2), std::nullopt);
  EXPECT_EQ(d.reason, Reason::kPaced);
  EXPECT_EQ(d.attempt, 3);
  EXPECT_GE(d.defer_until, now + absl::Seconds(2));
  EndpointSnapshot s = Inspect(kEp);
  EXPECT_EQ(s.pace_source, CapacityEstimator::Source::kLimiter);
  EXPECT_EQ(s.retry_after_until, absl::InfinitePast());
  EXPECT_EQ(s.pace_phase, CapacityEstimator::Phase::kReleasing);
  clock_.Advance(absl::Milliseconds(1999));
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kPaced);
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
}

TEST_F(ReleasePaceTest, ALimitersRateLimitResetDoesTheSame) {
  SendAtThePace(absl::Seconds(1));
  ASSERT_EQ(AdmitAtThePace(3).verdict, Verdict::kProceed);
  const absl::Time now = clock_.Now();
  // RateLimit-Reset: 3 and Retry-After: 1: the longer counts.
  const Decision d = Refused(3, absl::Seconds(1), absl::Seconds(3));
  EXPECT_EQ(d.reason, Reason::kPaced);
  EXPECT_GE(d.defer_until, now + absl::Seconds(3));
  EXPECT_EQ(Inspect(kEp).pace_source, CapacityEstimator::Source::kLimiter);
}

TEST_F(EngineTest, OutsideAReleaseRateLimitResetIsTheFleetsWindow) {
  // No release runs: a 429 saying only "RateLimit-Reset: 4" is remembered
  // for the whole fleet as a Retry-After would be; it does not feed the
  // breaker.
  Make(TripAfter(1));
  ReportInput in;
  in.endpoint = kEp;
  in.attempt = 1;
  in.outcome = Outcome::kRateLimited;
  in.ratelimit_reset = absl::Seconds(4);
  absl::StatusOr<Decision> d = engine().Report(in);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->reason, Reason::kRetryAfter);
  EXPECT_FALSE(d->retry_after_seen);  // the Retry-After counter's: none
  const EndpointSnapshot s = Inspect(kEp);
  EXPECT_EQ(s.retry_after_until, clock_.Now() + absl::Seconds(4));
  EXPECT_EQ(s.breaker_state, BreakerState::kClosed);
  // With another outcome it is not the limiter's word: ignored.
  in.outcome = Outcome::kRetryableFailure;
  in.ratelimit_reset = absl::Hours(1);
  ASSERT_TRUE(engine().Report(in).ok());
  EXPECT_EQ(Inspect(kEp).retry_after_until, clock_.Now() + absl::Seconds(4));
}

TEST_F(ReleasePaceTest, AnEndpointThatStopsServingIsTheBreakersAndLeavesNoCut) {
  SendAtThePace(absl::Seconds(1));
  // The endpoint goes down: its first refusal looks like overload (it was
  // serving a moment ago) and cuts the pace ...
  ASSERT_EQ(AdmitAtThePace(2).verdict, Verdict::kProceed);
  ASSERT_TRUE(Refused(2, std::nullopt, std::nullopt).pace_cut);
  ASSERT_GT(Inspect(kEp).pace_threshold, 0);
  // ... but no success follows. Two round trips later the failures are
  // the breaker's: 20 in a row trip it. No success came a round after the
  // cut, so it was the outage's: undone, no capacity is taken as measured.
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
  // At 10/s with 20ms of tolerance, the retry that went at the window's
  // end holds the next 100 ms: nothing now, one at the next slot, then
  // the queue again.
  const auto burst = [this] {
    int admitted = 0;
    for (int i = 0; i < 100; ++i) {
      // First attempts too: they queue with the backlog.
      if (Admit(kEp, 1).verdict == Verdict::kProceed) ++admitted;
    }
    return admitted;
  };
  EXPECT_EQ(burst(), 0);
  clock_.Advance(absl::Milliseconds(50));
  EXPECT_EQ(burst(), 1);
  EXPECT_EQ(Admit(kEp, 1).reason, Reason::kPaced);
  EXPECT_TRUE(Inspect(kEp).releasing);
  // Once every parked delivery is back (here: no more deferrals for a
  // while), nothing is paced any more.
  clock_.Advance(absl::Seconds(30));
  EXPECT_FALSE(Inspect(kEp).releasing);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(Admit(kEp, 1).reason, Reason::kInitialJitter);
  }
}

TEST_F(EngineTest, TheOperatorsCapBoundsTheLearnedPace) {
  EngineConfig c = NoBreaker();
  c.default_policy.deferral.release_rate_per_second = 20;
  Make(c);
  // The endpoint served 400/s before a Retry-After window closed its gate.
  for (int i = 0; i < 400; ++i) Report(kEp, 1, Outcome::kSuccess);
  Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(1));
  for (int i = 0; i < 1000; ++i) Admit(kEp, 2);
  clock_.Advance(absl::Seconds(3));
  Admit(kEp, 2);
  Report(kEp, 2, Outcome::kSuccess);  // it served 400/s: capped at 20
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
