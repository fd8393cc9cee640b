// Engine: what operators see: the stats by breaker state following every
// transition and eviction, Inspect (which touches nothing) and List (pages
// in key order, filtered by breaker state). Fake clock
// (engine_test_fixture.h).
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

// ---------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------
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

}  // namespace
}  // namespace stagger::engine
