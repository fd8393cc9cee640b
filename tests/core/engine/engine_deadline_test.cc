// Engine: the caller's deadline and the usefulness horizon: a retry past
// either gives up; a backoff that would cross the deadline (or start in its
// last second) is redrawn over the time left; a wait that still would
// becomes a last-chance attempt between 1 s and 250 ms before it. Fake
// clock, fixed seed (engine_test_fixture.h).
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "gtest/gtest.h"
#include "tests/core/engine/engine_test_fixture.h"

namespace stagger::engine {
namespace {

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

}  // namespace
}  // namespace stagger::engine
