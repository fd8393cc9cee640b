// Tests for limit_s (bench/sim/limit.h): the slow start's arithmetic, the
// limit's parts and when a backlog cannot finish, and the origin of
// recovery_to_99_s (the recovery, or the end of a Retry-After window).
#include <optional>

#include "absl/time/time.h"
#include "bench/sim/limit.h"
#include "bench/sim/sim.h"
#include "gtest/gtest.h"

namespace stagger::sim {
namespace {

TEST(LimitTest, TheSlowStartGrowsPerRoundTripUpToTheCapacity) {
  SlowStart m;
  m.start_pace = 10;
  m.growth = 3;
  m.rtt_s = 0.25;
  // 2.5, then 7.5, 22.5, ... per round trip.
  EXPECT_DOUBLE_EQ(SlowStartSeconds(m, 0), 0);
  EXPECT_DOUBLE_EQ(SlowStartSeconds(m, 2.5), 0.25);
  EXPECT_DOUBLE_EQ(SlowStartSeconds(m, 10), 0.5);
  EXPECT_DOUBLE_EQ(SlowStartSeconds(m, 10 + 11.25), 0.75 - 0.125);
  // Capped at 20/s: 2.5 in the first round trip, then 20/s.
  m.capacity = 20;
  EXPECT_DOUBLE_EQ(SlowStartSeconds(m, 2.5 + 40), 0.25 + 2);
  // A capacity below the start pace: the capacity from the start.
  m.capacity = 5;
  EXPECT_DOUBLE_EQ(SlowStartSeconds(m, 10), 2);
}

TEST(LimitTest, TheReferenceSlowStartAndTheScenariosRoundTrip) {
  // The reference's own constants (10/s, x3 a round trip), whatever the
  // engine's start pace and growth are.
  Scenario s;
  const SlowStart m = SlowStartFor(s);
  EXPECT_EQ(m.start_pace, 10);
  EXPECT_EQ(m.growth, 3);
  EXPECT_EQ(m.rtt_s, 0.25);
  EXPECT_EQ(m.capacity, 0);  // unlimited
  s.endpoints[0].capacity_per_second = 500;
  EXPECT_EQ(SlowStartFor(s).capacity, 500);
  // A shared limiter: what the fleet can have of it.
  s.endpoints[0].hidden_per_second = 200;
  EXPECT_EQ(SlowStartFor(s).capacity, 300);
  s.endpoints[0].hidden_per_second = 0;
  s.concurrency = 50;  // 50 workers, 250 ms answers: 200/s at most
  EXPECT_EQ(SlowStartFor(s).capacity, 200);
  // Always-up endpoints do not count.
  s.endpoints.push_back(EndpointSpec{});
  EXPECT_EQ(SlowStartFor(s).capacity, 200);
  // A queue's service time is part of its round trip.
  Scenario q;
  q.endpoints[0].capacity_per_second = 200;
  q.endpoints[0].limiter = LimiterKind::kQueue;
  q.endpoints[0].servers = 20;  // 100 ms each
  EXPECT_DOUBLE_EQ(SlowStartFor(q).rtt_s, 0.35);
}

TEST(LimitTest, OneProbePeriodOneRoundTripAndTheSlowStart) {
  Scenario s;  // down in [0, 20 s), open_max 1 s, 250 ms answers
  const double slow = SlowStartSeconds(SlowStartFor(s), 9900);
  const std::optional<double> limit = LimitSeconds(s, 9900, 20);
  ASSERT_TRUE(limit.has_value());
  EXPECT_DOUBLE_EQ(*limit, absl::ToDoubleSeconds(
                               s.engine_policy.breaker.open_max) +
                               0.25 + slow);
  EXPECT_EQ(LimitSeconds(s, 0, 20), 0);  // 99% was there already
  EXPECT_EQ(LimitSeconds(s, -5, 20), 0);
  // A backlog that would finish past the horizon (120 s) cannot.
  s.endpoints[0].capacity_per_second = 50;
  EXPECT_FALSE(LimitSeconds(s, 9900, 20).has_value());
  EXPECT_TRUE(LimitSeconds(s, 4000, 20).has_value());
}

TEST(LimitTest, RecoveryCountsFromTheEndOfTheLastRetryAfterWindow) {
  // Down 20 s answering 503 + Retry-After 5 s: the last windows end after
  // the recovery, and nothing that honours them could go before.
  Scenario s;
  s.subscriptions = 1000;
  s.workers = 1;
  s.endpoints[0].down_retry_after = absl::Seconds(5);
  for (Policy p : {Policy::kDecorrelatedJitter, Policy::kCoordinated}) {
    absl::StatusOr<PolicyResult> r = Simulate(s, p);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->time_to_99_s && r->recovery_to_99_s) << PolicyKey(p);
    EXPECT_LT(*r->recovery_to_99_s, *r->time_to_99_s) << PolicyKey(p);
    EXPECT_GT(*r->time_to_99_s - *r->recovery_to_99_s, 0) << PolicyKey(p);
    EXPECT_LE(*r->time_to_99_s - *r->recovery_to_99_s, 5.25) << PolicyKey(p);
    EXPECT_TRUE(r->limit_s.has_value()) << PolicyKey(p);
  }
  // A 500 has no window: the two times are the same.
  s.endpoints[0].down_retry_after = absl::ZeroDuration();
  absl::StatusOr<PolicyResult> r = Simulate(s, Policy::kCoordinated);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->recovery_to_99_s, r->time_to_99_s);
}

}  // namespace
}  // namespace stagger::sim
