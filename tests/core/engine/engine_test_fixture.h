// EngineTest: the fixture of the engine's decision tests (engine_*_test.cc
// in this folder, one binary): an Engine on a fake clock and a fixed seed
// (42), made by the test with Make(config), and the calls those tests make
// (Admit, Report, Fail, Inspect, Trip, the breaker-state stats), each
// expecting valid input. Also the configs and names they share.
#ifndef STAGGER_TESTS_CORE_ENGINE_ENGINE_TEST_FIXTURE_H_
#define STAGGER_TESTS_CORE_ENGINE_ENGINE_TEST_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_calls.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {

inline constexpr char kEp[] = "https://hooks.example.com/a";

// The endpoint keeps its previous delay in whole nanoseconds; a decision's
// delay may carry a fraction of one.
inline absl::Duration Ns(absl::Duration d) {
  return absl::Trunc(d, absl::Nanoseconds(1));
}

// A config whose breaker trips on `n` consecutive failures (the ratio rule
// out of the way) and whose budget floor is generous.
inline EngineConfig TripAfter(int n) {
  EngineConfig c;
  c.default_policy.breaker.consecutive_failures = n;
  c.default_policy.breaker.min_throughput = 1000000000;
  return c;
}

// No breaker: for tests about backoff, budget and Retry-After alone.
inline EngineConfig NoBreaker() {
  EngineConfig c;
  c.default_policy.breaker.enabled = false;
  return c;
}

// No breaker; backoff 1 s * 2^(n-1), capped at 30 s (the default cap).
inline EngineConfig ExponentialFromOneSecond() {
  EngineConfig c = NoBreaker();
  c.default_policy.backoff.kind = BackoffKind::kExponential;
  c.default_policy.backoff.base = absl::Seconds(1);
  return c;
}

class EngineTest : public ::testing::Test {
 protected:
  void Make(EngineConfig c) {
    engine_ = std::make_unique<Engine>(std::move(c), &clock_, &random_);
  }
  Engine& engine() { return *engine_; }

  Decision Admit(absl::string_view ep, int attempt,
                 absl::Time deadline = absl::InfiniteFuture(),
                 absl::Time first = absl::InfinitePast()) {
    return ::stagger::testing::AdmitOk(*engine_, ep, attempt, deadline, first);
  }
  Decision Report(absl::string_view ep, int attempt, Outcome outcome,
                  std::optional<absl::Duration> retry_after = std::nullopt,
                  absl::Time deadline = absl::InfiniteFuture(),
                  absl::Time first = absl::InfinitePast()) {
    return ::stagger::testing::ReportOk(*engine_, ep, attempt, outcome,
                                        retry_after, deadline, first);
  }
  Decision Fail(absl::string_view ep, int attempt = 1) {
    return Report(ep, attempt, Outcome::kRetryableFailure);
  }
  EndpointSnapshot Inspect(absl::string_view ep) {
    absl::StatusOr<EndpointSnapshot> s = engine_->Inspect(ep);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : EndpointSnapshot{};
  }
  // Trips `ep`'s breaker (configured by TripAfter(n)); returns open_until.
  absl::Time Trip(absl::string_view ep, int n) {
    Decision d;
    for (int i = 0; i < n; ++i) d = Fail(ep);
    EXPECT_EQ(d.reason, Reason::kCircuitOpen);
    EXPECT_EQ(Inspect(ep).breaker_state, BreakerState::kOpen);
    return Inspect(ep).open_until;
  }
  // Σ by_breaker_state == tracked.
  void ExpectStatsConsistent() {
    const EngineStats s = engine_->Stats();
    int64_t sum = 0;
    for (int st = 1; st <= kNumBreakerStates; ++st) {
      EXPECT_GE(s.by_breaker_state[st], 0) << st;
      sum += s.by_breaker_state[st];
    }
    EXPECT_EQ(sum, s.tracked);
  }
  int64_t InState(BreakerState st) {
    return engine_->Stats().by_breaker_state[static_cast<int>(st)];
  }

  ::stagger::testing::FakeClock clock_;
  SeededRandom random_{42};
  std::unique_ptr<Engine> engine_;
};

}  // namespace stagger::engine

#endif  // STAGGER_TESTS_CORE_ENGINE_ENGINE_TEST_FIXTURE_H_
