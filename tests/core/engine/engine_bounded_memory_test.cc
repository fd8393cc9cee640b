// Engine: bounded memory: a full table decides new endpoints untracked and
// does not grow; idle endpoints are evicted (inspection is not use), which
// frees room. Fake clock (engine_test_fixture.h).
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "gtest/gtest.h"
#include "tests/core/engine/engine_test_fixture.h"

namespace stagger::engine {
namespace {

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

}  // namespace
}  // namespace stagger::engine
