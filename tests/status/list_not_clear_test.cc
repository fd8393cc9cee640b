// Engine::ListNotClear (core/engine): only endpoints with a breaker not
// CLOSED, a Retry-After window, a pause or a release in progress; in key
// order, paged like List, with the scan's counts.
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::FakeClock;

class ListNotClearTest : public ::testing::Test {
 protected:
  ListNotClearTest() : engine_(EngineConfig{}, &clock_, &random_) {
    for (int i = 0; i < 20; ++i) Admit("clear/" + std::to_string(i));
    Admit("open/1");
    EXPECT_TRUE(engine_.ForceBreaker("open/1", BreakerState::kOpen,
                                     absl::Minutes(1)).ok());
    ReportInput r;
    r.endpoint = "ra/1";
    r.outcome = Outcome::kRateLimited;
    r.retry_after = absl::Seconds(30);
    EXPECT_TRUE(engine_.Report(r).ok());
    Admit("paused/1");
    EXPECT_TRUE(engine_.pauses()
                    .Set("paused/", /*prefix=*/true, absl::Minutes(10),
                         "deploy", "alice", clock_.Now())
                    .ok());
  }
  void Admit(const std::string& key) {
    AdmitInput in;
    in.endpoint = key;
    ASSERT_TRUE(engine_.Admit(in).ok());
  }
  static std::vector<std::string> Keys(const ListPage& page) {
    std::vector<std::string> keys;
    for (const EndpointSnapshot& s : page.endpoints) keys.push_back(s.endpoint);
    return keys;
  }

  FakeClock clock_;
  SeededRandom random_{1};
  Engine engine_;
};

TEST_F(ListNotClearTest, ListsOnlyTheEndpointsThatAreNotClear) {
  const ListPage page = engine_.ListNotClear("", 100);
  EXPECT_EQ(Keys(page), (std::vector<std::string>{"open/1", "paused/1", "ra/1"}));
  EXPECT_EQ(page.total_tracked, 23);
  EXPECT_EQ(page.scanned, 23);
  EXPECT_EQ(page.matched, 3);
  EXPECT_EQ(page.next_after, "");
  EXPECT_EQ(page.endpoints[0].breaker_state, BreakerState::kOpen);
  ASSERT_TRUE(page.endpoints[1].pause.has_value());
  EXPECT_EQ(page.endpoints[1].pause->paused_by, "alice");
  EXPECT_GT(page.endpoints[2].retry_after_until, clock_.Now());
}

TEST_F(ListNotClearTest, PagesInKeyOrderCountingWhatIsLeft) {
  ListPage first = engine_.ListNotClear("", 1);
  EXPECT_EQ(Keys(first), std::vector<std::string>{"open/1"});
  EXPECT_EQ(first.next_after, "open/1");
  EXPECT_EQ(first.matched, 3);
  ListPage second = engine_.ListNotClear(first.next_after, 1);
  EXPECT_EQ(Keys(second), std::vector<std::string>{"paused/1"});
  EXPECT_EQ(second.matched, 2);
  EXPECT_EQ(second.scanned, 2);  // "paused/1", "ra/1" sort after "open/1"
  ListPage third = engine_.ListNotClear(second.next_after, 1);
  EXPECT_EQ(Keys(third), std::vector<std::string>{"ra/1"});
  EXPECT_EQ(third.next_after, "");
}

TEST_F(ListNotClearTest, EndpointsClearAgainLeaveTheList) {
  ASSERT_TRUE(engine_.ForceBreaker("open/1", BreakerState::kClosed,
                                   absl::ZeroDuration()).ok());
  ASSERT_TRUE(engine_.pauses().Remove("paused/", true, clock_.Now()).ok());
  clock_.Advance(absl::Hours(1));  // the window and any release are over
  const ListPage page = engine_.ListNotClear("", 100);
  EXPECT_TRUE(page.endpoints.empty()) << page.endpoints[0].endpoint;
  EXPECT_EQ(page.matched, 0);
  EXPECT_EQ(page.scanned, 23);
}

TEST_F(ListNotClearTest, ListCountsTooAndKeepsItsFilter) {
  const ListPage all = engine_.List("", 5, std::nullopt);
  EXPECT_EQ(all.endpoints.size(), 5u);
  EXPECT_EQ(all.scanned, 23);
  EXPECT_EQ(all.matched, 23);
  const ListPage open = engine_.List("", 5, BreakerState::kOpen);
  EXPECT_EQ(Keys(open), std::vector<std::string>{"open/1"});
  EXPECT_EQ(open.matched, 1);
}

}  // namespace
}  // namespace stagger::engine
