// Each component's Save()/Restore() for the state file (endpoint_record.h):
// a restored component behaves as the saved one did, at the same absolute
// instants. The narrative: a breaker tripped at t, saved, "restarted" 3 s
// later into a fresh object, is still open until exactly the instant it
// was given and half-opens then; a budget keeps its window (and drops it
// when the window's width changed); the learned pace and the release queue
// come back as they were; instants kept mod 2^32 come back whole.
#include <cstdint>
#include <limits>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "core/engine/capacity_estimator.h"
#include "core/engine/circuit_breaker.h"
#include "core/engine/endpoint_record.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "core/engine/release_pacer.h"
#include "core/engine/retry_budget.h"

namespace stagger::engine {
namespace {

const absl::Time kStart = absl::FromUnixSeconds(1767225600);

BreakerParams Breaker() {
  BreakerParams p;
  p.consecutive_failures = 3;
  p.open_base = absl::Seconds(10);
  p.open_max = absl::Seconds(60);
  return p;
}

TEST(EndpointRecord, OpenBreakerStaysOpenForExactlyItsRemainingTime) {
  SeededRandom random(7);
  const BreakerParams p = Breaker();
  CircuitBreaker saved;
  for (int i = 0; i < 3; ++i) (void)saved.OnFailure(p, kStart, random.Get());
  ASSERT_EQ(saved.state(), BreakerState::kOpen);
  const absl::Time open_until = saved.open_until();
  ASSERT_GT(open_until, kStart + absl::Seconds(7));

  const BreakerRecord r = saved.Save(p, kStart + absl::Seconds(1));
  EXPECT_EQ(r.time_ns, absl::ToUnixNanos(open_until));  // absolute, not "left"
  CircuitBreaker restored;  // the new process, 3 s after the save
  restored.Restore(r, p);
  EXPECT_EQ(restored.state(), BreakerState::kOpen);
  EXPECT_EQ(restored.trips(), 1);
  EXPECT_EQ(restored.open_until(), open_until);
  EXPECT_EQ(restored.StateAt(open_until - absl::Nanoseconds(1)),
            BreakerState::kOpen);
  EXPECT_FALSE(restored.Refresh(p, kStart + absl::Seconds(4)).has_value());
  const auto t = restored.Refresh(p, open_until);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->to, BreakerState::kHalfOpen);
}

TEST(EndpointRecord, BreakerRoundTripIsExactIncludingItsWindow) {
  SeededRandom random(7);
  BreakerParams p = Breaker();
  p.consecutive_failures = 1000;
  CircuitBreaker b;
  for (int i = 0; i < 9; ++i) {
    (void)b.OnFailure(p, kStart + absl::Seconds(i), random.Get());
    (void)b.OnAnswer(p, kStart + absl::Seconds(i) + absl::Milliseconds(5));
  }
  const absl::Time now = kStart + absl::Seconds(9);
  const BreakerRecord r = b.Save(p, now);
  CircuitBreaker copy;
  copy.Restore(r, p);
  const BreakerRecord again = copy.Save(p, now);
  EXPECT_EQ(again.window.head_slot, r.window.head_slot);
  EXPECT_EQ(again.window.slots, r.window.slots);
  EXPECT_EQ(again.consecutive_failures, r.consecutive_failures);
  uint32_t attempts = 0;
  for (const auto& s : r.window.slots) attempts += s[0];
  EXPECT_GT(attempts, 0u) << "the window held counts to save";
}

TEST(EndpointRecord, BreakerCountsOutOfRangeAreClamped) {
  BreakerRecord r;
  r.state = static_cast<BreakerState>(9);
  r.trips = 1000;
  r.probes_in_flight = 1u << 30;
  CircuitBreaker b;
  b.Restore(r, Breaker());
  EXPECT_EQ(b.state(), BreakerState::kClosed);
  EXPECT_EQ(b.trips(), 60);
  EXPECT_EQ(b.probes_in_flight(), 65535);
}

TEST(EndpointRecord, BudgetKeepsItsWindowUnlessItsWidthChanged) {
  BudgetParams p;  // ratio 0.2, floor 10/s, 10 s window
  p.min_retries_per_second = 0.1;  // floor: 1 retry per window
  RetryBudget b;
  for (int i = 0; i < 50; ++i) b.RecordFirstAttempt(p, kStart);
  b.RecordRetry(p, kStart);
  const absl::Time now = kStart + absl::Seconds(2);
  const double left = b.Remaining(p, now);
  ASSERT_DOUBLE_EQ(left, 9.0);  // 0.2 x 50 - 1

  RetryBudget restored;
  restored.Restore(b.Save(p, now), p);
  EXPECT_DOUBLE_EQ(restored.Remaining(p, now), left);
  // The window still slides: 10 s after the attempts they are gone.
  EXPECT_DOUBLE_EQ(restored.Remaining(p, kStart + absl::Seconds(11)), 1.0);

  BudgetParams wider = p;
  wider.window = absl::Seconds(30);
  RetryBudget other;
  other.Restore(b.Save(p, now), wider);
  EXPECT_DOUBLE_EQ(other.Remaining(wider, now), 3.0);  // only the floor
}

TEST(EndpointRecord, LearnedPaceAndReleaseQueueComeBackAsTheyWere) {
  DeferralParams d;
  SeededRandom random(3);
  CapacityEstimator c;
  ReleasePacer q;
  c.OnGateClosed(kStart, 40);
  q.OnGateClosed(kStart);
  (void)q.CheckIn(d, kStart + absl::Seconds(1), kStart + absl::Seconds(2),
                  random.Get());
  const absl::Time open = kStart + absl::Seconds(5);
  c.SampleRtt(absl::Milliseconds(120));
  q.OnGateOpened(open);
  c.OnGateOpened(d, open, q.backlog());
  c.OnSuccess(d, open + absl::Milliseconds(100));
  const absl::Time now = open + absl::Milliseconds(200);

  CapacityEstimator c2;
  c2.Restore(c.Save(now));
  ReleasePacer q2;
  q2.Restore(q.Save());
  EXPECT_EQ(c2.Pace(d), c.Pace(d));
  EXPECT_EQ(c2.phase(), c.phase());
  EXPECT_EQ(c2.source(), c.source());
  EXPECT_EQ(c2.rtt(), absl::Milliseconds(120));
  EXPECT_EQ(c2.Goodput(now), c.Goodput(now));
  EXPECT_EQ(q2.Releasing(now), q.Releasing(now));
  EXPECT_EQ(q2.backlog(), q.backlog());
  EXPECT_EQ(q2.tail(), q.tail());
  EXPECT_EQ(q2.opened(), open);  // evidence of recovery (decision_path.h)
  // Instants are whole Unix ms, not the estimator's ms mod 2^32.
  const CapacityRecord r = c.Save(now);
  EXPECT_EQ(r.last_success_ms,
            absl::ToUnixMillis(open + absl::Milliseconds(100)));
}

TEST(EndpointRecord, NonsenseRatesFromAFileBecomeZero) {
  CapacityRecord r;
  r.pace = -5;
  r.threshold = std::numeric_limits<float>::quiet_NaN();
  r.phase = 77;
  CapacityEstimator c;
  c.Restore(r);
  EXPECT_EQ(c.threshold(), 0);
  EXPECT_EQ(c.phase(), CapacityEstimator::Phase::kIdle);
  EXPECT_EQ(c.Pace(DeferralParams()), CapacityEstimator::kStartPace);
}

TEST(EndpointRecord, ServedRateKeepsItsSecond) {
  ServedRate s;
  for (int i = 0; i < 7; ++i) s.OnSuccess(kStart + absl::Milliseconds(100 * i));
  const absl::Time now = kStart + absl::Milliseconds(900);
  const ServedRecord r = s.Save(now);
  EXPECT_EQ(r.unix_second, absl::ToUnixSeconds(kStart));
  ServedRate restored;
  restored.Restore(r);
  EXPECT_EQ(restored.PerSecond(now), s.PerSecond(now));
  EXPECT_EQ(restored.PerSecond(now + absl::Seconds(1)), 7);
}

TEST(EndpointRecord, UnwrapNearGivesTheFullInstant) {
  const int64_t now = 1767225600123;  // Unix ms
  for (int64_t t : {now, now - 5000, now + 5000, now - (int64_t{1} << 30)}) {
    EXPECT_EQ(UnwrapNear(static_cast<uint32_t>(t), now), t) << t;
  }
  EXPECT_EQ(UnwrapNear(0, now), 0);  // "none" stays none
}

}  // namespace
}  // namespace stagger::engine
