// Engine: the retry budget in the decision order, fleet-wide per endpoint:
// checked (never spent) at admission and before a delay is drawn, spent by
// a failed retry only, fed by every worker's first attempts, no throttle on
// a backlog after an outage, deferrals checking in after a budget slot.
// Fake clock, fixed seeds (engine_test_fixture.h).
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
  for (int step = 0; step < 1000 && admitted < kDeliveries - 3; ++step) {
    for (int i = admitted; i < kDeliveries - 3; ++i) {
      const Decision d = Admit(kEp, 2);
      if (d.reason == Reason::kAdmitted) {
        ++admitted;
        ASSERT_EQ(Report(kEp, 2, Outcome::kSuccess).verdict, Verdict::kDone);
      } else {
        ASSERT_EQ(d.reason, Reason::kPaced);
      }
    }
    clock_.Advance(absl::Milliseconds(10));
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

}  // namespace
}  // namespace stagger::engine
