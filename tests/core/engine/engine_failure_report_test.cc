// Engine: the decision order for a failure report (docs/API.md, "The decision
// order"): success, not retryable, the attempt limit, the breaker (open,
// parked deliveries checking in, half-open probes fleet-wide) and the
// transitions one report records. Fake clock, fixed seed
// (engine_test_fixture.h).
#include <algorithm>
#include <set>

#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "gtest/gtest.h"
#include "tests/core/engine/engine_test_fixture.h"

namespace stagger::engine {
namespace {

TEST_F(EngineTest, SuccessIsDone) {
  Make(EngineConfig{});
  const Decision d = Report(kEp, 1, Outcome::kSuccess);
  EXPECT_EQ(d.verdict, Verdict::kDone);
  EXPECT_EQ(d.reason, Reason::kSucceeded);
}

TEST_F(EngineTest, NotRetryableGivesUpBeforeAnythingElse) {
  // Even with the breaker open and the budget empty, a 4xx is a permanent
  // answer, not a deferral.
  EngineConfig c = TripAfter(2);
  c.default_policy.budget.ratio = 0;
  c.default_policy.budget.min_retries_per_second = 0;
  Make(c);
  const Decision first = Report(kEp, 1, Outcome::kNotRetryable);
  EXPECT_EQ(first.verdict, Verdict::kGiveUp);
  EXPECT_EQ(first.reason, Reason::kNotRetryable);
  Trip(kEp, 2);
  const Decision d = Report(kEp, 1, Outcome::kNotRetryable);
  EXPECT_EQ(d.verdict, Verdict::kGiveUp);
  EXPECT_EQ(d.reason, Reason::kNotRetryable);
}

TEST_F(EngineTest, AttemptLimitCountsTheFirstAttempt) {
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.max_attempts = 3;
  Make(c);
  // attempt 1 failed -> attempt 2 may go.
  Decision d = Fail(kEp, 1);
  EXPECT_EQ(d.verdict, Verdict::kProceed);
  EXPECT_EQ(d.attempt, 2);
  // attempt 2 failed -> attempt 3 (the last of 3) may go.
  d = Fail(kEp, 2);
  EXPECT_EQ(d.verdict, Verdict::kProceed);
  EXPECT_EQ(d.attempt, 3);
  // attempt 3 failed -> 3 attempts made: give up.
  d = Fail(kEp, 3);
  EXPECT_EQ(d.verdict, Verdict::kGiveUp);
  EXPECT_EQ(d.reason, Reason::kAttemptsExhausted);
  // Admit agrees: attempt 3 may be sent, attempt 4 may not.
  EXPECT_EQ(Admit(kEp, 3).verdict, Verdict::kProceed);
  d = Admit(kEp, 4);
  EXPECT_EQ(d.verdict, Verdict::kGiveUp);
  EXPECT_EQ(d.reason, Reason::kAttemptsExhausted);
}

TEST_F(EngineTest, MaxAttemptsOneMeansNoRetry) {
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.max_attempts = 1;
  Make(c);
  EXPECT_EQ(Fail(kEp, 1).reason, Reason::kAttemptsExhausted);
}

TEST_F(EngineTest, AttemptLimitBeforeBreaker) {
  // The last allowed attempt fails and that failure trips the breaker: the
  // answer is GIVE_UP (permanent), not a deferral of an attempt that will
  // never be allowed. The failure still counts for the breaker.
  EngineConfig c = TripAfter(2);
  c.default_policy.backoff.max_attempts = 2;
  Make(c);
  EXPECT_EQ(Fail(kEp, 1).verdict, Verdict::kProceed);
  const Decision d = Fail(kEp, 2);
  EXPECT_EQ(d.verdict, Verdict::kGiveUp);
  EXPECT_EQ(d.reason, Reason::kAttemptsExhausted);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kOpen);
}

TEST_F(EngineTest, BreakerOpenDefersUntilHalfOpen) {
  Make(TripAfter(3));
  // failures=1, 2: retries proceed.
  EXPECT_EQ(Fail(kEp).verdict, Verdict::kProceed);
  EXPECT_EQ(Fail(kEp).verdict, Verdict::kProceed);
  // failures=3: the report that trips the breaker is itself deferred.
  const Decision d = Fail(kEp);
  EXPECT_EQ(d.verdict, Verdict::kDefer);
  EXPECT_EQ(d.reason, Reason::kCircuitOpen);
  ASSERT_EQ(d.num_transitions, 1);
  EXPECT_EQ(d.transitions[0].from, BreakerState::kClosed);
  EXPECT_EQ(d.transitions[0].to, BreakerState::kOpen);
  const EndpointSnapshot s = Inspect(kEp);
  EXPECT_EQ(s.breaker_state, BreakerState::kOpen);
  // The parked delivery checks in again at or after the half-open instant
  // and at least half a spread from now, spread over one spread (1s).
  const absl::Time earliest =
      std::max(s.open_until, clock_.Now() + absl::Milliseconds(500));
  EXPECT_GE(d.defer_until, earliest);
  EXPECT_LT(d.defer_until, earliest + absl::Seconds(1));
  // Admit agrees, for first attempts and retries alike.
  EXPECT_EQ(Admit(kEp, 1).reason, Reason::kCircuitOpen);
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kCircuitOpen);
}

TEST_F(EngineTest, CircuitOpenDeferralsAreSpreadNotEqual) {
  Make(TripAfter(1));
  const absl::Time open_until = Trip(kEp, 1);
  // 200 parked deliveries ask while open.
  std::set<absl::Time> distinct;
  absl::Time lo = absl::InfiniteFuture(), hi = absl::InfinitePast();
  for (int i = 0; i < 200; ++i) {
    const Decision d = Admit(kEp, 2);
    ASSERT_EQ(d.reason, Reason::kCircuitOpen);
    ASSERT_GE(d.defer_until, open_until);
    distinct.insert(d.defer_until);
    lo = std::min(lo, d.defer_until);
    hi = std::max(hi, d.defer_until);
  }
  // Default spread 1s: they are not one instant but smeared over ~1s.
  EXPECT_GT(distinct.size(), 190u);
  EXPECT_GT(hi - lo, absl::Milliseconds(800));
}

TEST_F(EngineTest, ParkedDeliveriesCheckInLessOftenAsTheOutageLasts) {
  // One probe per half-open round, and it keeps failing: the endpoint stays
  // unavailable. A parked delivery checks in about every max(spread, 1/16
  // of the time it has been unavailable): every ~1s at first, every ~10s
  // after 160s, so a long outage costs the coordinator fewer calls.
  EngineConfig c = TripAfter(1);
  c.default_policy.breaker.half_open_probes = 1;
  c.default_policy.breaker.close_after_successes = 1;
  Make(c);
  const absl::Time t0 = clock_.Now();
  Fail(kEp);  // trips at t0
  for (int i = 0; i < 50; ++i) {
    const Decision d = Admit(kEp, 2);
    ASSERT_EQ(d.reason, Reason::kCircuitOpen);
    ASSERT_GE(d.defer_until, t0 + absl::Milliseconds(500));
    ASSERT_LT(d.defer_until, t0 + absl::Milliseconds(1500));
  }
  // 160s later it is half-open; one probe goes out and the rest wait.
  clock_.Advance(absl::Seconds(160));
  ASSERT_EQ(Admit(kEp, 2).reason, Reason::kHalfOpenProbe);
  for (int i = 0; i < 50; ++i) {
    const Decision d = Admit(kEp, 2);
    ASSERT_EQ(d.reason, Reason::kHalfOpenBusy);
    ASSERT_GE(d.defer_until, clock_.Now() + absl::Seconds(5));
    ASSERT_LT(d.defer_until, clock_.Now() + absl::Seconds(15));
  }
}

TEST_F(EngineTest, AParkedBacklogComesBackAtTheLearnedPace) {
  // Spread 0, Retry-After window of 5s: 1,000 retries parked behind it.
  // When the window is over the gate opens at the start pace (10/s,
  // nothing was served before) and nothing confirms the endpoint is back.
  EngineConfig c = NoBreaker();
  c.default_policy.deferral.spread = absl::ZeroDuration();
  Make(c);
  Report(kEp, 1, Outcome::kRateLimited, absl::Seconds(5));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(Admit(kEp, 2).reason, Reason::kRetryAfterWindow);
  }
  EndpointSnapshot s = Inspect(kEp);
  ASSERT_TRUE(s.has_release);
  EXPECT_EQ(s.pace_phase, CapacityEstimator::Phase::kClosed);
  // 5s later: the window is over. At 10/s with 20ms of tolerance, one goes
  // at once; the others take slots on the queue 100ms apart.
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
  s = Inspect(kEp);
  EXPECT_EQ(s.pace_phase, CapacityEstimator::Phase::kOpening);
  EXPECT_EQ(s.pace_source, CapacityEstimator::Source::kStart);
  EXPECT_DOUBLE_EQ(s.release_rate, 10);
  EXPECT_TRUE(s.releasing);
  // The backlog parked behind the window: about 1,000 (Little's law).
  EXPECT_NEAR(s.backlog, 1000, 1);
  const Decision paced = Admit(kEp, 2);
  EXPECT_EQ(paced.verdict, Verdict::kDefer);
  EXPECT_EQ(paced.reason, Reason::kPaced);
  EXPECT_GT(paced.defer_until, clock_.Now());
  EXPECT_LE(paced.defer_until, clock_.Now() + absl::Seconds(1));
  // The first released attempt succeeds: the release starts at that pace.
  // The backlog does not size it (it once jumped to 1,000 / 4 s = 250/s
  // here): the pace grows per round while the fleet is sent at it
  // (capacity_estimator.h).
  clock_.Advance(absl::Milliseconds(250));
  Report(kEp, 2, Outcome::kSuccess);
  s = Inspect(kEp);
  EXPECT_EQ(s.pace_phase, CapacityEstimator::Phase::kReleasing);
  EXPECT_EQ(s.pace_source, CapacityEstimator::Source::kStart);
  EXPECT_DOUBLE_EQ(s.release_rate, 10);
}

TEST_F(EngineTest, HalfOpenProbeQuotaIsFleetWide) {
  EngineConfig c = TripAfter(1);
  c.default_policy.breaker.half_open_probes = 5;
  c.default_policy.breaker.close_after_successes = 3;
  Make(c);
  const absl::Time open_until = Trip(kEp, 1);
  clock_.Set(open_until);
  // 100 workers come back at once: exactly 5 probes go out.
  int probes = 0, busy = 0;
  for (int w = 0; w < 100; ++w) {
    const Decision d = Admit(kEp, 2);
    if (d.reason == Reason::kHalfOpenProbe) {
      EXPECT_EQ(d.verdict, Verdict::kProceed);
      EXPECT_EQ(d.delay, absl::ZeroDuration());
      ++probes;
    } else {
      EXPECT_EQ(d.verdict, Verdict::kDefer);
      EXPECT_EQ(d.reason, Reason::kHalfOpenBusy);
      EXPECT_GT(d.defer_until, clock_.Now());
      ++busy;
    }
  }
  EXPECT_EQ(probes, 5);
  EXPECT_EQ(busy, 95);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kHalfOpen);
  EXPECT_EQ(Inspect(kEp).probes_in_flight, 5);
  // successes=1, 2: half-open.
  EXPECT_EQ(Report(kEp, 2, Outcome::kSuccess).num_transitions, 0);
  EXPECT_EQ(Report(kEp, 2, Outcome::kSuccess).num_transitions, 0);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kHalfOpen);
  // successes=3: closed.
  const Decision closed = Report(kEp, 2, Outcome::kSuccess);
  ASSERT_EQ(closed.num_transitions, 1);
  EXPECT_EQ(closed.transitions[0].from, BreakerState::kHalfOpen);
  EXPECT_EQ(closed.transitions[0].to, BreakerState::kClosed);
  // Closed again: the parked come back through the pace (10/s to start).
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
  EXPECT_EQ(Admit(kEp, 1).reason, Reason::kPaced);
  clock_.Advance(absl::Milliseconds(100));
  EXPECT_EQ(Admit(kEp, 1).reason, Reason::kInitialJitter);
}

TEST_F(EngineTest, HalfOpenProbeTimeoutFreesSlotsForNewProbes) {
  EngineConfig c = TripAfter(1);
  c.default_policy.breaker.half_open_probes = 2;
  c.default_policy.breaker.close_after_successes = 1;
  c.default_policy.breaker.probe_timeout = absl::Seconds(10);
  Make(c);
  clock_.Set(Trip(kEp, 1));
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kHalfOpenProbe);
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kHalfOpenProbe);
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kHalfOpenBusy);
  // The two probes never report. 9s: still busy; 10s: freed.
  clock_.Advance(absl::Seconds(9));
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kHalfOpenBusy);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kHalfOpenProbe);
}

TEST_F(EngineTest, HalfOpenProbeFailureReopensForLonger) {
  // 5s doubling up to 60s, set explicitly (the defaults are 1s and 4s).
  EngineConfig c = TripAfter(1);
  c.default_policy.breaker.open_base = absl::Seconds(5);
  c.default_policy.breaker.open_max = absl::Seconds(60);
  Make(c);
  const absl::Time first_until = Trip(kEp, 1);
  const absl::Duration first_open = first_until - clock_.Now();
  EXPECT_GE(first_open, absl::Seconds(4));
  EXPECT_LE(first_open, absl::Seconds(6));
  clock_.Set(first_until);
  ASSERT_EQ(Admit(kEp, 2).reason, Reason::kHalfOpenProbe);
  // The probe fails: OPEN -> HALF_OPEN (read) -> OPEN in one report.
  const Decision d = Fail(kEp, 2);
  EXPECT_EQ(d.verdict, Verdict::kDefer);
  EXPECT_EQ(d.reason, Reason::kCircuitOpen);
  const EndpointSnapshot s = Inspect(kEp);
  EXPECT_EQ(s.breaker_state, BreakerState::kOpen);
  EXPECT_EQ(s.consecutive_trips, 2);
  // 10s nominal +-20%.
  EXPECT_GE(s.open_until - clock_.Now(), absl::Seconds(8));
  EXPECT_LE(s.open_until - clock_.Now(), absl::Seconds(12));
}

TEST_F(EngineTest, AProbesFailureUsesUpNoAttemptOfTheDeliveryChosen) {
  // The fleet chose a delivery on its last attempt (8 by default) as the
  // half-open probe, and the endpoint is still down. The probe's failure
  // is the fleet's finding: the delivery is parked for the same attempt
  // again, never given up for it.
  Make(TripAfter(1));
  clock_.Set(Trip(kEp, 1));
  const Decision probe = Admit(kEp, 8);
  ASSERT_EQ(probe.reason, Reason::kHalfOpenProbe);
  ReportInput in;
  in.endpoint = kEp;
  in.attempt = 8;
  in.outcome = Outcome::kRetryableFailure;
  in.admission = probe.admission;
  absl::StatusOr<Decision> d = engine().Report(in);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kDefer);
  EXPECT_EQ(d->reason, Reason::kCircuitOpen);
  EXPECT_EQ(d->attempt, 8);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kOpen);
  // An ordinary attempt's failure still uses one: the last gives up.
  clock_.Set(Inspect(kEp).open_until);
  const Decision other = Fail(kEp, 8);  // not echoing the probe's token
  EXPECT_EQ(other.verdict, Verdict::kGiveUp);
  EXPECT_EQ(other.reason, Reason::kAttemptsExhausted);
}

TEST_F(EngineTest, AProbeReportedAfterAnotherProbeReopenedTheBreakerUsesNoAttempt) {
  // Two probes of one half-open period (5 by default), both deliveries on
  // their last attempt. The first one's failure opens the breaker again;
  // the second reports after that: it was the fleet's probe all the same
  // (its token names the period), so it too uses up no attempt. Once only
  // the first of a period's probes was spared, and the same deliveries,
  // chosen again and again, ran out of attempts.
  Make(TripAfter(1));
  clock_.Set(Trip(kEp, 1));
  const Decision first = Admit(kEp, 8);
  const Decision second = Admit(kEp, 8);
  ASSERT_EQ(first.reason, Reason::kHalfOpenProbe);
  ASSERT_EQ(second.reason, Reason::kHalfOpenProbe);
  auto fail = [&](const Decision& probe) {
    ReportInput in;
    in.endpoint = kEp;
    in.attempt = 8;
    in.outcome = Outcome::kRetryableFailure;
    in.admission = probe.admission;
    absl::StatusOr<Decision> d = engine().Report(in);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : Decision{};
  };
  ASSERT_EQ(fail(first).attempt, 8);
  ASSERT_EQ(Inspect(kEp).breaker_state, BreakerState::kOpen);
  const Decision d = fail(second);
  EXPECT_EQ(d.verdict, Verdict::kDefer);
  EXPECT_EQ(d.reason, Reason::kCircuitOpen);
  EXPECT_EQ(d.attempt, 8);
}

TEST_F(EngineTest, TransitionsOfOneReportAreAllRecorded) {
  // Open past its time, read by a failure report: HALF_OPEN then OPEN.
  Make(TripAfter(1));
  clock_.Set(Trip(kEp, 1));
  const Decision d = Fail(kEp, 2);
  ASSERT_EQ(d.num_transitions, 2);
  EXPECT_EQ(d.transitions[0].from, BreakerState::kOpen);
  EXPECT_EQ(d.transitions[0].to, BreakerState::kHalfOpen);
  EXPECT_EQ(d.transitions[1].from, BreakerState::kHalfOpen);
  EXPECT_EQ(d.transitions[1].to, BreakerState::kOpen);
}

}  // namespace
}  // namespace stagger::engine
