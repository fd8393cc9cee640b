// SteadyWallClock: wall time read once, then advanced by the steady clock.
// The story: the wall clock steps back and forward while the steady clock
// runs on; the engine's clock follows only the steady one.
#include "core/engine/clock.h"

#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::FakeClock;

TEST(SteadyWallClockTest, StartsAtTheWallClockAndNeverSteps) {
  FakeClock wall(absl::FromUnixSeconds(1'767'225'600));
  FakeClock steady(absl::FromUnixSeconds(50));
  const SteadyWallClock clock(&wall, &steady);
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(1'767'225'600));

  steady.Advance(absl::Seconds(3));
  wall.Advance(absl::Seconds(3));
  const absl::Time before_step = clock.Now();
  EXPECT_EQ(before_step, absl::FromUnixSeconds(1'767'225'603));

  wall.Advance(absl::Seconds(-2));  // stepped back: nothing moves
  EXPECT_EQ(clock.Now(), before_step);
  steady.Advance(absl::Milliseconds(10));
  EXPECT_GT(clock.Now(), before_step) << "stamps keep their events' order";

  wall.Advance(absl::Hours(1));  // stepped forward: nothing jumps
  EXPECT_EQ(clock.Now(), before_step + absl::Milliseconds(10));
}

TEST(SteadyWallClockTest, ARestartReadsTheWallClockAgain) {
  FakeClock wall(absl::FromUnixSeconds(1'767'225'600));
  FakeClock steady(absl::FromUnixSeconds(50));
  wall.Advance(absl::Seconds(-5));  // the step, before the start
  const SteadyWallClock restarted(&wall, &steady);
  EXPECT_EQ(restarted.Now(), absl::FromUnixSeconds(1'767'225'595));
}

}  // namespace
}  // namespace stagger::engine
