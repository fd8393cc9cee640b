// EvictionLoop: the period comes from the engine's current config and
// follows a reload; rounds evict idle endpoints. Narrated on a fake clock:
// the injected wait records the period each round asks for and advances the
// clock instead of sleeping.
#include "server/daemon/eviction_loop.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "tests/testing/fake_clock.h"

namespace stagger::daemon {
namespace {

using ::testing::ElementsAre;

engine::EngineConfig WithIdleEviction(absl::Duration idle) {
  engine::EngineConfig config;
  config.limits.idle_eviction = idle;
  return config;
}

engine::AdmitInput AdmitTo(absl::string_view endpoint) {
  engine::AdmitInput in;
  in.endpoint = endpoint;
  return in;
}

TEST(EvictionPeriod, IsATenthOfTheIdleAgeClampedToOneSecondAndOneMinute) {
  using engine::EvictionPeriod;
  EXPECT_EQ(EvictionPeriod(absl::Seconds(100)), absl::Seconds(10));
  EXPECT_EQ(EvictionPeriod(absl::Seconds(1)), absl::Seconds(1));  // range min
  EXPECT_EQ(EvictionPeriod(absl::Seconds(5)), absl::Seconds(1));
  EXPECT_EQ(EvictionPeriod(absl::Seconds(10)), absl::Seconds(1));
  EXPECT_EQ(EvictionPeriod(absl::Minutes(10)), absl::Seconds(60));
  EXPECT_EQ(EvictionPeriod(absl::Hours(24 * 7)), absl::Seconds(60));  // max
}

TEST(EvictionLoop, PeriodComesFromTheEnginesCurrentConfig) {
  testing::FakeClock clock;
  engine::SeededRandom random(1);
  engine::Engine engine(WithIdleEviction(absl::Seconds(300)), &clock, &random);
  EvictionLoop loop(&engine, [](absl::Duration) { return true; });
  EXPECT_EQ(loop.CurrentPeriod(), absl::Seconds(30));
  engine.SetConfig(WithIdleEviction(absl::Seconds(20)));
  EXPECT_EQ(loop.CurrentPeriod(), absl::Seconds(2));
}

TEST(EvictionLoop, FollowsAReloadFromTheNextRoundAndEvictsIdleEndpoints) {
  testing::FakeClock clock;
  engine::SeededRandom random(1);
  engine::Engine engine(WithIdleEviction(absl::Minutes(10)), &clock, &random);
  ASSERT_TRUE(engine.Admit(AdmitTo("https://a.example/")).ok());
  ASSERT_EQ(engine.Stats().tracked, 1);

  std::vector<absl::Duration> periods;
  EvictionLoop loop(&engine, [&](absl::Duration period) {
    periods.push_back(period);
    switch (periods.size()) {
      case 1:  // idle 60 s of 10 min: the round keeps the endpoint
        clock.Advance(period);
        return false;
      case 2:  // a reload while waiting: idle_eviction 100 s
        engine.SetConfig(WithIdleEviction(absl::Seconds(100)));
        clock.Advance(period);  // idle 120 s > 100 s: this round evicts it
        return false;
      default:
        return true;
    }
  });

  loop.Run();

  // Round 2 was already waiting with the old period; round 3 has the new.
  EXPECT_THAT(periods, ElementsAre(absl::Seconds(60), absl::Seconds(60),
                                   absl::Seconds(10)));
  EXPECT_EQ(engine.Stats().tracked, 0);
  EXPECT_EQ(engine.Stats().evicted_total, 1);
}

TEST(EvictionLoop, KeepsAnEndpointThatIsNotIdleLongEnough) {
  testing::FakeClock clock;
  engine::SeededRandom random(1);
  engine::Engine engine(WithIdleEviction(absl::Minutes(10)), &clock, &random);
  ASSERT_TRUE(engine.Admit(AdmitTo("https://a.example/")).ok());
  int rounds = 0;
  EvictionLoop loop(&engine, [&](absl::Duration period) {
    clock.Advance(period);
    return ++rounds > 9;  // 9 rounds of 60 s: idle 9 min < 10 min
  });
  loop.Run();
  EXPECT_EQ(rounds, 10);
  EXPECT_EQ(engine.Stats().tracked, 1);
  EXPECT_EQ(engine.Stats().evicted_total, 0);
}

TEST(EvictionLoop, StopEndsTheThreadWithoutWaitingOutThePeriod) {
  testing::FakeClock clock;
  engine::SeededRandom random(1);
  engine::Engine engine(WithIdleEviction(absl::Hours(1)), &clock, &random);
  EvictionLoop loop(&engine);  // waits 60 s a round on the real clock
  loop.Start();
  loop.Stop();  // returns at once; a loop that slept 60 s would time out
  loop.Stop();  // idempotent
  EXPECT_EQ(engine.Stats().evicted_total, 0);
}

}  // namespace
}  // namespace stagger::daemon
