// RetryBudget arithmetic, narrated like gRPC's retry_throttle_test, and the
// SlidingWindow it counts in. Time is a plain absl::Time the test moves.
#include "core/engine/retry_budget.h"

#include <cstdint>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "core/engine/engine_config.h"
#include "core/engine/sliding_window.h"

namespace stagger::engine {
namespace {

// 2026-01-01T00:00:00Z, aligned to every slot width used below.
const absl::Time kStart = absl::FromUnixSeconds(1767225600);

BudgetParams Defaults() { return BudgetParams{}; }  // 0.2, 10/s, 10s

BudgetParams NoFloor(double ratio = 0.2) {
  BudgetParams p;
  p.ratio = ratio;
  p.min_retries_per_second = 0;
  return p;
}

// Spends retries while the budget allows (in the engine, each is a retry
// whose failure was reported); returns how many were spent.
int RetryUntilEmpty(RetryBudget& b, const BudgetParams& p, absl::Time now,
                    int limit = 1000000) {
  int spent = 0;
  while (spent < limit && b.CanRetry(p, now)) {
    b.RecordRetry(p, now);
    ++spent;
  }
  return spent;
}

TEST(RetryBudgetTest, DefaultsGiveAFloorOfOneHundredRetriesPerWindow) {
  const BudgetParams p = Defaults();
  RetryBudget b;
  // No first attempts at all: allowed = max(0.2 * 0, 10/s * 10s) = 100.
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart), 100.0);
  EXPECT_EQ(RetryUntilEmpty(b, p, kStart), 100);
  // retries=100, allowed=100: empty.
  EXPECT_FALSE(b.CanRetry(p, kStart));
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart), 0.0);
}

TEST(RetryBudgetTest, ThousandFirstAttemptsAllowTwoHundredRetries) {
  const BudgetParams p = Defaults();
  RetryBudget b;
  for (int i = 0; i < 1000; ++i) b.RecordFirstAttempt(p, kStart);
  // allowed = max(0.2 * 1000, 100) = 200: the ratio is above the floor.
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart), 200.0);
  EXPECT_EQ(RetryUntilEmpty(b, p, kStart), 200);
  EXPECT_FALSE(b.CanRetry(p, kStart));
}

TEST(RetryBudgetTest, BelowTheFloorTheFloorBinds) {
  const BudgetParams p = Defaults();
  RetryBudget b;
  for (int i = 0; i < 300; ++i) b.RecordFirstAttempt(p, kStart);
  // 0.2 * 300 = 60 < 100: the floor binds.
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart), 100.0);
  EXPECT_EQ(RetryUntilEmpty(b, p, kStart), 100);
}

TEST(RetryBudgetTest, FixedPointIsExact) {
  // ratio 0.2, no floor: 5 first attempts -> exactly 1 retry. In binary
  // floating point 5 * 0.2 can land just below 1 and allow none.
  const BudgetParams p = NoFloor(0.2);
  RetryBudget b;
  for (int i = 0; i < 4; ++i) b.RecordFirstAttempt(p, kStart);
  // 4 first attempts: 0.8 retries, none allowed.
  EXPECT_FALSE(b.CanRetry(p, kStart));
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart), 0.8);
  b.RecordFirstAttempt(p, kStart);
  // 5 first attempts: exactly 1.0.
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart), 1.0);
  EXPECT_EQ(RetryUntilEmpty(b, p, kStart), 1);
}

struct RatioCase {
  double ratio;
  int first_attempts;
  int want_retries;
};

class RetryBudgetRatioTest : public ::testing::TestWithParam<RatioCase> {};

TEST_P(RetryBudgetRatioTest, AllowedRetriesAreFloorOfRatioTimesAttempts) {
  const RatioCase c = GetParam();
  const BudgetParams p = NoFloor(c.ratio);
  RetryBudget b;
  for (int i = 0; i < c.first_attempts; ++i) b.RecordFirstAttempt(p, kStart);
  EXPECT_EQ(RetryUntilEmpty(b, p, kStart), c.want_retries);
}

INSTANTIATE_TEST_SUITE_P(
    Sweep, RetryBudgetRatioTest,
    ::testing::Values(RatioCase{0.2, 0, 0}, RatioCase{0.2, 5, 1},
                      RatioCase{0.2, 9, 1}, RatioCase{0.2, 10, 2},
                      RatioCase{0.1, 10, 1}, RatioCase{0.1, 30, 3},
                      RatioCase{0.3, 10, 3}, RatioCase{0.7, 10, 7},
                      RatioCase{1.0, 17, 17}, RatioCase{2.5, 2, 5},
                      RatioCase{10.0, 3, 30}, RatioCase{0.0, 1000, 0}));

TEST(RetryBudgetTest, WindowSlidesOutOldCounts) {
  // 10s window in 5 slots of 2s. No floor, ratio 1: allowed = first attempts.
  const BudgetParams p = NoFloor(1.0);
  RetryBudget b;
  // t=0: 10 first attempts, 10 retries: empty.
  for (int i = 0; i < 10; ++i) b.RecordFirstAttempt(p, kStart);
  EXPECT_EQ(RetryUntilEmpty(b, p, kStart), 10);
  // t=5s: 4 more first attempts; window holds 14 attempts, 10 retries.
  const absl::Time t5 = kStart + absl::Seconds(5);
  for (int i = 0; i < 4; ++i) b.RecordFirstAttempt(p, t5);
  EXPECT_DOUBLE_EQ(b.Remaining(p, t5), 4.0);
  // t=9.9s: the t=0 slot is still inside the window.
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart + absl::Milliseconds(9900)), 4.0);
  // t=10s: the t=0 slot (10 attempts, 10 retries) slid out: 4 attempts, 0
  // retries.
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart + absl::Seconds(10)), 4.0);
  const absl::Time t10 = kStart + absl::Seconds(10);
  EXPECT_EQ(RetryUntilEmpty(b, p, t10), 4);
  // t=16s: the t=5s slot slid out too: no first attempts in the window, the
  // 4 retries of t=10s still in it: nothing left.
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart + absl::Seconds(16)), 0.0);
  // t=20s: the retries of t=10s slid out as well.
  const absl::Time t20 = kStart + absl::Seconds(20);
  for (int i = 0; i < 3; ++i) b.RecordFirstAttempt(p, t20);
  EXPECT_DOUBLE_EQ(b.Remaining(p, t20), 3.0);
}

TEST(RetryBudgetTest, RetriesUsedSlideOutAndFreeTheFloor) {
  const BudgetParams p = Defaults();
  RetryBudget b;
  // t=0: 100 retries spend the floor.
  EXPECT_EQ(RetryUntilEmpty(b, p, kStart), 100);
  // t=8s: still inside the window: empty.
  EXPECT_FALSE(b.CanRetry(p, kStart + absl::Seconds(8)));
  // t=10s: the slot slid out: 100 again.
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart + absl::Seconds(10)), 100.0);
}

TEST(RetryBudgetTest, LongIdleClearsTheWholeWindow) {
  const BudgetParams p = NoFloor(1.0);
  RetryBudget b;
  for (int i = 0; i < 50; ++i) b.RecordFirstAttempt(p, kStart);
  // An hour later every slot is stale.
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart + absl::Hours(1)), 0.0);
}

TEST(RetryBudgetTest, ClockSteppingBackCountsIntoTheCurrentSlot) {
  const BudgetParams p = NoFloor(1.0);
  RetryBudget b;
  const absl::Time t = kStart + absl::Seconds(4);
  b.RecordFirstAttempt(p, t);
  // The clock steps back a second: the count is kept, nothing crashes.
  b.RecordFirstAttempt(p, t - absl::Seconds(1));
  EXPECT_DOUBLE_EQ(b.Remaining(p, t - absl::Seconds(1)), 2.0);
  EXPECT_DOUBLE_EQ(b.Remaining(p, t), 2.0);
}

TEST(RetryBudgetTest, ResetForgetsTheWindow) {
  const BudgetParams p = NoFloor(1.0);
  RetryBudget b;
  for (int i = 0; i < 7; ++i) b.RecordFirstAttempt(p, kStart);
  b.Reset();
  EXPECT_DOUBLE_EQ(b.Remaining(p, kStart), 0.0);
}

TEST(RetryBudgetTest, WindowStillSlidesAfterItsWidthGrows) {
  // A configuration change from a 10s to a 60s window (the engine calls
  // Reset). The slot index is now in 12s units instead of 2s units, i.e.
  // six times smaller than before: the window must still slide.
  const BudgetParams narrow = NoFloor(1.0);
  BudgetParams wide = NoFloor(1.0);
  wide.window = absl::Seconds(60);
  RetryBudget b;
  b.RecordFirstAttempt(narrow, kStart);
  b.Reset();
  // t=1s: 5 first attempts under the 60s window.
  const absl::Time t1 = kStart + absl::Seconds(1);
  for (int i = 0; i < 5; ++i) b.RecordFirstAttempt(wide, t1);
  EXPECT_DOUBLE_EQ(b.Remaining(wide, t1), 5.0);
  // t=2min: they slid out of the 60s window.
  EXPECT_DOUBLE_EQ(b.Remaining(wide, kStart + absl::Minutes(2)), 0.0);
}

TEST(RetryBudgetTest, WindowStillSlidesAfterItsWidthShrinks) {
  BudgetParams wide = NoFloor(1.0);
  wide.window = absl::Seconds(60);
  const BudgetParams narrow = NoFloor(1.0);
  RetryBudget b;
  for (int i = 0; i < 5; ++i) b.RecordFirstAttempt(wide, kStart);
  b.Reset();
  for (int i = 0; i < 3; ++i) b.RecordFirstAttempt(narrow, kStart);
  EXPECT_DOUBLE_EQ(b.Remaining(narrow, kStart), 3.0);
  EXPECT_DOUBLE_EQ(b.Remaining(narrow, kStart + absl::Seconds(11)), 0.0);
}

TEST(RetryBudgetTest, CanRetryDoesNotWithdraw) {
  const BudgetParams p = NoFloor(0.2);
  RetryBudget b;
  for (int i = 0; i < 5; ++i) b.RecordFirstAttempt(p, kStart);
  // tokens=1: asking many times takes nothing.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(b.CanRetry(p, kStart));
  b.RecordRetry(p, kStart);
  // tokens=0.
  EXPECT_FALSE(b.CanRetry(p, kStart));
}

// ---------------------------------------------------------------------------
// SlidingWindow directly.

struct Count {
  int n = 0;
  Count& operator+=(const Count& o) {
    n += o.n;
    return *this;
  }
};

TEST(SlidingWindowTest, SlotsFallOutOneAtATime) {
  SlidingWindow<Count, 4> w;
  const int64_t t0 = 1000;
  for (int i = 0; i < 4; ++i) {
    w.Advance(t0 + i);
    w.Current().n += 1 << i;  // 1, 2, 4, 8
  }
  EXPECT_EQ(w.Sum().n, 15);
  w.Advance(t0 + 4);  // slot t0 (1) falls out
  EXPECT_EQ(w.Sum().n, 14);
  w.Advance(t0 + 6);  // t0+1 (2) and t0+2 (4) fall out
  EXPECT_EQ(w.Sum().n, 8);
  w.Advance(t0 + 100);  // everything
  EXPECT_EQ(w.Sum().n, 0);
}

TEST(SlidingWindowTest, SmallStepBackKeepsCountingInTheCurrentSlot) {
  SlidingWindow<Count, 4> w;
  w.Advance(1000);
  w.Current().n = 3;
  w.Advance(998);
  w.Current().n += 1;
  EXPECT_EQ(w.Sum().n, 4);
  w.Advance(1001);  // two slots newer than 998 but only one past 1000
  EXPECT_EQ(w.Sum().n, 4);
}

TEST(SlidingWindowTest, LargeStepBackStartsAfresh) {
  // A step back of a whole window or more (a clock jump, or a new slot
  // width) must not freeze the window at the old head for ever.
  SlidingWindow<Count, 4> w;
  w.Advance(1000000);
  w.Current().n = 5;
  w.Advance(1000);
  w.Current().n += 1;
  w.Advance(1001);
  w.Current().n += 1;
  EXPECT_EQ(w.Sum().n, 2);
  w.Advance(1010);  // the window slides again from the new position
  EXPECT_EQ(w.Sum().n, 0);
}

// A reload (compiled_config.h) hands the budget its old and new parameters:
// spent retries survive a change of ratio, not a change of window width.
TEST(RetryBudgetTest, ReconfiguredKeepsTheWindowOnlyIfItsWidthIsUnchanged) {
  const BudgetParams p = NoFloor();
  RetryBudget b;
  for (int i = 0; i < 10; ++i) b.RecordFirstAttempt(p, kStart);
  EXPECT_EQ(RetryUntilEmpty(b, p, kStart), 2);  // 0.2 * 10

  BudgetParams more = p;
  more.ratio = 0.5;  // same 10s window: the counts stay
  b.Reconfigured(&p, more);
  EXPECT_DOUBLE_EQ(b.Remaining(more, kStart), 3.0);  // 0.5 * 10 - 2

  BudgetParams wider = more;
  wider.window = absl::Seconds(20);  // another width: forgotten
  b.Reconfigured(&more, wider);
  EXPECT_DOUBLE_EQ(b.Remaining(wider, kStart), 0.0);  // nothing counted
  for (int i = 0; i < 10; ++i) b.RecordFirstAttempt(wider, kStart);
  EXPECT_DOUBLE_EQ(b.Remaining(wider, kStart), 5.0);

  // Old parameters unknown (e.g. two reloads since the endpoint was last
  // seen): forgotten too.
  b.Reconfigured(nullptr, wider);
  EXPECT_DOUBLE_EQ(b.Remaining(wider, kStart), 0.0);
}

}  // namespace
}  // namespace stagger::engine
