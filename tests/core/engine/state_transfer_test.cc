// Engine::ExportState / ImportState (the state file's engine side), on a
// fake clock: an export is one record per tracked endpoint, handed over a
// shard at a time; an import restores them into another engine and counts
// what it drops and why (idle past the eviction age, keys the limits now
// refuse, endpoints already tracked, a full table); a restored endpoint
// follows the configuration in force, not the one it was saved under.
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "core/engine/endpoint_record.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

EngineConfig Config() {
  EngineConfig c;
  c.default_policy.breaker.consecutive_failures = 3;
  return c;
}

class StateTransferTest : public ::testing::Test {
 protected:
  void Fail(Engine& e, const std::string& ep, int times = 1) {
    for (int i = 0; i < times; ++i) {
      ReportInput in;
      in.endpoint = ep;
      in.attempt = 1;
      in.outcome = Outcome::kRetryableFailure;
      ASSERT_TRUE(e.Report(in).ok());
    }
  }
  std::vector<EndpointRecord> Export(const Engine& e, int* calls = nullptr) {
    std::vector<EndpointRecord> all;
    e.ExportState([&](absl::Span<const EndpointRecord> part) {
      EXPECT_FALSE(part.empty());
      if (calls != nullptr) ++*calls;
      all.insert(all.end(), part.begin(), part.end());
    });
    return all;
  }

  testing::FakeClock clock_;
  SeededRandom random_{5};
};

TEST_F(StateTransferTest, ExportIsOneRecordPerEndpointInShardSizedParts) {
  Engine e(Config(), &clock_, &random_);
  for (int i = 0; i < 500; ++i) Fail(e, absl::StrCat("https://e.example/", i));
  int calls = 0;
  const std::vector<EndpointRecord> records = Export(e, &calls);
  ASSERT_EQ(records.size(), 500u);
  EXPECT_GT(calls, 1) << "handed over a shard at a time, not all at once";
  std::set<std::string> keys;
  for (const auto& r : records) keys.insert(r.key);
  EXPECT_EQ(keys.size(), 500u);
}

TEST_F(StateTransferTest, ImportRestoresAndCountsBreakerStates) {
  Engine a(Config(), &clock_, &random_);
  Fail(a, "broken", 3);
  Fail(a, "flaky", 1);
  const auto records = Export(a);
  Engine b(Config(), &clock_, &random_);
  const ImportStats s = b.ImportState(records);
  EXPECT_EQ(s.restored, 2);
  EXPECT_EQ(b.Stats().tracked, 2);
  EXPECT_EQ(b.Stats().by_breaker_state[static_cast<int>(BreakerState::kOpen)], 1);
  EXPECT_EQ(b.Stats().by_breaker_state[static_cast<int>(BreakerState::kClosed)], 1);
  EXPECT_EQ(b.Inspect("flaky")->consecutive_failures, 1);
  EXPECT_EQ(b.Inspect("broken")->open_until, a.Inspect("broken")->open_until);
}

TEST_F(StateTransferTest, ImportDropsStaleRejectedTrackedAndOverflowing) {
  Engine a(Config(), &clock_, &random_);
  Fail(a, "old");
  clock_.Advance(absl::Minutes(11));  // idle_eviction: 10 min
  Fail(a, "ok-1");
  Fail(a, "ok-2");
  Fail(a, std::string(100, 'k'));
  const auto records = Export(a);
  ASSERT_EQ(records.size(), 4u);

  EngineConfig c = Config();
  c.limits.max_key_bytes = 50;
  c.limits.max_endpoints = 1;
  Engine b(c, &clock_, &random_);
  const ImportStats s = b.ImportState(records);
  EXPECT_EQ(s.stale, 1);     // "old"
  EXPECT_EQ(s.rejected, 1);  // the 100-byte key
  EXPECT_EQ(s.restored, 1);
  EXPECT_EQ(s.skipped, 1);   // the table holds one
  // Importing again: everything that fits is there already.
  EXPECT_EQ(b.ImportState(records).restored, 0);
}

TEST_F(StateTransferTest, RestoredEndpointFollowsTheConfigurationInForce) {
  Engine a(Config(), &clock_, &random_);
  Fail(a, "https://slow.example/x", 2);
  EngineConfig c = Config();
  PolicyOverride o;
  o.pattern = "https://slow.example/";
  o.policy = c.default_policy;
  o.policy.breaker.consecutive_failures = 100;
  c.overrides.push_back(o);
  Engine b(c, &clock_, &random_);
  ASSERT_EQ(b.ImportState(Export(a)).restored, 1);
  EXPECT_EQ(b.Inspect("https://slow.example/x")->policy,
            "prefix:https://slow.example/");
  Fail(b, "https://slow.example/x", 2);  // 4 in a row: under 100
  EXPECT_EQ(b.Inspect("https://slow.example/x")->breaker_state,
            BreakerState::kClosed);
  EXPECT_EQ(b.Inspect("https://slow.example/x")->consecutive_failures, 4);
}

}  // namespace
}  // namespace stagger::engine
