// Engine: the decision order (docs/API.md, "The decision order"), fleet-wide
// per-endpoint state, bad input, bounded memory, inspection and configuration
// changes. Fake clock and fixed seeds; the concurrent tests use PerThreadRandom
// and assert validity only, never timing.
#include "core/engine/engine.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "core/engine/backoff.h"
#include "core/engine/decision.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://hooks.example.com/a";

// The endpoint keeps its previous delay in whole nanoseconds; a decision's
// delay may carry a fraction of one.
absl::Duration Ns(absl::Duration d) {
  return absl::Trunc(d, absl::Nanoseconds(1));
}

// A config whose breaker trips on `n` consecutive failures (the ratio rule
// out of the way) and whose budget floor is generous.
EngineConfig TripAfter(int n) {
  EngineConfig c;
  c.default_policy.breaker.consecutive_failures = n;
  c.default_policy.breaker.min_throughput = 1000000000;
  return c;
}

// No breaker: for tests about backoff, budget and Retry-After alone.
EngineConfig NoBreaker() {
  EngineConfig c;
  c.default_policy.breaker.enabled = false;
  return c;
}

// No breaker; backoff 1 s * 2^(n-1), capped at 30 s (the default cap).
EngineConfig ExponentialFromOneSecond() {
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.kind = BackoffKind::kExponential;
  c.default_policy.backoff.base = absl::Seconds(1);
  return c;
}

class EngineTest : public ::testing::Test {
 protected:
  void Make(EngineConfig c) {
    engine_ = std::make_unique<Engine>(std::move(c), &clock_, &random_);
  }
  Engine& engine() { return *engine_; }

  Decision Admit(absl::string_view ep, int attempt,
                 absl::Time deadline = absl::InfiniteFuture(),
                 absl::Time first = absl::InfinitePast()) {
    AdmitInput in;
    in.endpoint = ep;
    in.attempt = attempt;
    in.deadline = deadline;
    in.first_attempt_time = first;
    absl::StatusOr<Decision> d = engine_->Admit(in);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : Decision{};
  }
  Decision Report(absl::string_view ep, int attempt, Outcome outcome,
                  std::optional<absl::Duration> retry_after = std::nullopt,
                  absl::Time deadline = absl::InfiniteFuture(),
                  absl::Time first = absl::InfinitePast()) {
    ReportInput in;
    in.endpoint = ep;
    in.attempt = attempt;
    in.outcome = outcome;
    in.retry_after = retry_after;
    in.deadline = deadline;
    in.first_attempt_time = first;
    absl::StatusOr<Decision> d = engine_->Report(in);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : Decision{};
  }
  Decision Fail(absl::string_view ep, int attempt = 1) {
    return Report(ep, attempt, Outcome::kRetryableFailure);
  }
  EndpointSnapshot Inspect(absl::string_view ep) {
    absl::StatusOr<EndpointSnapshot> s = engine_->Inspect(ep);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : EndpointSnapshot{};
  }
  // Trips `ep`'s breaker (configured by TripAfter(n)); returns open_until.
  absl::Time Trip(absl::string_view ep, int n) {
    Decision d;
    for (int i = 0; i < n; ++i) d = Fail(ep);
    EXPECT_EQ(d.reason, Reason::kCircuitOpen);
    EXPECT_EQ(Inspect(ep).breaker_state, BreakerState::kOpen);
    return Inspect(ep).open_until;
  }
  // Σ by_breaker_state == tracked.
  void ExpectStatsConsistent() {
    const EngineStats s = engine_->Stats();
    int64_t sum = 0;
    for (int st = 1; st <= kNumBreakerStates; ++st) {
      EXPECT_GE(s.by_breaker_state[st], 0) << st;
      sum += s.by_breaker_state[st];
    }
    EXPECT_EQ(sum, s.tracked);
  }
  int64_t InState(BreakerState st) {
    return engine_->Stats().by_breaker_state[static_cast<int>(st)];
  }

  FakeClock clock_;
  SeededRandom random_{42};
  std::unique_ptr<Engine> engine_;
};

// ===========================================================================
// The decision order for a failure report.

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
  // nothing was served before) and nothing confirms the endpoint is back;
  // its first success sizes the pace to release the backlog in about 4s.
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
  // 5s later: the window is over. At 10/s with 100ms of tolerance, two
  // go at once; the others take slots on the queue 100ms apart.
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
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
  // The first released attempt succeeds: 1,000 to go within 4s, 250/s.
  clock_.Advance(absl::Milliseconds(250));
  Report(kEp, 2, Outcome::kSuccess);
  s = Inspect(kEp);
  EXPECT_EQ(s.pace_phase, CapacityEstimator::Phase::kReleasing);
  EXPECT_EQ(s.pace_source, CapacityEstimator::Source::kBacklog);
  EXPECT_DOUBLE_EQ(s.release_rate, 250);
}

// --- The learned release pace (capacity_estimator.h, release_pacer.h) ----

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
  EXPECT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
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

TEST_F(EngineTest, BudgetEmptyDefersAtOnceAndLeavesTheBackoffStateAlone) {
  // ratio 0.2, no floor: 5 first attempts allow exactly 1 retry.
  EngineConfig c = NoBreaker();
  c.default_policy.budget.min_retries_per_second = 0;
  Make(c);
  for (int i = 0; i < 5; ++i) Admit(kEp, 1);
  // retries=0 of 1 allowed: the failure of attempt 1 gets a delay (a first
  // attempt's failure spends nothing); the decorrelated state moves.
  const Decision first = Fail(kEp, 1);
  ASSERT_EQ(first.verdict, Verdict::kProceed);
  ASSERT_EQ(first.reason, Reason::kBackoff);
  EXPECT_EQ(Inspect(kEp).previous_delay, Ns(first.delay));
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 1.0);
  // The retry is admitted; admitting spends nothing: retries=0 of 1.
  ASSERT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 1.0);
  // The retry fails: it spends, retries=1 of 1. No room for another:
  // DEFER at once (no delay), and the decorrelated state did not move.
  const Decision d = Fail(kEp, 2);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 0.0);
  EXPECT_EQ(d.verdict, Verdict::kDefer);
  EXPECT_EQ(d.reason, Reason::kBudgetExhausted);
  EXPECT_EQ(d.delay, absl::ZeroDuration());
  EXPECT_EQ(Inspect(kEp).previous_delay, Ns(first.delay));
  // Come back no sooner than one slot (window 10s / 5) from now.
  EXPECT_GE(d.defer_until, clock_.Now() + absl::Seconds(2));
  // Admit of a retry agrees: retries=1 of 1, deferred.
  EXPECT_EQ(Admit(kEp, 3).reason, Reason::kBudgetExhausted);
  // First attempts are never held by the budget; 5 more allow 2 in all:
  // retries=1 of 2, so the deferred Admit above spent nothing.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Admit(kEp, 1).reason, Reason::kInitialJitter);
  }
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 1.0);
  EXPECT_EQ(Admit(kEp, 3).reason, Reason::kAdmitted);
}

TEST_F(EngineTest, BudgetCheckedBeforeTheDelayIsDrawn) {
  // Two identical engines with the same seed: one with an empty budget.
  // If the empty-budget report drew a delay, the next draw would differ.
  EngineConfig empty = NoBreaker();
  empty.default_policy.budget.ratio = 0;
  empty.default_policy.budget.min_retries_per_second = 0;
  SeededRandom r1(7), r2(7);
  FakeClock clock;
  Engine a(NoBreaker(), &clock, &r1);
  Engine b(empty, &clock, &r2);
  ReportInput in;
  in.endpoint = kEp;
  in.outcome = Outcome::kRetryableFailure;
  ASSERT_EQ(b.Report(in)->reason, Reason::kBudgetExhausted);
  // b drew only the deferral spread (one UniformDuration) ...
  UniformDuration(r1.Get(), absl::Seconds(1));
  // ... so a and b now draw the same delay for the same input.
  b.SetConfig(NoBreaker());
  const Decision da = *a.Report(in);
  const Decision db = *b.Report(in);
  EXPECT_EQ(da.reason, Reason::kBackoff);
  EXPECT_EQ(da.delay, db.delay);
}

TEST_F(EngineTest, AFailedRetrySpendsTheBudgetOnceASuccessfulOneNothing) {
  EngineConfig c = NoBreaker();
  c.default_policy.budget.ratio = 0.2;
  c.default_policy.budget.min_retries_per_second = 10;
  c.default_policy.budget.window = absl::Seconds(10);
  Make(c);
  // Floor 10/s x 10s: retries=0 of 100 allowed.
  Admit(kEp, 1);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 100.0);
  // A first attempt's failure spends nothing (twice: a duplicate report).
  Fail(kEp, 1);
  Fail(kEp, 1);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 100.0);
  // Admit alone never spends, however often it is asked: retries=0 of 100.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
  }
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 100.0);
  // The retry succeeds: it cost nothing, retries=0 of 100.
  EXPECT_EQ(Report(kEp, 2, Outcome::kSuccess).verdict, Verdict::kDone);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 100.0);
  // Another delivery's retry fails: it spends once, retries=1 of 100.
  ASSERT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted);
  EXPECT_EQ(Fail(kEp, 2).reason, Reason::kBackoff);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 99.0);
  // Every failure outcome of a retry spends: a timeout, retries=2 ...
  EXPECT_EQ(Report(kEp, 3, Outcome::kTimeout).verdict, Verdict::kProceed);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 98.0);
  // ... and a 429 with Retry-After 5s (the window opens), retries=3.
  Report(kEp, 4, Outcome::kRateLimited, absl::Seconds(5));
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 97.0);
  // A deferred Admit spends nothing: retries=3.
  EXPECT_EQ(Admit(kEp, 5).reason, Reason::kRetryAfterWindow);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 97.0);
  // After the window the retry is admitted (still nothing spent) and
  // fails: retries=4 of 100.
  clock_.Advance(absl::Seconds(5));
  EXPECT_EQ(Admit(kEp, 5).reason, Reason::kAdmitted);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 97.0);
  Fail(kEp, 5);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 96.0);
  // A retry answered with a 4xx gives up; the endpoint answered and no
  // retry follows, so, like a success, it spends nothing: retries=4.
  EXPECT_EQ(Report(kEp, 2, Outcome::kNotRetryable).reason,
            Reason::kNotRetryable);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 96.0);
}

TEST_F(EngineTest, FirstAttemptsFeedTheBudgetFleetWide) {
  EngineConfig c = NoBreaker();
  c.default_policy.budget.min_retries_per_second = 0;
  Make(c);
  // 1000 first attempts from many workers: retries=0 of 200 allowed.
  for (int i = 0; i < 1000; ++i) Admit(kEp, 1);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 200.0);
  // 300 workers each send a retry that fails; each failure spends one of
  // the shared 200. The 200th failure empties it and is itself deferred.
  int admitted = 0, budget_deferred = 0;
  for (int i = 0; i < 300; ++i) {
    const Decision a = Admit(kEp, 2);
    if (a.verdict != Verdict::kProceed) {
      ASSERT_EQ(a.reason, Reason::kBudgetExhausted) << i;
      ++budget_deferred;
      continue;
    }
    ++admitted;
    const Decision r = Fail(kEp, 2);
    ASSERT_EQ(r.reason,
              admitted < 200 ? Reason::kBackoff : Reason::kBudgetExhausted)
        << i;
  }
  // retries=200 of 200: the other 100 were deferred at Admit.
  EXPECT_EQ(admitted, 200);
  EXPECT_EQ(budget_deferred, 100);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 0.0);
}

TEST_F(EngineTest, ParkedBacklogAfterAnOutageIsNotThrottledByTheBudget) {
  // An outage parks a backlog behind the open breaker; while it is open no
  // new first attempts arrive, so when it recovers the first attempts that
  // funded the budget have slid out of the window and only the floor is
  // left. Retries that succeed spend nothing, so the whole backlog goes
  // through at the learned pace, far more than the floor: the budget holds
  // none of it back. (Spending at Admit let 100 per 10s window through.)
  EngineConfig c = TripAfter(20);
  c.default_policy.breaker.open_base = absl::Seconds(30);  // > the window
  c.default_policy.breaker.open_max = absl::Seconds(60);
  c.default_policy.breaker.half_open_probes = 5;
  c.default_policy.breaker.close_after_successes = 3;
  c.default_policy.budget.ratio = 0.2;
  c.default_policy.budget.min_retries_per_second = 10;
  c.default_policy.budget.window = absl::Seconds(10);
  Make(c);
  constexpr int kDeliveries = 1000;
  const absl::Time t0 = clock_.Now();
  // t=0: 1000 first attempts (retries=0 of 200 allowed) and the endpoint
  // is down. Their failures spend nothing; the 20th trips the breaker and
  // every delivery ends up parked.
  for (int i = 0; i < kDeliveries; ++i) {
    ASSERT_EQ(Admit(kEp, 1).reason, Reason::kInitialJitter);
  }
  for (int i = 0; i < kDeliveries; ++i) Fail(kEp, 1);
  EndpointSnapshot s = Inspect(kEp);
  ASSERT_EQ(s.breaker_state, BreakerState::kOpen);
  EXPECT_DOUBLE_EQ(s.budget_remaining, 200.0);
  // t=open_until (24s..36s): the first attempts slid out of the 10s
  // window: retries=0 of 100 (the floor).
  ASSERT_GE(s.open_until - t0, absl::Seconds(10));
  clock_.Set(s.open_until);
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 100.0);
  // The endpoint is back: 3 probes succeed and close the breaker.
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Admit(kEp, 2).reason, Reason::kHalfOpenProbe);
  }
  for (int i = 0; i < 3; ++i) Report(kEp, 2, Outcome::kSuccess);
  ASSERT_EQ(Inspect(kEp).breaker_state, BreakerState::kClosed);
  // The other 997 parked retries come back: each is admitted or given a
  // slot at the learned pace, none is held by the budget; within a few
  // seconds every one has been admitted and has succeeded, 997 > the floor
  // of 100, and the budget still has all of it.
  int admitted = 0;
  for (int round = 0; round < 100 && admitted < kDeliveries - 3; ++round) {
    for (int i = admitted; i < kDeliveries - 3; ++i) {
      const Decision d = Admit(kEp, 2);
      if (d.reason == Reason::kAdmitted) {
        ++admitted;
        ASSERT_EQ(Report(kEp, 2, Outcome::kSuccess).verdict, Verdict::kDone);
      } else {
        ASSERT_EQ(d.reason, Reason::kPaced);
      }
    }
    clock_.Advance(absl::Milliseconds(100));
  }
  EXPECT_EQ(admitted, kDeliveries - 3);
  EXPECT_LT(clock_.Now() - s.open_until, absl::Seconds(5));
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining, 100.0);
}

TEST_F(EngineTest, BudgetDeferralsCheckInAfterABudgetSlot) {
  // Budget floor 1/s (10 per 10s window). A retry the budget refuses
  // checks in again no sooner than one budget slot (10s / 5 = 2s) from
  // now, spread over one spread (1s); that is only an Admit, and the budget
  // admits then what it allows. A budget refusal starts no release: first
  // attempts are not paced.
  EngineConfig c = NoBreaker();
  c.default_policy.budget.ratio = 0.2;
  c.default_policy.budget.min_retries_per_second = 1;
  c.default_policy.budget.window = absl::Seconds(10);
  Make(c);
  const absl::Time now = clock_.Now();
  // 10 retries fail: retries=1..10 of 10. The 10th empties the budget.
  for (int i = 1; i <= 10; ++i) {
    ASSERT_EQ(Admit(kEp, 2).reason, Reason::kAdmitted) << i;
    const Decision d = Fail(kEp, 2);
    if (i < 10) {
      ASSERT_EQ(d.reason, Reason::kBackoff) << i;
    } else {
      ASSERT_EQ(d.reason, Reason::kBudgetExhausted);
      EXPECT_GE(d.defer_until, now + absl::Seconds(2));
      EXPECT_LT(d.defer_until, now + absl::Seconds(3));
    }
  }
  std::set<absl::Time> distinct;
  for (int k = 1; k <= 300; ++k) {
    const Decision d = Admit(kEp, 2);
    ASSERT_EQ(d.reason, Reason::kBudgetExhausted) << k;
    ASSERT_GE(d.defer_until, now + absl::Seconds(2));
    ASSERT_LT(d.defer_until, now + absl::Seconds(3));
    distinct.insert(d.defer_until);
  }
  EXPECT_GT(distinct.size(), 290u);
  for (int k = 0; k < 100; ++k) {
    ASSERT_EQ(Admit(kEp, 1).reason, Reason::kInitialJitter) << k;
  }
  EXPECT_FALSE(Inspect(kEp).has_release);
}

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
  for (int i = 0; i < 10; ++i) Fail(kEp, 1);
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
// Deadline and usefulness horizon.

TEST_F(EngineTest, RetryPastTheCallersDeadlineGivesUp) {
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.kind = BackoffKind::kExponential;
  c.default_policy.backoff.base = absl::Seconds(1);
  Make(c);
  const absl::Time now = clock_.Now();
  // Delay 1s, deadline in 500ms: give up.
  Decision d = Report(kEp, 1, Outcome::kRetryableFailure, std::nullopt,
                      now + absl::Milliseconds(500));
  EXPECT_EQ(d.verdict, Verdict::kGiveUp);
  EXPECT_EQ(d.reason, Reason::kDeadline);
  // Deadline exactly at the landing instant: still in time.
  d = Report(kEp, 1, Outcome::kRetryableFailure, std::nullopt,
             now + absl::Seconds(1));
  EXPECT_EQ(d.verdict, Verdict::kProceed);
  // Admit after the deadline: give up.
  EXPECT_EQ(Admit(kEp, 2, now - absl::Seconds(1)).reason, Reason::kDeadline);
}

TEST_F(EngineTest, RetryPastTheHorizonGivesUp) {
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.kind = BackoffKind::kExponential;
  c.default_policy.backoff.base = absl::Seconds(1);
  c.default_policy.backoff.horizon = absl::Seconds(10);
  Make(c);
  const absl::Time now = clock_.Now();
  const absl::Time inf = absl::InfiniteFuture();
  // First attempt 9.5s ago: the retry would land at 10.5s > 10s.
  Decision d = Report(kEp, 1, Outcome::kRetryableFailure, std::nullopt, inf,
                      now - absl::Milliseconds(9500));
  EXPECT_EQ(d.reason, Reason::kDeadline);
  // First attempt 5s ago: lands at 6s.
  d = Report(kEp, 1, Outcome::kRetryableFailure, std::nullopt, inf,
             now - absl::Seconds(5));
  EXPECT_EQ(d.verdict, Verdict::kProceed);
  // First attempt time unknown: the horizon cannot apply.
  d = Report(kEp, 1, Outcome::kRetryableFailure);
  EXPECT_EQ(d.verdict, Verdict::kProceed);
  // Admit 11s after the first attempt.
  EXPECT_EQ(Admit(kEp, 2, inf, now - absl::Seconds(11)).reason,
            Reason::kDeadline);
}

TEST_F(EngineTest, AWaitPastTheDeadlineBecomesALastChance) {
  // Open for 5s +-20% (at least 4s); the delivery's deadline is 2s away.
  EngineConfig c = TripAfter(1);
  c.default_policy.breaker.open_base = absl::Seconds(5);
  c.default_policy.breaker.open_max = absl::Seconds(60);
  Make(c);
  Trip(kEp, 1);
  const absl::Time deadline = clock_.Now() + absl::Seconds(2);
  // The breaker half-opens after the deadline: rather than give up, the
  // delivery comes back within the last second before its deadline ...
  const Decision d =
      Report(kEp, 1, Outcome::kRetryableFailure, std::nullopt, deadline);
  EXPECT_EQ(d.verdict, Verdict::kDefer);
  EXPECT_EQ(d.reason, Reason::kCircuitOpen);
  EXPECT_GE(d.defer_until, deadline - absl::Seconds(1));
  // (never in the last 250 ms: a worker that wakes late still has time)
  EXPECT_LT(d.defer_until, deadline - absl::Milliseconds(250));
  // ... and then goes, through the open breaker: its last chance.
  clock_.Set(d.defer_until);
  const Decision last = Admit(kEp, 2, deadline);
  EXPECT_EQ(last.verdict, Verdict::kProceed);
  EXPECT_EQ(last.reason, Reason::kLastChance);
  EXPECT_EQ(last.delay, absl::ZeroDuration());
  // It fails: that was the last chance; no attempt can wait its turn and
  // still start in time.
  const Decision after =
      Report(kEp, 2, Outcome::kRetryableFailure, std::nullopt, deadline);
  EXPECT_EQ(after.verdict, Verdict::kGiveUp);
  EXPECT_EQ(after.reason, Reason::kDeadline);
  // Past the deadline nothing can start: give up at once.
  clock_.Set(deadline + absl::Milliseconds(1));
  EXPECT_EQ(Admit(kEp, 2, deadline).reason, Reason::kDeadline);
  // With time to spare: deferred as usual.
  EXPECT_EQ(Admit(kEp, 2, deadline + absl::Minutes(1)).reason,
            Reason::kCircuitOpen);
}

TEST_F(EngineTest, LastChanceLandsBetweenOneSecondAndAQuarterBeforeTheDeadline) {
  // Every way to a last chance (a backoff delay or a parked wait that
  // would cross the deadline) lands in [deadline - 1s, deadline - 250ms):
  // a worker that wakes up to 250 ms late still starts its attempt.
  Make(NoBreaker());
  // How long before the deadline each attempt lands: the closest and the
  // farthest seen.
  absl::Duration closest = absl::InfiniteDuration();
  absl::Duration farthest = -absl::InfiniteDuration();
  for (int i = 0; i < 500; ++i) {
    const std::string ep = absl::StrCat("https://last-chance.example/", i);
    const absl::Time deadline = clock_.Now() + absl::Seconds(3);
    // A 1 h Retry-After: far past the deadline.
    const Decision d = Report(ep, 1, Outcome::kRateLimited, absl::Hours(1),
                              deadline);
    ASSERT_EQ(d.reason, Reason::kLastChance) << i;
    const absl::Duration before = deadline - (clock_.Now() + d.delay);
    closest = std::min(closest, before);
    farthest = std::max(farthest, before);
  }
  EXPECT_GT(closest, absl::Milliseconds(250));
  EXPECT_LT(closest, absl::Milliseconds(300)) << "the window is used whole";
  EXPECT_LE(farthest, absl::Seconds(1));
  EXPECT_GT(farthest, absl::Milliseconds(950)) << "the window is used whole";
}

TEST_F(EngineTest, ABackoffPastTheDeadlineIsRedrawnOverTheTimeLeft) {
  // The fleet's backoff is at its cap (30 s) and the delivery has 10 s
  // left: rather than wait out its whole deadline for one last attempt, the
  // retry is drawn over [base, deadline - 1 s), so that it keeps room for
  // more attempts if this one fails too.
  EngineConfig c = ExponentialFromOneSecond();
  Make(c);
  absl::Duration lo = absl::InfiniteDuration(), hi = absl::ZeroDuration();
  for (int i = 0; i < 500; ++i) {
    const absl::Time deadline = clock_.Now() + absl::Seconds(10);
    // Attempt 7 failed: 1 s * 2^6 = 64 s, capped at 30 s.
    const Decision d = Report(absl::StrCat("https://redraw.example/", i), 7,
                              Outcome::kRetryableFailure, std::nullopt,
                              deadline);
    ASSERT_EQ(d.verdict, Verdict::kProceed) << i;
    ASSERT_EQ(d.reason, Reason::kBackoff) << i;
    ASSERT_GE(d.delay, absl::Seconds(1)) << i;  // never under the base
    ASSERT_LT(d.delay, absl::Seconds(9)) << i;  // before the last second
    lo = std::min(lo, d.delay);
    hi = std::max(hi, d.delay);
  }
  EXPECT_LT(lo, absl::Milliseconds(1100)) << "spread over the time left";
  EXPECT_GT(hi, absl::Milliseconds(8900)) << "spread over the time left";
}

TEST_F(EngineTest, ABackoffLandingInTheLastSecondIsRedrawnToo) {
  // An 8 s backoff with 8.5 s left would start in time, but inside the
  // last second: if it failed, no time would be left for another attempt.
  // It is redrawn over [base, deadline - 1 s) like one past the deadline.
  EngineConfig c = ExponentialFromOneSecond();
  Make(c);
  // Attempt 4 failed: 1 s * 2^3.
  ASSERT_EQ(Report(kEp, 4, Outcome::kRetryableFailure).delay, absl::Seconds(8));
  for (int i = 0; i < 100; ++i) {
    const absl::Time deadline = clock_.Now() + absl::Milliseconds(8500);
    const Decision d =
        Report(absl::StrCat("https://last-second.example/", i), 4,
               Outcome::kRetryableFailure, std::nullopt, deadline);
    ASSERT_EQ(d.reason, Reason::kBackoff) << i;
    ASSERT_GE(d.delay, absl::Seconds(1)) << i;
    ASSERT_LT(d.delay, absl::Milliseconds(7500)) << i;
  }
  // With 9 s left it starts 1 s before the deadline: left as it is.
  EXPECT_EQ(Report(kEp, 4, Outcome::kRetryableFailure, std::nullopt,
                   clock_.Now() + absl::Seconds(9))
                .delay,
            absl::Seconds(8));
}

TEST_F(EngineTest, AFailingDeliveryNearItsDeadlineGetsSeveralAttemptsThenItsLastChance) {
  // Every retry's backoff would cross the deadline (20 s left, delays at
  // the 30 s cap). Each failure redraws within what is left, until less
  // than the base is left before the last second: then the last chance,
  // and after it fails, GIVE_UP(DEADLINE), with the deadline not yet
  // passed.
  EngineConfig c = ExponentialFromOneSecond();
  c.default_policy.backoff.max_attempts = 100;
  c.default_policy.budget.min_retries_per_second = 100;
  for (int run = 0; run < 50; ++run) {
    Make(c);
    const absl::Time deadline = clock_.Now() + absl::Seconds(20);
    std::vector<Reason> reasons;
    int attempt = 7;  // past the cap already
    for (;;) {
      const Decision d = Report(kEp, attempt, Outcome::kRetryableFailure,
                                std::nullopt, deadline);
      reasons.push_back(d.reason);
      if (d.verdict != Verdict::kProceed) break;
      ASSERT_LE(clock_.Now() + d.delay, deadline - absl::Milliseconds(250));
      clock_.Advance(d.delay);
      ++attempt;
    }
    ASSERT_GE(reasons.size(), 3u) << "at least one redrawn backoff";
    EXPECT_EQ(reasons.front(), Reason::kBackoff);
    EXPECT_EQ(reasons[reasons.size() - 2], Reason::kLastChance);
    EXPECT_EQ(reasons.back(), Reason::kDeadline);
    EXPECT_LT(clock_.Now(), deadline);
  }
}

TEST_F(EngineTest, DeadlineGiveUpLeavesTheBackoffStateAlone) {
  // A retry that will not happen is not a realised delay: giving up on the
  // deadline leaves the fleet's decorrelated state at the last real draw.
  Make(NoBreaker());
  const Decision first = Fail(kEp, 1);
  ASSERT_EQ(first.reason, Reason::kBackoff);
  const Decision d =
      Report(kEp, 1, Outcome::kRetryableFailure, std::nullopt,
             clock_.Now() + absl::Milliseconds(100));  // below base
  ASSERT_EQ(d.reason, Reason::kDeadline);
  EXPECT_EQ(Inspect(kEp).previous_delay, Ns(first.delay));
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

// ===========================================================================
// Bad input: InvalidArgument naming the field, no state created.

struct BadAdmitCase {
  std::string name;
  std::string endpoint;
  int attempt;
  std::string field;
};

class EngineBadAdmitTest : public EngineTest,
                           public ::testing::WithParamInterface<BadAdmitCase> {
};

TEST_P(EngineBadAdmitTest, InvalidArgumentNamingTheField) {
  const BadAdmitCase& c = GetParam();
  Make(EngineConfig{});
  AdmitInput in;
  in.endpoint = c.endpoint;
  in.attempt = c.attempt;
  const absl::StatusOr<Decision> d = engine().Admit(in);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(d.status().message(), c.field + ":"))
      << d.status();
  EXPECT_EQ(engine().ValidateAdmit(in).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().Stats().tracked, 0);
  EXPECT_TRUE(engine().List("", 100, std::nullopt).endpoints.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EngineBadAdmitTest,
    ::testing::Values(
        BadAdmitCase{"EmptyKey", "", 1, "endpoint"},
        BadAdmitCase{"KeyOverMax", std::string(513, 'k'), 1, "endpoint"},
        BadAdmitCase{"Newline", "a\nb", 1, "endpoint"},
        BadAdmitCase{"Nul", std::string("a\0b", 3), 1, "endpoint"},
        BadAdmitCase{"Del", "a\x7f", 1, "endpoint"},
        // Keys are proto3 strings: the same UTF-8 rule in-process.
        BadAdmitCase{"Utf8StrayContinuation", "a\x80" "b", 1, "endpoint"},
        BadAdmitCase{"Utf8Truncated", "ab\xc3", 1, "endpoint"},
        BadAdmitCase{"Utf8Overlong", "a\xc0\xaf" "b", 1, "endpoint"},
        BadAdmitCase{"Utf8Surrogate", "a\xed\xa0\x80", 1, "endpoint"},
        BadAdmitCase{"Utf8AboveMax", "a\xf4\x90\x80\x80", 1, "endpoint"},
        BadAdmitCase{"AttemptZero", "ok", 0, "attempt"},
        BadAdmitCase{"AttemptNegative", "ok", -1, "attempt"},
        BadAdmitCase{"AttemptHuge", "ok", 1000001, "attempt"}),
    [](const ::testing::TestParamInfo<BadAdmitCase>& i) {
      return i.param.name;
    });

struct BadReportCase {
  std::string name;
  std::string endpoint;
  int attempt;
  int outcome;
  std::optional<absl::Duration> retry_after;
  std::string field;
};

class EngineBadReportTest
    : public EngineTest,
      public ::testing::WithParamInterface<BadReportCase> {};

TEST_P(EngineBadReportTest, InvalidArgumentNamingTheField) {
  const BadReportCase& c = GetParam();
  Make(EngineConfig{});
  ReportInput in;
  in.endpoint = c.endpoint;
  in.attempt = c.attempt;
  in.outcome = static_cast<Outcome>(c.outcome);
  in.retry_after = c.retry_after;
  const absl::StatusOr<Decision> d = engine().Report(in);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(d.status().message(), c.field + ":"))
      << d.status();
  EXPECT_EQ(engine().ValidateReport(in).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine().Stats().tracked, 0);
  if (c.field != "endpoint") {
    EXPECT_EQ(engine().Inspect(c.endpoint).status().code(),
              absl::StatusCode::kNotFound);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, EngineBadReportTest,
    ::testing::Values(
        BadReportCase{"EmptyKey", "", 1, 2, std::nullopt, "endpoint"},
        BadReportCase{"KeyOverMax", std::string(513, 'k'), 1, 2, std::nullopt,
                      "endpoint"},
        BadReportCase{"Tab", "a\tb", 1, 2, std::nullopt, "endpoint"},
        BadReportCase{"AttemptZero", "ok", 0, 2, std::nullopt, "attempt"},
        BadReportCase{"AttemptNegative", "ok", -1, 2, std::nullopt, "attempt"},
        BadReportCase{"OutcomeZero", "ok", 1, 0, std::nullopt, "outcome"},
        BadReportCase{"OutcomeSix", "ok", 1, 6, std::nullopt, "outcome"},
        BadReportCase{"OutcomeMax", "ok", 1, 255, std::nullopt, "outcome"},
        BadReportCase{"RetryAfterNegative", "ok", 1, 4, -absl::Seconds(1),
                      "retry_after"},
        BadReportCase{"RetryAfterNegativeInf", "ok", 1, 4,
                      -absl::InfiniteDuration(), "retry_after"},
        BadReportCase{"RetryAfterOver24h", "ok", 1, 4,
                      absl::Hours(24) + absl::Nanoseconds(1), "retry_after"},
        BadReportCase{"RetryAfterInf", "ok", 1, 4, absl::InfiniteDuration(),
                      "retry_after"}),
    [](const ::testing::TestParamInfo<BadReportCase>& i) {
      return i.param.name;
    });

TEST_F(EngineTest, KeyAtTheLimitIsAccepted) {
  Make(EngineConfig{});
  const std::string key(512, 'k');
  EXPECT_EQ(Admit(key, 1).verdict, Verdict::kProceed);
  EXPECT_EQ(Inspect(key).endpoint, key);
  // Non-ASCII UTF-8 is fine: 2-, 3- and 4-byte sequences.
  EXPECT_EQ(Admit("https://bücher.example/ü", 1).verdict, Verdict::kProceed);
  EXPECT_EQ(Admit("https://例え.jp/\xf0\x9f\x98\x80", 1).verdict,
            Verdict::kProceed);
}

TEST_F(EngineTest, BadInputLeavesExistingStateUntouched) {
  Make(TripAfter(3));
  Fail(kEp);
  Fail(kEp);
  const EndpointSnapshot before = Inspect(kEp);
  ReportInput in;
  in.endpoint = kEp;
  in.outcome = Outcome::kRetryableFailure;
  in.retry_after = -absl::Seconds(1);
  ASSERT_FALSE(engine().Report(in).ok());
  in.retry_after.reset();
  in.attempt = 0;
  ASSERT_FALSE(engine().Report(in).ok());
  const EndpointSnapshot after = Inspect(kEp);
  EXPECT_EQ(after.consecutive_failures, before.consecutive_failures);
  EXPECT_EQ(after.previous_delay, before.previous_delay);
  EXPECT_EQ(after.breaker_state, BreakerState::kClosed);
  // One more real failure trips it: the bad reports did not count.
  Fail(kEp);
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kOpen);
}

TEST_F(EngineTest, InspectOfAnUnknownEndpointIsNotFound) {
  Make(EngineConfig{});
  EXPECT_EQ(engine().Inspect("never-seen").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine().Inspect("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ===========================================================================
// Bounded memory.

TEST_F(EngineTest, FullTableDecidesUntrackedAndDoesNotGrow) {
  EngineConfig c = TripAfter(1);
  c.limits.max_endpoints = 3;
  Make(c);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(Admit(absl::StrCat("ep", i), 1).untracked);
  }
  EXPECT_EQ(engine().Stats().tracked, 3);
  // A hostile client with random keys: every decision is valid, marked
  // untracked, and nothing is stored.
  for (int i = 0; i < 500; ++i) {
    const std::string key = absl::StrCat("random-", i);
    const Decision a = Admit(key, 1);
    ASSERT_TRUE(a.untracked);
    ASSERT_EQ(a.verdict, Verdict::kProceed);
    const Decision r = Fail(key, 1);
    ASSERT_TRUE(r.untracked);
    // Fresh state each time: the breaker trips (n=1) but nothing is kept.
    ASSERT_EQ(r.reason, Reason::kCircuitOpen);
    ASSERT_EQ(engine().Inspect(key).status().code(),
              absl::StatusCode::kNotFound);
  }
  EXPECT_EQ(engine().Stats().tracked, 3);
  EXPECT_EQ(engine().List("", 1000, std::nullopt).endpoints.size(), 3u);
  EXPECT_EQ(engine().List("", 1000, std::nullopt).total_tracked, 3);
  ExpectStatsConsistent();
  EXPECT_EQ(InState(BreakerState::kOpen), 0);
  // Known endpoints keep being tracked.
  EXPECT_FALSE(Fail("ep1", 1).untracked);
  EXPECT_EQ(Inspect("ep1").breaker_state, BreakerState::kOpen);
}

TEST_F(EngineTest, IdleEndpointsAreEvicted) {
  EngineConfig c;
  c.limits.idle_eviction = absl::Minutes(1);
  Make(c);
  Admit("a", 1);
  Admit("b", 1);
  Admit("c", 1);
  // t=30s: "c" is used again.
  clock_.Advance(absl::Seconds(30));
  Admit("c", 1);
  // t=60s: "a" and "b" idle exactly 1 minute: not yet.
  clock_.Advance(absl::Seconds(30));
  EXPECT_EQ(engine().EvictIdle(), 0);
  // t=61s: evicted; "c" (idle 31s) stays.
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(engine().EvictIdle(), 2);
  EXPECT_EQ(engine().Inspect("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine().Inspect("b").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(engine().Inspect("c").ok());
  EXPECT_EQ(engine().Stats().tracked, 1);
  EXPECT_EQ(engine().Stats().evicted_total, 2);
  ExpectStatsConsistent();
  // Inspection is not use: it does not keep "c" alive.
  clock_.Advance(absl::Seconds(30));
  Inspect("c");
  EXPECT_EQ(engine().EvictIdle(), 1);
  EXPECT_EQ(engine().Stats().evicted_total, 3);
  // An evicted endpoint starts afresh.
  EXPECT_EQ(Admit("a", 1).untracked, false);
  EXPECT_EQ(engine().Stats().tracked, 1);
}

TEST_F(EngineTest, EvictionFreesRoomInAFullTable) {
  EngineConfig c;
  c.limits.max_endpoints = 2;
  c.limits.idle_eviction = absl::Minutes(1);
  Make(c);
  Admit("a", 1);
  Admit("b", 1);
  EXPECT_TRUE(Admit("c", 1).untracked);
  clock_.Advance(absl::Minutes(2));
  EXPECT_EQ(engine().EvictIdle(), 2);
  EXPECT_FALSE(Admit("c", 1).untracked);
  EXPECT_TRUE(engine().Inspect("c").ok());
}

// ===========================================================================
// Stats by breaker state.

TEST_F(EngineTest, StatsByBreakerStateFollowTransitionsAndEviction) {
  EngineConfig c = TripAfter(1);
  c.default_policy.breaker.close_after_successes = 1;
  c.limits.idle_eviction = absl::Minutes(5);
  Make(c);
  Admit("a", 1);
  Admit("b", 1);
  // closed=2.
  EXPECT_EQ(InState(BreakerState::kClosed), 2);
  ExpectStatsConsistent();
  // "a" trips: closed=1 open=1.
  const absl::Time until = Trip("a", 1);
  EXPECT_EQ(InState(BreakerState::kClosed), 1);
  EXPECT_EQ(InState(BreakerState::kOpen), 1);
  ExpectStatsConsistent();
  // Past open_until, nobody reads "a": the stats still say open.
  clock_.Set(until);
  EXPECT_EQ(InState(BreakerState::kOpen), 1);
  // A read: half-open=1.
  EXPECT_EQ(Admit("a", 2).reason, Reason::kHalfOpenProbe);
  EXPECT_EQ(InState(BreakerState::kOpen), 0);
  EXPECT_EQ(InState(BreakerState::kHalfOpen), 1);
  ExpectStatsConsistent();
  // The probe succeeds: closed=2.
  Report("a", 2, Outcome::kSuccess);
  EXPECT_EQ(InState(BreakerState::kClosed), 2);
  EXPECT_EQ(InState(BreakerState::kHalfOpen), 0);
  ExpectStatsConsistent();
  // "b" trips, then both go idle and are evicted while "b" is open.
  Trip("b", 1);
  EXPECT_EQ(InState(BreakerState::kOpen), 1);
  clock_.Advance(absl::Minutes(6));
  EXPECT_EQ(engine().EvictIdle(), 2);
  EXPECT_EQ(InState(BreakerState::kOpen), 0);
  EXPECT_EQ(InState(BreakerState::kClosed), 0);
  EXPECT_EQ(engine().Stats().tracked, 0);
  ExpectStatsConsistent();
}

TEST_F(EngineTest, StatsFollowABreakerDisabledByConfig) {
  Make(TripAfter(1));
  Trip("a", 1);
  EXPECT_EQ(InState(BreakerState::kOpen), 1);
  EngineConfig c = TripAfter(1);
  c.default_policy.breaker.enabled = false;
  engine().SetConfig(c);
  // On the next read the breaker closes; the stats follow.
  const Decision d = Admit("a", 2);
  EXPECT_EQ(d.verdict, Verdict::kProceed);
  ASSERT_EQ(d.num_transitions, 1);
  EXPECT_EQ(d.transitions[0].to, BreakerState::kClosed);
  EXPECT_EQ(InState(BreakerState::kOpen), 0);
  EXPECT_EQ(InState(BreakerState::kClosed), 1);
  ExpectStatsConsistent();
}

// ===========================================================================
// Inspect and List.

TEST_F(EngineTest, InspectShowsTheEndpointsState) {
  Make(TripAfter(2));
  const absl::Time t0 = clock_.Now();
  Admit(kEp, 1);
  const Decision d = Fail(kEp, 1);
  clock_.Advance(absl::Seconds(1));
  Report(kEp, 2, Outcome::kRateLimited, absl::Seconds(7));
  EndpointSnapshot s = Inspect(kEp);
  EXPECT_EQ(s.endpoint, kEp);
  EXPECT_EQ(s.policy, "default");
  EXPECT_EQ(s.breaker_state, BreakerState::kClosed);
  EXPECT_EQ(s.consecutive_failures, 1);  // the paced 429 did not count
  // The 429's report moved the decorrelated state on from the 503's.
  EXPECT_GE(s.previous_delay, absl::Milliseconds(200));
  EXPECT_LE(s.previous_delay, d.delay * 3);
  EXPECT_EQ(s.retry_after_until, t0 + absl::Seconds(8));
  EXPECT_EQ(s.last_seen, t0 + absl::Seconds(1));
  // Floor 100; the 429 was a retry's (attempt 2) failure: it spent one.
  EXPECT_DOUBLE_EQ(s.budget_remaining, 99.0);
  // After the window the Retry-After is not shown.
  clock_.Advance(absl::Seconds(7));
  EXPECT_EQ(Inspect(kEp).retry_after_until, absl::InfinitePast());
  // Tripped.
  Fail(kEp, 1);
  Fail(kEp, 1);
  s = Inspect(kEp);
  EXPECT_EQ(s.breaker_state, BreakerState::kOpen);
  EXPECT_GT(s.open_until, clock_.Now());
  EXPECT_EQ(s.consecutive_trips, 1);
}

TEST_F(EngineTest, InspectDoesNotTouchState) {
  Make(TripAfter(1));
  const absl::Time until = Trip(kEp, 1);
  const absl::Time seen = Inspect(kEp).last_seen;
  clock_.Set(until + absl::Seconds(1));
  // A read past open_until shows half-open ...
  EXPECT_EQ(Inspect(kEp).breaker_state, BreakerState::kHalfOpen);
  EXPECT_EQ(Inspect(kEp).probes_in_flight, 0);
  // ... but stores nothing: no transition counted, last_seen unchanged.
  EXPECT_EQ(InState(BreakerState::kOpen), 1);
  EXPECT_EQ(Inspect(kEp).last_seen, seen);
  // Reading the budget twice gives the same answer.
  EXPECT_DOUBLE_EQ(Inspect(kEp).budget_remaining,
                   Inspect(kEp).budget_remaining);
}

TEST_F(EngineTest, ListPagesInKeyOrderWithoutRepeats) {
  Make(EngineConfig{});
  std::vector<std::string> keys;
  for (int i = 0; i < 57; ++i) {
    // Keys in every shard, created out of order.
    keys.push_back(absl::StrCat("https://h", (i * 37) % 57, ".example/"));
    Admit(keys.back(), 1);
  }
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> seen;
  std::string after;
  int pages = 0;
  do {
    const ListPage page = engine().List(after, 10, std::nullopt);
    EXPECT_EQ(page.total_tracked, 57);
    ASSERT_LE(page.endpoints.size(), 10u);
    for (const EndpointSnapshot& s : page.endpoints) {
      ASSERT_GT(s.endpoint, after);
      seen.push_back(s.endpoint);
    }
    after = page.next_after;
    if (!after.empty()) {
      EXPECT_EQ(after, page.endpoints.back().endpoint);
    }
    ASSERT_LT(++pages, 20);
  } while (!after.empty());
  EXPECT_EQ(pages, 6);  // 5 full pages and one of 7
  EXPECT_EQ(seen, keys);
}

TEST_F(EngineTest, ListExactMultipleOfThePageSize) {
  Make(EngineConfig{});
  for (int i = 0; i < 20; ++i) Admit(absl::StrCat("k", 10 + i), 1);
  ListPage p1 = engine().List("", 10, std::nullopt);
  ASSERT_EQ(p1.endpoints.size(), 10u);
  ASSERT_EQ(p1.next_after, "k19");
  ListPage p2 = engine().List(p1.next_after, 10, std::nullopt);
  ASSERT_EQ(p2.endpoints.size(), 10u);
  EXPECT_EQ(p2.endpoints.front().endpoint, "k20");
  EXPECT_EQ(p2.next_after, "");  // no empty third page
}

TEST_F(EngineTest, ListFiltersByBreakerState) {
  Make(TripAfter(1));
  for (int i = 0; i < 30; ++i) Admit(absl::StrCat("ep", 10 + i), 1);
  // Every third endpoint is tripped.
  std::vector<std::string> open;
  for (int i = 0; i < 30; i += 3) {
    open.push_back(absl::StrCat("ep", 10 + i));
    Trip(open.back(), 1);
  }
  std::vector<std::string> got;
  std::string after;
  do {
    const ListPage page = engine().List(after, 4, BreakerState::kOpen);
    for (const EndpointSnapshot& s : page.endpoints) {
      EXPECT_EQ(s.breaker_state, BreakerState::kOpen);
      got.push_back(s.endpoint);
    }
    after = page.next_after;
  } while (!after.empty());
  EXPECT_EQ(got, open);
  EXPECT_EQ(engine().List("", 100, BreakerState::kClosed).endpoints.size(),
            20u);
  EXPECT_TRUE(
      engine().List("", 100, BreakerState::kHalfOpen).endpoints.empty());
  // Past every open_until, the filter sees them as half-open (on read).
  clock_.Advance(absl::Minutes(1));
  EXPECT_EQ(engine().List("", 100, BreakerState::kHalfOpen).endpoints.size(),
            10u);
  EXPECT_TRUE(engine().List("", 100, BreakerState::kOpen).endpoints.empty());
}

// ===========================================================================
// Configuration changes.

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

// ===========================================================================
// Concurrency (also a smoke test for data races under sanitizers).

bool ValidDecision(const Decision& d) {
  const int r = static_cast<int>(d.reason);
  if (r < 1 || r > kMaxReason) return false;
  switch (d.verdict) {
    case Verdict::kProceed:
      return d.delay >= absl::ZeroDuration() && d.delay <= absl::Hours(25);
    case Verdict::kDefer:
      return d.defer_until != absl::InfinitePast() &&
             d.defer_until != absl::InfiniteFuture();
    case Verdict::kGiveUp:
    case Verdict::kDone:
      return true;
  }
  return false;
}

EngineConfig ConfigVariant(int i) {
  EngineConfig c;
  c.default_policy.breaker.consecutive_failures = 3 + i % 5;
  c.default_policy.breaker.open_base = absl::Milliseconds(10 + i % 50);
  c.default_policy.budget.window = absl::Seconds(1 + i % 3);
  c.default_policy.backoff.kind = static_cast<BackoffKind>(1 + i % 4);
  if (i % 2 == 0) {
    PolicyOverride o;
    o.match = i % 4 == 0 ? PolicyOverride::Match::kGlob
                         : PolicyOverride::Match::kPrefix;
    o.pattern = i % 4 == 0 ? "ep-1*" : "ep-2";
    o.policy.breaker.enabled = i % 8 != 0;
    o.policy.backoff.kind = BackoffKind::kFullJitter;
    c.overrides.push_back(o);
  }
  c.limits.max_endpoints = 40 + i % 20;  // the table fills up at times
  c.limits.idle_eviction = absl::Seconds(1);
  return c;
}

TEST(EngineConcurrencyTest, DecisionsStayValidWhileConfigChanges) {
  FakeClock clock;
  Engine engine(ConfigVariant(0), &clock, PerThreadRandom::Instance());
  constexpr int kWorkers = 4;
  constexpr int kDecisionsPerWorker = 20000;
  std::atomic<bool> stop{false};
  std::atomic<int> invalid{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kDecisionsPerWorker; ++i) {
        const std::string key = absl::StrCat("ep-", (i * 7 + w) % 60);
        const int attempt = 1 + i % 4;
        absl::StatusOr<Decision> d;
        if (i % 3 == 0) {
          AdmitInput in;
          in.endpoint = key;
          in.attempt = attempt;
          d = engine.Admit(in);
        } else {
          ReportInput in;
          in.endpoint = key;
          in.attempt = attempt;
          in.outcome = static_cast<Outcome>(1 + (i + w) % 5);
          if (i % 11 == 0) in.retry_after = absl::Milliseconds(i % 500);
          d = engine.Report(in);
        }
        if (!d.ok()) {
          errors.fetch_add(1);
        } else if (!ValidDecision(*d)) {
          invalid.fetch_add(1);
        }
        if (i % 1000 == 0) {
          engine.Stats();
          engine.List("", 5, std::nullopt);
          (void)engine.Inspect(key);
        }
      }
    });
  }
  std::thread reconfigure([&] {
    for (int i = 1; !stop.load(); ++i) {
      engine.SetConfig(ConfigVariant(i));
      clock.Advance(absl::Milliseconds(50));
      if (i % 10 == 0) engine.EvictIdle();
    }
  });
  for (std::thread& t : threads) t.join();
  stop.store(true);
  reconfigure.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(invalid.load(), 0);
  // The gauges still add up.
  const EngineStats s = engine.Stats();
  int64_t sum = 0;
  for (int st = 1; st <= kNumBreakerStates; ++st) {
    EXPECT_GE(s.by_breaker_state[st], 0);
    sum += s.by_breaker_state[st];
  }
  EXPECT_EQ(sum, s.tracked);
  EXPECT_EQ(static_cast<int64_t>(engine.List("", 1000, std::nullopt)
                                     .endpoints.size()),
            s.tracked);
}

TEST(EngineConcurrencyTest, ConcurrentSetConfigsLeaveOneConfiguration) {
  // Two reloads racing must not leave some shards on one configuration and
  // the rest on the other: afterwards every endpoint resolves its policy
  // from the same configuration.
  FakeClock clock;
  EngineConfig a;
  PolicyOverride oa;
  oa.match = PolicyOverride::Match::kGlob;
  oa.pattern = "*";
  a.overrides.push_back(oa);
  EngineConfig b = a;
  b.overrides[0].pattern = "**";
  Engine engine(a, &clock, PerThreadRandom::Instance());
  std::vector<std::string> keys;
  for (int i = 0; i < 512; ++i) {
    keys.push_back(absl::StrCat("k", i));
    AdmitInput in;
    in.endpoint = keys.back();
    ASSERT_TRUE(engine.Admit(in).ok());
  }
  // Two deciders keep the shard locks busy and the cores oversubscribed, so
  // that one reload is preempted mid-walk and the other overtakes it.
  std::atomic<bool> stop{false};
  std::vector<std::thread> deciders;
  for (int w = 0; w < 2; ++w) {
    deciders.emplace_back([&, w] {
      for (int i = w; !stop.load(std::memory_order_relaxed); ++i) {
        AdmitInput in;
        in.endpoint = keys[i % keys.size()];
        (void)engine.Admit(in);
      }
    });
  }
  int mixed_rounds = 0;
  for (int round = 0; round < 1000; ++round) {
    absl::Barrier* barrier = new absl::Barrier(2);
    auto reload = [&](const EngineConfig& c) {
      if (barrier->Block()) delete barrier;
      engine.SetConfig(c);
    };
    std::thread t1(reload, std::cref(a));
    std::thread t2(reload, std::cref(b));
    t1.join();
    t2.join();
    std::set<std::string> policies;
    for (const std::string& k : keys) policies.insert(engine.Inspect(k)->policy);
    if (policies.size() != 1) ++mixed_rounds;
  }
  stop.store(true);
  for (std::thread& t : deciders) t.join();
  EXPECT_EQ(mixed_rounds, 0);
}

}  // namespace
}  // namespace stagger::engine
