// Engine: concurrency (also a smoke test for data races under
// sanitizers): decisions from several threads stay valid while the config
// changes; racing reloads leave one configuration. PerThreadRandom; the
// tests assert validity only, never timing.
#include <atomic>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::FakeClock;

bool ValidDecision(const Decision& d) {
  const int r = static_cast<int>(d.reason);
  if (r < 1 || r > kMaxReason) return false;
  switch (d.verdict) {
    case Verdict::kProceed:
      return d.delay >= absl::ZeroDuration() && d.delay <= absl::Hours(25);
    case Verdict::kDefer:
      return d.defer_until != absl::InfinitePast() &&
             d.defer_until != absl::InfiniteFuture();
    case Verdict::kGiveUp:
    case Verdict::kDone:
      return true;
  }
  return false;
}

EngineConfig ConfigVariant(int i) {
  EngineConfig c;
  c.default_policy.breaker.consecutive_failures = 3 + i % 5;
  c.default_policy.breaker.open_base = absl::Milliseconds(10 + i % 50);
  c.default_policy.budget.window = absl::Seconds(1 + i % 3);
  c.default_policy.backoff.kind = static_cast<BackoffKind>(1 + i % 4);
  if (i % 2 == 0) {
    PolicyOverride o;
    o.match = i % 4 == 0 ? PolicyOverride::Match::kGlob
                         : PolicyOverride::Match::kPrefix;
    o.pattern = i % 4 == 0 ? "ep-1*" : "ep-2";
    o.policy.breaker.enabled = i % 8 != 0;
    o.policy.backoff.kind = BackoffKind::kFullJitter;
    c.overrides.push_back(o);
  }
  c.limits.max_endpoints = 40 + i % 20;  // the table fills up at times
  c.limits.idle_eviction = absl::Seconds(1);
  return c;
}

TEST(EngineConcurrencyTest, DecisionsStayValidWhileConfigChanges) {
  FakeClock clock;
  Engine engine(ConfigVariant(0), &clock, PerThreadRandom::Instance());
  constexpr int kWorkers = 4;
  constexpr int kDecisionsPerWorker = 20000;
  std::atomic<bool> stop{false};
  std::atomic<int> invalid{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kDecisionsPerWorker; ++i) {
        const std::string key = absl::StrCat("ep-", (i * 7 + w) % 60);
        const int attempt = 1 + i % 4;
        absl::StatusOr<Decision> d;
        if (i % 3 == 0) {
          AdmitInput in;
          in.endpoint = key;
          in.attempt = attempt;
          d = engine.Admit(in);
        } else {
          ReportInput in;
          in.endpoint = key;
          in.attempt = attempt;
          in.outcome = static_cast<Outcome>(1 + (i + w) % 5);
          if (i % 11 == 0) in.retry_after = absl::Milliseconds(i % 500);
          d = engine.Report(in);
        }
        if (!d.ok()) {
          errors.fetch_add(1);
        } else if (!ValidDecision(*d)) {
          invalid.fetch_add(1);
        }
        if (i % 1000 == 0) {
          engine.Stats();
          engine.List("", 5, std::nullopt);
          (void)engine.Inspect(key);
        }
      }
    });
  }
  std::thread reconfigure([&] {
    for (int i = 1; !stop.load(); ++i) {
      engine.SetConfig(ConfigVariant(i));
      clock.Advance(absl::Milliseconds(50));
      if (i % 10 == 0) engine.EvictIdle();
    }
  });
  for (std::thread& t : threads) t.join();
  stop.store(true);
  reconfigure.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(invalid.load(), 0);
  // The gauges still add up.
  const EngineStats s = engine.Stats();
  int64_t sum = 0;
  for (int st = 1; st <= kNumBreakerStates; ++st) {
    EXPECT_GE(s.by_breaker_state[st], 0);
    sum += s.by_breaker_state[st];
  }
  EXPECT_EQ(sum, s.tracked);
  EXPECT_EQ(static_cast<int64_t>(engine.List("", 1000, std::nullopt)
                                     .endpoints.size()),
            s.tracked);
}

TEST(EngineConcurrencyTest, ConcurrentSetConfigsLeaveOneConfiguration) {
  // Two reloads racing must not leave some shards on one configuration and
  // the rest on the other: afterwards every endpoint resolves its policy
  // from the same configuration.
  FakeClock clock;
  EngineConfig a;
  PolicyOverride oa;
  oa.match = PolicyOverride::Match::kGlob;
  oa.pattern = "*";
  a.overrides.push_back(oa);
  EngineConfig b = a;
  b.overrides[0].pattern = "**";
  Engine engine(a, &clock, PerThreadRandom::Instance());
  std::vector<std::string> keys;
  for (int i = 0; i < 512; ++i) {
    keys.push_back(absl::StrCat("k", i));
    AdmitInput in;
    in.endpoint = keys.back();
    ASSERT_TRUE(engine.Admit(in).ok());
  }
  // Two deciders keep the shard locks busy and the cores oversubscribed, so
  // that one reload is preempted mid-walk and the other overtakes it.
  std::atomic<bool> stop{false};
  std::vector<std::thread> deciders;
  for (int w = 0; w < 2; ++w) {
    deciders.emplace_back([&, w] {
      for (int i = w; !stop.load(std::memory_order_relaxed); ++i) {
        AdmitInput in;
        in.endpoint = keys[i % keys.size()];
        (void)engine.Admit(in);
      }
    });
  }
  int mixed_rounds = 0;
  for (int round = 0; round < 1000; ++round) {
    absl::Barrier* barrier = new absl::Barrier(2);
    auto reload = [&](const EngineConfig& c) {
      if (barrier->Block()) delete barrier;
      engine.SetConfig(c);
    };
    std::thread t1(reload, std::cref(a));
    std::thread t2(reload, std::cref(b));
    t1.join();
    t2.join();
    std::set<std::string> policies;
    for (const std::string& k : keys) policies.insert(engine.Inspect(k)->policy);
    if (policies.size() != 1) ++mixed_rounds;
  }
  stop.store(true);
  for (std::thread& t : deciders) t.join();
  EXPECT_EQ(mixed_rounds, 0);
}

}  // namespace
}  // namespace stagger::engine
