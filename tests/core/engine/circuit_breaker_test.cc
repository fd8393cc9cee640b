// Every CircuitBreaker transition, narrated. Time is a plain absl::Time the
// test moves; randomness is a fixed seed.
#include "core/engine/circuit_breaker.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "core/engine/decision.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"

namespace stagger::engine {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1767225600);

// Open durations the tests below measure, set explicitly so that they do
// not follow the defaults (1s / 4s): 5s doubling up to 60s.
BreakerParams WithOpenDurations(BreakerParams p) {
  p.open_base = absl::Seconds(5);
  p.open_max = absl::Seconds(60);
  return p;
}

// Trips on consecutive failures only (the ratio can never trigger).
BreakerParams ByCount(int n) {
  BreakerParams p;
  p.consecutive_failures = n;
  p.min_throughput = 1000000000;
  return p;
}

// Trips on the failure ratio only.
BreakerParams ByRatio(double ratio, int min_throughput) {
  BreakerParams p;
  p.consecutive_failures = 1000000;
  p.failure_ratio = ratio;
  p.min_throughput = min_throughput;
  return p;
}

bool IsTransition(const CircuitBreaker::MaybeTransition& t, BreakerState from,
                  BreakerState to) {
  return t.has_value() && t->from == from && t->to == to;
}

// Trips a closed breaker with `p.consecutive_failures` failures at `now`.
void TripNow(CircuitBreaker& b, const BreakerParams& p, absl::Time now,
             SeededRandom& random) {
  CircuitBreaker::MaybeTransition t;
  for (int i = 0; i < p.consecutive_failures && !t.has_value(); ++i) {
    t = b.OnFailure(p, now, random.Get());
  }
  ASSERT_TRUE(IsTransition(t, BreakerState::kClosed, BreakerState::kOpen));
}

// Moves an open breaker to half-open at its open_until.
void HalfOpen(CircuitBreaker& b, const BreakerParams& p) {
  ASSERT_EQ(b.state(), BreakerState::kOpen);
  ASSERT_TRUE(IsTransition(b.Refresh(p, b.open_until()), BreakerState::kOpen,
                           BreakerState::kHalfOpen));
}

// ---------------------------------------------------------------------------
// CLOSED -> OPEN

TEST(CircuitBreakerTest, StartsClosed) {
  CircuitBreaker b;
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_EQ(b.StateAt(kStart), BreakerState::kClosed);
  EXPECT_EQ(b.trips(), 0);
}

TEST(CircuitBreakerTest, TripsOnConsecutiveFailures) {
  const BreakerParams p = WithOpenDurations(ByCount(20));
  SeededRandom random(1);
  CircuitBreaker b;
  // failures=1..19: below the threshold of 20.
  for (int i = 1; i <= 19; ++i) {
    ASSERT_FALSE(b.OnFailure(p, kStart, random.Get()).has_value()) << i;
    ASSERT_EQ(b.consecutive_failures(), i);
  }
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  // failures=20: trips.
  EXPECT_TRUE(IsTransition(b.OnFailure(p, kStart, random.Get()),
                           BreakerState::kClosed, BreakerState::kOpen));
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_EQ(b.trips(), 1);
  // Open for open_base (5s) +-20%.
  EXPECT_GE(b.open_until(), kStart + absl::Seconds(4));
  EXPECT_LE(b.open_until(), kStart + absl::Seconds(6));
}

TEST(CircuitBreakerTest, AnAnswerResetsTheConsecutiveCount) {
  BreakerParams p = ByCount(5);
  SeededRandom random(1);
  CircuitBreaker b;
  // failures=4, then a success: failures=0.
  for (int i = 0; i < 4; ++i) b.OnFailure(p, kStart, random.Get());
  EXPECT_FALSE(b.OnAnswer(p, kStart).has_value());
  EXPECT_EQ(b.consecutive_failures(), 0);
  // failures=4 again: still closed.
  for (int i = 0; i < 4; ++i) {
    ASSERT_FALSE(b.OnFailure(p, kStart, random.Get()).has_value());
  }
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  // failures=5: open.
  EXPECT_TRUE(b.OnFailure(p, kStart, random.Get()).has_value());
  EXPECT_EQ(b.state(), BreakerState::kOpen);
}

TEST(CircuitBreakerTest, TripsOnFailureRatioAtMinThroughput) {
  // ratio 0.5 with at least 10 attempts in the window.
  const BreakerParams p = ByRatio(0.5, 10);
  SeededRandom random(2);
  CircuitBreaker b;
  // S F S F S F S F: attempts=8, failures=4, ratio 0.5 but below 10 attempts.
  for (int i = 0; i < 4; ++i) {
    ASSERT_FALSE(b.OnAnswer(p, kStart).has_value());
    ASSERT_FALSE(b.OnFailure(p, kStart, random.Get()).has_value());
  }
  // S: attempts=9, failures=4.
  ASSERT_FALSE(b.OnAnswer(p, kStart).has_value());
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  // F: attempts=10, failures=5: 5 >= 0.5 * 10 with throughput 10: open.
  EXPECT_TRUE(IsTransition(b.OnFailure(p, kStart, random.Get()),
                           BreakerState::kClosed, BreakerState::kOpen));
}

TEST(CircuitBreakerTest, RatioBelowThresholdDoesNotTrip) {
  const BreakerParams p = ByRatio(0.5, 10);
  SeededRandom random(2);
  CircuitBreaker b;
  // S S F, repeated: ratio 1/3 < 0.5 however many attempts.
  for (int i = 0; i < 100; ++i) {
    b.OnAnswer(p, kStart);
    b.OnAnswer(p, kStart);
    ASSERT_FALSE(b.OnFailure(p, kStart, random.Get()).has_value()) << i;
  }
  EXPECT_EQ(b.state(), BreakerState::kClosed);
}

TEST(CircuitBreakerTest, NoTripBelowMinThroughputEvenAtFullFailure) {
  const BreakerParams p = ByRatio(0.5, 10);
  SeededRandom random(3);
  CircuitBreaker b;
  // failures=9, attempts=9: ratio 1.0, but only 9 attempts.
  for (int i = 0; i < 9; ++i) {
    ASSERT_FALSE(b.OnFailure(p, kStart, random.Get()).has_value()) << i;
  }
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  // attempts=10: open.
  EXPECT_TRUE(b.OnFailure(p, kStart, random.Get()).has_value());
}

TEST(CircuitBreakerTest, RatioWindowSlides) {
  // Window 10s: 9 failures at t=0 have slid out by t=11s.
  const BreakerParams p = ByRatio(0.5, 10);
  SeededRandom random(4);
  CircuitBreaker b;
  for (int i = 0; i < 9; ++i) b.OnFailure(p, kStart, random.Get());
  // t=11s: attempts in window=1.
  EXPECT_FALSE(
      b.OnFailure(p, kStart + absl::Seconds(11), random.Get()).has_value());
  EXPECT_EQ(b.state(), BreakerState::kClosed);
}

// ---------------------------------------------------------------------------
// OPEN -> HALF_OPEN, on read, no timer.

TEST(CircuitBreakerTest, HalfOpensOnReadAtOpenUntil) {
  const BreakerParams p = ByCount(3);
  SeededRandom random(5);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  const absl::Time until = b.open_until();
  // Before open_until: open, and Refresh changes nothing.
  EXPECT_EQ(b.StateAt(until - absl::Nanoseconds(1)), BreakerState::kOpen);
  EXPECT_FALSE(b.Refresh(p, until - absl::Nanoseconds(1)).has_value());
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  // A day later with nobody reading: still stored as open (no timer), but a
  // read would see half-open.
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_EQ(b.StateAt(until + absl::Hours(24)), BreakerState::kHalfOpen);
  EXPECT_EQ(b.StateAt(until), BreakerState::kHalfOpen);
  // The read at open_until makes the transition.
  EXPECT_TRUE(IsTransition(b.Refresh(p, until), BreakerState::kOpen,
                           BreakerState::kHalfOpen));
  EXPECT_EQ(b.state(), BreakerState::kHalfOpen);
  // A second read: no second transition.
  EXPECT_FALSE(b.Refresh(p, until).has_value());
}

TEST(CircuitBreakerTest, ReportsWhileOpenChangeNothing) {
  const BreakerParams p = ByCount(3);
  SeededRandom random(6);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  const absl::Time until = b.open_until();
  // Attempts sent before the trip report late: failures and answers alike
  // leave the breaker open until the same instant.
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(b.OnFailure(p, kStart + absl::Seconds(1), random.Get()));
    EXPECT_FALSE(b.OnAnswer(p, kStart + absl::Seconds(1)));
  }
  EXPECT_EQ(b.state(), BreakerState::kOpen);
  EXPECT_EQ(b.open_until(), until);
  EXPECT_EQ(b.trips(), 1);
}

// ---------------------------------------------------------------------------
// HALF_OPEN: the probe quota.

TEST(CircuitBreakerTest, HalfOpenAdmitsOnlyTheProbeQuota) {
  BreakerParams p = ByCount(3);
  p.half_open_probes = 5;
  SeededRandom random(7);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  HalfOpen(b, p);
  const absl::Time t = b.open_until();
  // probes=0..4: a slot each.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(b.ProbeSlotFree(p, t)) << i;
    b.AcquireProbe();
    ASSERT_EQ(b.probes_in_flight(), i + 1);
  }
  // probes=5: full, for every further caller.
  for (int i = 0; i < 100; ++i) ASSERT_FALSE(b.ProbeSlotFree(p, t));
  EXPECT_EQ(b.probes_in_flight(), 5);
}

TEST(CircuitBreakerTest, ProbeTimeoutFreesSlots) {
  BreakerParams p = ByCount(3);
  p.half_open_probes = 2;
  p.close_after_successes = 2;
  p.probe_timeout = absl::Seconds(10);
  SeededRandom random(8);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  HalfOpen(b, p);
  const absl::Time t = b.open_until();
  // probes=2: full.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(b.ProbeSlotFree(p, t));
    b.AcquireProbe();
  }
  // t+9.999s: the probes may still report.
  EXPECT_FALSE(b.ProbeSlotFree(p, t + absl::Milliseconds(9999)));
  // t+10s: they never reported: their slots are free again.
  EXPECT_TRUE(b.ProbeSlotFree(p, t + absl::Seconds(10)));
  EXPECT_EQ(b.probes_in_flight(), 0);
  EXPECT_EQ(b.state(), BreakerState::kHalfOpen);
}

TEST(CircuitBreakerTest, AProbeIsNeverFreedBeforeItsTimeout) {
  // Half-open at t0. One slot taken at t0, the second at t0+9s. At t0+10s
  // the second probe has been out for 1s only: freeing it would let a third
  // probe in while two may still be running (over the quota).
  BreakerParams p = ByCount(3);
  p.half_open_probes = 2;
  p.close_after_successes = 2;
  p.probe_timeout = absl::Seconds(10);
  SeededRandom random(9);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  HalfOpen(b, p);
  const absl::Time t0 = b.open_until();
  ASSERT_TRUE(b.ProbeSlotFree(p, t0));
  b.AcquireProbe();
  ASSERT_TRUE(b.ProbeSlotFree(p, t0 + absl::Seconds(9)));
  b.AcquireProbe();
  // probes=2 at t0+10s: the t0+9s probe is 1s old.
  EXPECT_FALSE(b.ProbeSlotFree(p, t0 + absl::Seconds(10)));
  // t0+19s: both are older than the timeout: freed.
  EXPECT_TRUE(b.ProbeSlotFree(p, t0 + absl::Seconds(19)));
}

TEST(CircuitBreakerTest, ProbeSuccessesCloseTheBreaker) {
  BreakerParams p = WithOpenDurations(ByCount(3));
  p.half_open_probes = 5;
  p.close_after_successes = 3;
  SeededRandom random(10);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  HalfOpen(b, p);
  const absl::Time t = b.open_until();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(b.ProbeSlotFree(p, t));
    b.AcquireProbe();
  }
  // successes=1, 2: still half-open, one slot freed each but the quota
  // counts successes too (5 = 3 in flight + 2 succeeded).
  for (int i = 1; i <= 2; ++i) {
    ASSERT_FALSE(b.OnAnswer(p, t).has_value());
    ASSERT_EQ(b.probe_successes(), i);
    ASSERT_EQ(b.state(), BreakerState::kHalfOpen);
  }
  EXPECT_EQ(b.probes_in_flight(), 3);
  EXPECT_FALSE(b.ProbeSlotFree(p, t));
  // successes=3: closed, trip history forgotten.
  EXPECT_TRUE(IsTransition(b.OnAnswer(p, t), BreakerState::kHalfOpen,
                           BreakerState::kClosed));
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_EQ(b.trips(), 0);
  EXPECT_EQ(b.consecutive_failures(), 0);
  EXPECT_EQ(b.probes_in_flight(), 0);
  // The next trip opens for open_base again (5s +-20%), not a grown
  // duration (a second trip would be 10s +-20%, at least 8s).
  TripNow(b, p, t, random);
  EXPECT_EQ(b.trips(), 1);
  EXPECT_GE(b.open_until(), t + absl::Seconds(4));
  EXPECT_LE(b.open_until(), t + absl::Seconds(6));
}

TEST(CircuitBreakerTest, ProbeFailureReopensForLonger) {
  const BreakerParams p = WithOpenDurations(ByCount(3));
  SeededRandom random(11);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  // trips=1: 5s nominal. Then each probe failure doubles it, up to 60s:
  //   trips=2: 10s, 3: 20s, 4: 40s, 5..: 60s (cap).
  const double nominal[] = {5, 10, 20, 40, 60, 60, 60, 60};
  absl::Time opened = kStart;
  for (int trip = 1; trip <= 8; ++trip) {
    SCOPED_TRACE(trip);
    ASSERT_EQ(b.trips(), trip);
    const double open_s = absl::ToDoubleSeconds(b.open_until() - opened);
    EXPECT_GE(open_s, nominal[trip - 1] * 0.8);
    EXPECT_LE(open_s, nominal[trip - 1] * 1.2);
    // Half-open at open_until; one probe goes out and fails.
    HalfOpen(b, p);
    opened = b.open_until();
    ASSERT_TRUE(b.ProbeSlotFree(p, opened));
    b.AcquireProbe();
    ASSERT_TRUE(IsTransition(b.OnFailure(p, opened, random.Get()),
                             BreakerState::kHalfOpen, BreakerState::kOpen));
    EXPECT_EQ(b.probes_in_flight(), 0);
  }
}

TEST(CircuitBreakerTest, OpenDurationIsJitteredBothWays) {
  // 500 breakers with different seeds, tripped at the same instant: their
  // open durations must fill [4s, 6s] (+-20% of 5s), not coincide.
  const BreakerParams p = WithOpenDurations(ByCount(1));
  double lo = 1e9, hi = 0, sum = 0;
  for (int seed = 0; seed < 500; ++seed) {
    SeededRandom random(seed);
    CircuitBreaker b;
    TripNow(b, p, kStart, random);
    const double s = absl::ToDoubleSeconds(b.open_until() - kStart);
    ASSERT_GE(s, 4.0);
    ASSERT_LE(s, 6.0);
    lo = std::min(lo, s);
    hi = std::max(hi, s);
    sum += s;
  }
  EXPECT_LT(lo, 4.1);
  EXPECT_GT(hi, 5.9);
  EXPECT_NEAR(sum / 500, 5.0, 0.1);
}

TEST(CircuitBreakerTest, DefaultOpenDurationsAreShort) {
  // The defaults (open_base 250ms, open_max 1s): a probe round is cheap,
  // so a dead endpoint is probed about every second and a recovery is
  // noticed within about a second. trips=1: 0.25s, 2: 0.5s, 3..: 1s (cap),
  // each +-20%.
  const BreakerParams p = ByCount(1);
  ASSERT_EQ(p.open_base, absl::Milliseconds(250));
  ASSERT_EQ(p.open_max, absl::Seconds(1));
  SeededRandom random(18);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  const double nominal[] = {0.25, 0.5, 1, 1, 1, 1};
  absl::Time opened = kStart;
  for (int trip = 1; trip <= 6; ++trip) {
    SCOPED_TRACE(trip);
    ASSERT_EQ(b.trips(), trip);
    const double open_s = absl::ToDoubleSeconds(b.open_until() - opened);
    EXPECT_GE(open_s, nominal[trip - 1] * 0.8);
    EXPECT_LE(open_s, nominal[trip - 1] * 1.2);
    // Half-open at open_until; the probe fails: open again, for longer.
    HalfOpen(b, p);
    opened = b.open_until();
    ASSERT_TRUE(b.ProbeSlotFree(p, opened));
    b.AcquireProbe();
    ASSERT_TRUE(IsTransition(b.OnFailure(p, opened, random.Get()),
                             BreakerState::kHalfOpen, BreakerState::kOpen));
  }
}

TEST(CircuitBreakerTest, ManyTripsDoNotOverflowTheGrowth) {
  BreakerParams p = ByCount(1);
  p.open_base = absl::Milliseconds(10);
  p.open_max = absl::Hours(24);
  SeededRandom random(12);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  for (int i = 0; i < 300; ++i) {
    HalfOpen(b, p);
    const absl::Time t = b.open_until();
    b.OnFailure(p, t, random.Get());
    const absl::Duration open = b.open_until() - t;
    ASSERT_GT(open, absl::ZeroDuration()) << i;
    ASSERT_LE(open, absl::Hours(24) * 1.2) << i;
  }
  EXPECT_GE(b.open_until() - kStart, absl::Hours(24));
}

TEST(CircuitBreakerTest, HalfOpenAnswerFromANonProbeCountsAsSuccess) {
  // An answer (e.g. a 4xx) while half-open shows the endpoint is up.
  BreakerParams p = ByCount(3);
  p.close_after_successes = 1;
  SeededRandom random(13);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  HalfOpen(b, p);
  EXPECT_TRUE(IsTransition(b.OnAnswer(p, b.open_until()),
                           BreakerState::kHalfOpen, BreakerState::kClosed));
}

// ---------------------------------------------------------------------------
// Disabled.

TEST(CircuitBreakerTest, DisabledNeverTrips) {
  BreakerParams p = ByCount(1);
  p.enabled = false;
  SeededRandom random(14);
  CircuitBreaker b;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_FALSE(b.OnFailure(p, kStart, random.Get()).has_value());
  }
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_FALSE(b.Refresh(p, kStart).has_value());
}

TEST(CircuitBreakerTest, DisablingAnOpenBreakerClosesItOnRead) {
  BreakerParams p = ByCount(2);
  SeededRandom random(15);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  p.enabled = false;
  EXPECT_TRUE(IsTransition(b.Refresh(p, kStart), BreakerState::kOpen,
                           BreakerState::kClosed));
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_EQ(b.trips(), 0);
}

// ---------------------------------------------------------------------------
// The ratio window after a change of its width (a configuration reload):
// it must keep sliding.

TEST(CircuitBreakerTest, RatioWindowStillSlidesAfterItsWidthGrows) {
  // 10s window (2s slots) -> 60s window (12s slots): the slot index becomes
  // six times smaller. Old failures must still slide out.
  const BreakerParams narrow = ByRatio(0.5, 10);
  BreakerParams wide = narrow;
  wide.window = absl::Minutes(1);
  SeededRandom random(16);
  CircuitBreaker b;
  // t=0, 10s window: failures=9, attempts=9, below min throughput.
  for (int i = 0; i < 9; ++i) {
    ASSERT_FALSE(b.OnFailure(narrow, kStart, random.Get()).has_value());
  }
  // t=5min, now a 60s window: the 9 are 5 minutes old. attempts=1.
  EXPECT_FALSE(
      b.OnFailure(wide, kStart + absl::Minutes(5), random.Get()).has_value());
  EXPECT_EQ(b.state(), BreakerState::kClosed);
}

TEST(CircuitBreakerTest, RatioWindowSurvivesAClockSteppingBackFar) {
  // The clock steps back an hour: the window starts afresh there and keeps
  // sliding, instead of counting into the future slot until time catches up.
  const BreakerParams p = ByRatio(0.5, 10);
  SeededRandom random(17);
  CircuitBreaker b;
  const absl::Time later = kStart + absl::Hours(1);
  for (int i = 0; i < 9; ++i) b.OnFailure(p, later, random.Get());
  // Back at kStart: 5 failures spaced 20s apart, each alone in the window.
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE(
        b.OnFailure(p, kStart + absl::Seconds(20 * i), random.Get()).has_value())
        << i;
  }
  EXPECT_EQ(b.state(), BreakerState::kClosed);
}

// ---------------------------------------------------------------------------
// Operator overrides (stagger.v1.Admin/ForceBreaker)

TEST(CircuitBreakerTest, ForceOpenHoldsUntilTheGivenTimeThenHalfOpens) {
  const BreakerParams p = WithOpenDurations(ByCount(3));
  CircuitBreaker b;
  ASSERT_FALSE(b.OnFailure(p, kStart, SeededRandom(1).Get()).has_value());
  EXPECT_TRUE(IsTransition(b.ForceOpen(kStart + absl::Minutes(10)),
                           BreakerState::kClosed, BreakerState::kOpen));
  EXPECT_EQ(b.open_until(), kStart + absl::Minutes(10));
  EXPECT_EQ(b.consecutive_failures(), 0);
  // Still open a second before; half-open at the time, as a trip would.
  EXPECT_FALSE(b.Refresh(p, kStart + absl::Minutes(10) - absl::Seconds(1))
                   .has_value());
  HalfOpen(b, p);
  // Forcing it open again re-opens it from half-open; again while open
  // only moves the time (no transition).
  EXPECT_TRUE(IsTransition(b.ForceOpen(kStart + absl::Hours(1)),
                           BreakerState::kHalfOpen, BreakerState::kOpen));
  EXPECT_FALSE(b.ForceOpen(kStart + absl::Hours(2)).has_value());
  EXPECT_EQ(b.open_until(), kStart + absl::Hours(2));
}

TEST(CircuitBreakerTest, ForceClosedForgetsEverything) {
  const BreakerParams p = WithOpenDurations(ByCount(2));
  SeededRandom random(1);
  CircuitBreaker b;
  TripNow(b, p, kStart, random);
  ASSERT_EQ(b.trips(), 1);
  EXPECT_TRUE(IsTransition(b.ForceClosed(), BreakerState::kOpen,
                           BreakerState::kClosed));
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_EQ(b.trips(), 0);
  EXPECT_EQ(b.consecutive_failures(), 0);
  EXPECT_FALSE(b.ForceClosed().has_value());  // already closed
  // It trips again only on a fresh run of failures.
  EXPECT_FALSE(b.OnFailure(p, kStart, random.Get()).has_value());
}

TEST(CircuitBreakerTest, ForceOpenNeedsNoParams) {
  // Enabled or not is the policy's (BreakerParams), not the breaker's: an
  // operator's force applies either way.
  CircuitBreaker b;
  EXPECT_TRUE(b.ForceOpen(kStart + absl::Minutes(1)).has_value());
  EXPECT_EQ(b.StateAt(kStart), BreakerState::kOpen);
}

}  // namespace
}  // namespace stagger::engine
