// EndpointTable (core/engine/endpoint_table.h): creation and lookup, the
// max_endpoints limit and its scratch state, idle eviction and its counters,
// listing keys after a cursor, and configuration binding on reload. Time is
// a plain absl::Time the test moves; threads only where concurrent
// inserts are the subject.
#include "core/engine/endpoint_table.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/engine/compiled_config.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {
namespace {

using ::testing::ElementsAre;

const absl::Time kStart = absl::FromUnixSeconds(1767225600);

EngineConfig Config(int64_t max_endpoints = 1000,
                    absl::Duration idle = absl::Minutes(10)) {
  EngineConfig c;
  c.limits.max_endpoints = max_endpoints;
  c.limits.idle_eviction = idle;
  return c;
}

// Touches `key` at `now`; true if it was decided from tracked state.
bool Touch(EndpointTable& t, absl::string_view key, absl::Time now) {
  return t.WithState(key, now, [](EndpointState&, const PolicyParams&,
                                  bool untracked) { return !untracked; });
}

TEST(EndpointTableTest, KnownKeysAreFoundAndKeepTheirState) {
  EndpointTable t(CompiledConfig::Compile(Config(), nullptr));
  t.WithState("a", kStart, [](EndpointState& st, const PolicyParams&, bool) {
    st.previous_delay_ns = 42;
    return 0;
  });
  EXPECT_TRUE(Touch(t, "b", kStart));
  int64_t seen = 0;
  EXPECT_TRUE(t.WithTracked("a", [&](const EndpointState& st,
                                     const CompiledConfig&) {
    seen = st.previous_delay_ns;
    EXPECT_EQ(st.key(), "a");
  }));
  EXPECT_EQ(seen, 42);
  EXPECT_FALSE(t.WithTracked("c", [](const EndpointState&,
                                     const CompiledConfig&) {}));
  EXPECT_EQ(t.Stats().tracked, 2);
  EXPECT_EQ(t.Stats().by_breaker_state[static_cast<int>(BreakerState::kClosed)],
            2);
}

TEST(EndpointTableTest, KeysLongerThanTheHeadAreStoredWhole) {
  EndpointTable t(CompiledConfig::Compile(Config(), nullptr));
  const std::string long_key = "https://hooks.example.com/" +
                               std::string(3000, 'x');
  EXPECT_TRUE(Touch(t, long_key, kStart));
  EXPECT_TRUE(t.WithTracked(long_key, [&](const EndpointState& st,
                                          const CompiledConfig&) {
    EXPECT_EQ(st.key(), long_key);
  }));
}

TEST(EndpointTableTest, AFullTableDecidesFromScratchAndSweepsOncePerSecond) {
  EndpointTable t(CompiledConfig::Compile(Config(2, absl::Seconds(30)),
                                          nullptr));
  EXPECT_TRUE(Touch(t, "a", kStart));
  EXPECT_TRUE(Touch(t, "b", kStart));
  // Full, and nothing is idle: "c" is decided from a fresh scratch state
  // that is not stored, whatever the decision did to it.
  EXPECT_FALSE(t.WithState("c", kStart, [](EndpointState& st,
                                           const PolicyParams&, bool u) {
    EXPECT_EQ(st.previous_delay_ns, 0);
    st.previous_delay_ns = 7;
    return !u;
  }));
  EXPECT_EQ(t.Stats().tracked, 2);
  EXPECT_FALSE(t.WithTracked("c", [](const EndpointState&,
                                     const CompiledConfig&) {}));
  // 31 s later both are idle, but only the shards a new key lands in are
  // swept, and each at most once a second: EvictIdle() takes the rest.
  const absl::Time later = kStart + absl::Seconds(31);
  EXPECT_TRUE(Touch(t, "a", later));  // known: no sweep needed
  EXPECT_EQ(t.EvictIdle(later), 1);   // "b"
  EXPECT_EQ(t.Stats().evicted_total, 1);
  EXPECT_TRUE(Touch(t, "c", later));  // room again
  EXPECT_EQ(t.Stats().tracked, 2);
}

// Threads inserting into different shards at once never take more than
// max_endpoints places between them (the place is reserved atomically;
// checking then counting let each shard take "the last" one).
TEST(EndpointTableTest, ConcurrentInsertsNeverExceedMaxEndpoints) {
  constexpr int64_t kMax = 64;
  EndpointTable t(CompiledConfig::Compile(Config(kMax), nullptr));
  std::vector<std::thread> threads;
  for (int w = 0; w < 8; ++w) {
    threads.emplace_back([&t, w] {
      for (int i = 0; i < 2000; ++i) {
        Touch(t, absl::StrCat("w", w, "/", i), kStart);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(t.tracked(), kMax);
}

TEST(EndpointTableTest, EvictionCountsByBreakerStateAndTotal) {
  EndpointTable t(CompiledConfig::Compile(Config(1000, absl::Seconds(60)),
                                          nullptr));
  for (const char* k : {"a", "b", "c"}) Touch(t, k, kStart);
  // "a" trips; the decision path reports the transition to the table.
  t.WithState("a", kStart, [&](EndpointState& st, const PolicyParams& p,
                               bool) {
    absl::BitGen gen;
    for (int i = 0; i < 1000 && st.breaker.state() == BreakerState::kClosed;
         ++i) {
      if (auto tr = st.breaker.OnFailure(p.breaker, kStart, gen)) {
        t.CountTransition(*tr);
      }
    }
    return 0;
  });
  EXPECT_EQ(t.Stats().by_breaker_state[static_cast<int>(BreakerState::kOpen)],
            1);
  Touch(t, "c", kStart + absl::Seconds(30));
  EXPECT_EQ(t.EvictIdle(kStart + absl::Seconds(60)), 0);  // not yet idle
  EXPECT_EQ(t.EvictIdle(kStart + absl::Seconds(61)), 2);  // "a" and "b"
  const EngineStats s = t.Stats();
  EXPECT_EQ(s.tracked, 1);
  EXPECT_EQ(s.evicted_total, 2);
  EXPECT_EQ(s.by_breaker_state[static_cast<int>(BreakerState::kOpen)], 0);
  EXPECT_EQ(s.by_breaker_state[static_cast<int>(BreakerState::kClosed)], 1);
}

TEST(EndpointTableTest, KeysAfterACursorComeInOrderAcrossShards) {
  EndpointTable t(CompiledConfig::Compile(Config(), nullptr));
  std::vector<std::string> all;
  for (int i = 0; i < 200; ++i) {
    all.push_back("ep-" + std::to_string(1000 + i));
    Touch(t, all.back(), kStart);
  }
  auto any = [](const EndpointState&) { return true; };
  EXPECT_THAT(t.KeysAfter("", 3, any),
              ElementsAre("ep-1000", "ep-1001", "ep-1002"));
  EXPECT_THAT(t.KeysAfter("ep-1002", 2, any), ElementsAre("ep-1003", "ep-1004"));
  EXPECT_THAT(t.KeysAfter("ep-1198", 5, any), ElementsAre("ep-1199"));
  EXPECT_TRUE(t.KeysAfter("ep-1199", 5, any).empty());
  // A filter applies before the limit.
  auto odd = [](const EndpointState& st) { return st.key().back() % 2 == 1; };
  EXPECT_THAT(t.KeysAfter("ep-1100", 2, odd), ElementsAre("ep-1101", "ep-1103"));
  int visited = 0;
  t.Visit([&](const EndpointState&) { ++visited; });
  EXPECT_EQ(visited, 200);
}

TEST(EndpointTableTest, AReloadRebindsPoliciesAndKeepsSameWidthBudgets) {
  EngineConfig c = Config();
  PolicyOverride slow;
  slow.pattern = "https://slow.";
  slow.policy.backoff.max_attempts = 3;
  c.overrides.push_back(slow);
  EndpointTable t(CompiledConfig::Compile(c, nullptr));
  auto attempts = [&](absl::string_view key) {
    return t.WithState(key, kStart, [](EndpointState&, const PolicyParams& p,
                                       bool) { return p.backoff.max_attempts; });
  };
  const int default_attempts = c.default_policy.backoff.max_attempts;
  EXPECT_EQ(attempts("https://slow.example/x"), 3);
  EXPECT_EQ(attempts("https://fast.example/x"), default_attempts);
  // Spend the fast endpoint's budget.
  t.WithState("https://fast.example/x", kStart,
              [](EndpointState& st, const PolicyParams& p, bool) {
                while (st.budget.CanRetry(p.budget, kStart)) {
                  st.budget.RecordRetry(p.budget, kStart);
                }
                return 0;
              });
  // Reload: the override now also covers "fast"; same budget window.
  EngineConfig next = c;
  next.overrides[0].pattern = "https://";
  const auto old = t.config();
  t.SetConfig(CompiledConfig::Compile(next, old.get()));
  EXPECT_EQ(t.config()->generation, old->generation + 1);
  EXPECT_EQ(attempts("https://fast.example/x"), 3);
  bool empty = false;
  t.WithState("https://fast.example/x", kStart,
              [&](EndpointState& st, const PolicyParams& p, bool) {
                empty = !st.budget.CanRetry(p.budget, kStart);
                return 0;
              });
  EXPECT_TRUE(empty) << "same window width: spent retries stay spent";
}

}  // namespace
}  // namespace stagger::engine
