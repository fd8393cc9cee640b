// ReleasePacer (core/engine/release_pacer.h): when a parked delivery comes
// back (check-ins that thin out as an outage lasts, slots on the queue at
// the learned pace, bounded lead), the admission gate, how long a release
// lasts, and the backlog estimate. Fake time and fixed seeds only.
#include "core/engine/release_pacer.h"

#include <queue>
#include <set>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "core/engine/random.h"

namespace stagger::engine {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1767225600);
absl::Time At(double seconds) { return kT0 + absl::Seconds(seconds); }
absl::Duration S(double seconds) { return absl::Seconds(seconds); }

class ReleasePacerTest : public ::testing::Test {
 protected:
  absl::BitGenRef Rng() { return random_.Get(); }
  DeferralParams p_;  // spread 1s, no cap
  SeededRandom random_{11};
  ReleasePacer pacer_;
};

TEST_F(ReleasePacerTest, WithTheGateOpenACheckInIsSpreadOverOneSpread) {
  // A budget wait (the gate never closed): back no sooner than the target
  // or half a spread, spread over one spread; nothing is released or
  // counted.
  std::set<absl::Time> seen;
  for (int i = 0; i < 200; ++i) {
    const absl::Time back =
        ReleasePacer::OpenCheckIn(p_, At(0), At(2), Rng());
    EXPECT_GE(back, At(2));
    EXPECT_LT(back, At(3));
    seen.insert(back);
    const absl::Time soon = ReleasePacer::OpenCheckIn(p_, At(0), At(0), Rng());
    EXPECT_GE(soon, At(0.5));
    EXPECT_LT(soon, At(1.5));
  }
  EXPECT_GT(seen.size(), 190u);
}

TEST_F(ReleasePacerTest, CheckInsThinOutAsTheOutageLasts) {
  pacer_.OnGateClosed(At(0));
  ASSERT_TRUE(pacer_.gate_closed());
  // Just closed: every ~1s (the spread): [now + 0.5s, now + 1.5s).
  for (int i = 0; i < 100; ++i) {
    const absl::Time back = pacer_.CheckIn(p_, At(0.1), At(0.3), Rng());
    EXPECT_GE(back, At(0.6));
    EXPECT_LT(back, At(1.6));
  }
  // Closed for 160s: every ~10s (1/16 of that): [now + 5s, now + 15s).
  for (int i = 0; i < 100; ++i) {
    const absl::Time back = pacer_.CheckIn(p_, At(160), At(160.5), Rng());
    EXPECT_GE(back, At(165));
    EXPECT_LT(back, At(175));
  }
  // A later target (a Retry-After window ending at 200s) wins.
  const absl::Time back = pacer_.CheckIn(p_, At(160), At(200), Rng());
  EXPECT_GE(back, At(200));
  EXPECT_LT(back, At(210));
}

TEST_F(ReleasePacerTest, AReleaseLastsUntilEveryParkedDeliveryIsBack) {
  EXPECT_FALSE(pacer_.Releasing(At(0)));
  // A check-in with the gate open starts nothing.
  pacer_.CheckIn(p_, At(0), At(0), Rng());
  EXPECT_FALSE(pacer_.Releasing(At(0.1)));
  // The gate closes; a delivery parks until about 1s: the release lasts
  // until it is back, plus one spread.
  pacer_.OnGateClosed(At(0));
  const absl::Time back = pacer_.CheckIn(p_, At(0), At(0), Rng());
  EXPECT_TRUE(pacer_.Releasing(At(0.1)));
  EXPECT_TRUE(pacer_.Releasing(back + S(0.99)));
  EXPECT_FALSE(pacer_.Releasing(back + S(1)));
}

TEST_F(ReleasePacerTest, TheBacklogIsTheWaitHandedOutPerSecondOfClosedGate) {
  // 100 deliveries, each checking in again whenever it comes back, for the
  // 20 s the gate is closed: Little's law counts them.
  pacer_.OnGateClosed(At(0));
  using Due = std::pair<absl::Time, int>;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> due;
  for (int d = 0; d < 100; ++d) {
    due.push({pacer_.CheckIn(p_, At(0), At(0.25), Rng()), d});
  }
  while (due.top().first < At(20)) {
    const auto [t, d] = due.top();
    due.pop();
    due.push({pacer_.CheckIn(p_, t, t + S(0.25), Rng()), d});
  }
  pacer_.OnGateOpened(At(20));
  EXPECT_FALSE(pacer_.gate_closed());
  EXPECT_NEAR(pacer_.backlog(), 100, 10);
}

TEST_F(ReleasePacerTest, QueueSlotsAreOneOverThePaceApart) {
  // 100/s: slot k starts 10ms after slot k-1, jittered within the slot.
  for (int k = 0; k < 50; ++k) {
    const absl::Time back =
        pacer_.Queue(p_, At(0), At(0), /*pace=*/100, /*growing=*/false, Rng());
    EXPECT_GE(back, At(0.01 * k)) << k;
    EXPECT_LT(back, At(0.01 * (k + 1))) << k;
  }
  EXPECT_EQ(pacer_.tail(), At(0.5));
  EXPECT_TRUE(pacer_.Releasing(At(0.5)));
  // A target beyond the tail is kept, and the queue is left as it was.
  const absl::Time later =
      pacer_.Queue(p_, At(0), At(3), 100, false, Rng());
  EXPECT_GE(later, At(3));
  EXPECT_LT(later, At(3.01));
  EXPECT_EQ(pacer_.tail(), At(0.5));
}

TEST_F(ReleasePacerTest, BookingsReachOnlySoFarAhead) {
  // At 10/s: while the pace is still growing, nothing is booked to start
  // more than 1s ahead; the 12th delivery checks in again after the lead
  // (spread over one spread), not holding a slot.
  for (int k = 0; k < 10; ++k) {
    pacer_.Queue(p_, At(0), At(0), 10, /*growing=*/true, Rng());
  }
  ASSERT_EQ(pacer_.tail(), At(1));
  // The 11th slot starts exactly 1s ahead: still within the lead.
  absl::Time back = pacer_.Queue(p_, At(0), At(0), 10, true, Rng());
  EXPECT_GE(back, At(1));
  EXPECT_LT(back, At(1.1));
  EXPECT_EQ(pacer_.tail(), At(1.1));
  // Now past the 1s lead: a check-in at [1s, 2s), no slot taken.
  back = pacer_.Queue(p_, At(0), At(0), 10, true, Rng());
  EXPECT_GE(back, At(1));
  EXPECT_LT(back, At(2));
  EXPECT_EQ(pacer_.tail(), At(1.1));
  // Once the pace has settled, bookings reach 5s ahead.
  back = pacer_.Queue(p_, At(0), At(0), 10, /*growing=*/false, Rng());
  EXPECT_GE(back, At(1.1));
  EXPECT_LT(back, At(1.2));
  EXPECT_EQ(pacer_.tail(), At(1.2));
}

TEST_F(ReleasePacerTest, TheGateLetsThePaceThroughWithABurstOfTolerance) {
  // 100/s with 20ms of tolerance: three at once (below nginx's burst=20 at
  // 200r/s), then one every 10ms.
  EXPECT_TRUE(pacer_.TakeSlot(At(0), 100));
  EXPECT_TRUE(pacer_.TakeSlot(At(0), 100));
  EXPECT_TRUE(pacer_.TakeSlot(At(0), 100));
  EXPECT_FALSE(pacer_.TakeSlot(At(0), 100));
  EXPECT_FALSE(pacer_.HasRoom(At(0.005)));
  EXPECT_FALSE(pacer_.TakeSlot(At(0.005), 100));
  EXPECT_TRUE(pacer_.HasRoom(At(0.01)));  // looking takes nothing
  EXPECT_TRUE(pacer_.TakeSlot(At(0.01), 100));
  EXPECT_FALSE(pacer_.TakeSlot(At(0.01), 100));
  // A slower pace makes room later: at 10/s, 100ms on.
  EXPECT_TRUE(pacer_.TakeSlot(At(0.02), 10));
  EXPECT_FALSE(pacer_.TakeSlot(At(0.1), 10));
  EXPECT_TRUE(pacer_.TakeSlot(At(0.12), 10));
  // Idle for a long while: no credit beyond the tolerance.
  int passed = 0;
  for (int i = 0; i < 100; ++i) passed += pacer_.TakeSlot(At(100), 100);
  EXPECT_EQ(passed, 3);
}

TEST_F(ReleasePacerTest, ALimitersWordLetsNothingThroughBeforeItsInstant) {
  pacer_.OnGateClosed(At(0));
  pacer_.OnGateOpened(At(1));
  EXPECT_EQ(pacer_.opened(), At(1));
  // A 429 said Retry-After: 2 at t=1.5: no slot before 3.5, one then.
  pacer_.Pause(p_, At(3.5));
  EXPECT_FALSE(pacer_.TakeSlot(At(1.5), 100));
  EXPECT_FALSE(pacer_.TakeSlot(At(3.49), 100));
  EXPECT_EQ(pacer_.NextSlot(), At(3.5));
  EXPECT_TRUE(pacer_.TakeSlot(At(3.5), 100));
  EXPECT_FALSE(pacer_.TakeSlot(At(3.5), 100));
  // The release lasts past it.
  EXPECT_TRUE(pacer_.Releasing(At(3.6)));
}

TEST_F(ReleasePacerTest, TheFrontOfTheLineIsTheNextSlotNotTheQueuesTail) {
  pacer_.OnGateClosed(At(0));
  pacer_.OnGateOpened(At(1));
  // 100 bookings at 10/s: the queue's tail is 10 s away ...
  for (int i = 0; i < 100; ++i) {
    (void)pacer_.Queue(p_, At(1), At(1), 10, /*growing=*/false, Rng());
  }
  ASSERT_GE(pacer_.tail(), At(5));
  // ... but a delivery the pace's overshoot turned away comes back at the
  // next slot (within one slot of it), ahead of them.
  ASSERT_TRUE(pacer_.TakeSlot(At(1), 10));
  const absl::Time back = pacer_.Front(p_, At(1), 10, Rng());
  EXPECT_GE(back, pacer_.NextSlot());
  EXPECT_LT(back, pacer_.NextSlot() + absl::Milliseconds(100));
  EXPECT_LT(back, At(2));
}

}  // namespace
}  // namespace stagger::engine
