// Tests for stagger-sim's scenario model (bench/sim/sim.h): the shared
// worker pool (who holds a worker when), failure schedules (a flapping
// endpoint), several endpoints (assignment and accounting), and the
// scenario's validation. Virtual clock only; times are exact.
#include <algorithm>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/sim/sim.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bench/sim/policy_printer.h"

namespace stagger::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

int64_t Ms(int64_t ms) { return ms * 1000000; }

// Every trace event, and the first time of a kind for a delivery.
struct Timeline {
  std::vector<TraceEvent> events;
  TraceFn Fn() {
    return [this](const TraceEvent& e) { events.push_back(e); };
  }
  // Virtual ns of the `n`-th (0-based) event of `kind` for `delivery`, or -1.
  int64_t At(TraceEvent::Kind kind, int delivery, int n = 0) const {
    for (const TraceEvent& e : events) {
      if (e.kind == kind && e.delivery == delivery && n-- == 0) return e.time_ns;
    }
    return -1;
  }
  std::vector<int64_t> Attempts(int delivery) const {
    std::vector<int64_t> out;
    for (const TraceEvent& e : events) {
      if (e.kind == TraceEvent::Kind::kAttempt && e.delivery == delivery) {
        out.push_back(e.time_ns);
      }
    }
    return out;
  }
};

// Two deliveries and one worker: delivery 0 goes to endpoint #0, down in
// [0, 10 s); delivery 1 to endpoint #1, always up. Plain exponential from
// 1 s, no initial jitter, 250 ms answers.
Scenario TwoDeliveries(int concurrency) {
  Scenario s;
  s.subscriptions = 2;
  s.workers = 1;
  s.endpoints = {OutageEndpoint(absl::Seconds(10)), EndpointSpec{}};
  s.concurrency = concurrency;
  s.base = absl::Seconds(1);
  s.initial_jitter = absl::ZeroDuration();
  s.seed = 3;
  return s;
}

// --- Who holds a worker ----------------------------------------------------

TEST(PoolTest, AnIndependentClientSleepingInBackoffHoldsItsWorker) {
  Timeline t;
  absl::StatusOr<PolicyResult> r =
      Simulate(TwoDeliveries(1), Policy::kExponential, t.Fn());
  ASSERT_TRUE(r.ok()) << r.status();
  // Delivery 0 takes the only worker at t=0 and keeps it: attempt 1 at 0
  // (answered at 0.25 s), then sleeps 1, 2, 4, 8 s after each failure:
  // attempts at 1.25, 3.5, 7.75 and 16 s, the last after the recovery.
  EXPECT_THAT(t.Attempts(0),
              ElementsAre(0, Ms(1250), Ms(3500), Ms(7750), Ms(16000)));
  EXPECT_EQ(t.At(TraceEvent::Kind::kDelivered, 0), Ms(16250));
  // Delivery 1, to a healthy endpoint, waits for that worker the whole time.
  EXPECT_EQ(t.At(TraceEvent::Kind::kTookWorker, 1), Ms(16250));
  EXPECT_THAT(t.Attempts(1), ElementsAre(Ms(16250)));
  EXPECT_EQ(t.At(TraceEvent::Kind::kDelivered, 1), Ms(16500));
  EXPECT_EQ(r->peak_waiting_for_worker, 1);
  EXPECT_EQ(r->healthy_time_to_99_s, 16.5);

  // With a second worker it does not wait at all.
  Timeline two;
  ASSERT_TRUE(Simulate(TwoDeliveries(2), Policy::kExponential, two.Fn()).ok());
  EXPECT_EQ(two.At(TraceEvent::Kind::kDelivered, 1), Ms(250));
}

TEST(PoolTest, ACoordinatedDeliveryFreesItsWorkerWhenDeferred) {
  Scenario s = TwoDeliveries(1);
  s.engine_policy.breaker.consecutive_failures = 1;  // trip on one failure
  Timeline t;
  absl::StatusOr<PolicyResult> r = Simulate(s, Policy::kCoordinated, t.Fn());
  ASSERT_TRUE(r.ok()) << r.status();
  // Delivery 0's first attempt fails at 0.25 s; the breaker of endpoint #0
  // opens and the engine DEFERs it: the delivery is parked and its worker
  // goes back to the pool at once...
  EXPECT_THAT(t.Attempts(0).front(), 0);
  EXPECT_EQ(t.At(TraceEvent::Kind::kFreedWorker, 0), Ms(250));
  EXPECT_GE(r->deferred_by_reason[static_cast<int>(engine::Reason::kCircuitOpen)],
            1);
  // ... to delivery 1 (another endpoint, another breaker), delivered while
  // endpoint #0 is still down.
  EXPECT_EQ(t.At(TraceEvent::Kind::kTookWorker, 1), Ms(250));
  EXPECT_THAT(t.Attempts(1), ElementsAre(Ms(250)));
  EXPECT_EQ(t.At(TraceEvent::Kind::kDelivered, 1), Ms(500));
  // Delivery 0 queued for a worker again at each defer_until and got
  // through after the recovery.
  EXPECT_GT(t.At(TraceEvent::Kind::kTookWorker, 0, 1), Ms(250));
  EXPECT_GT(t.At(TraceEvent::Kind::kDelivered, 0), Ms(10000));
  EXPECT_EQ(r->delivered, 2);
}

TEST(PoolTest, TheOldClientWaitingOutAProceedDelayHoldsItsWorker) {
  Scenario s = TwoDeliveries(1);
  s.waiting_admission = false;
  s.engine_policy.breaker.enabled = false;  // every failure: PROCEED(delay)
  Timeline t;
  absl::StatusOr<PolicyResult> r = Simulate(s, Policy::kCoordinated, t.Fn());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->deferrals, 0);
  // The RetryLoop sleeps in the worker: delivery 1 only gets it when
  // delivery 0 is delivered, after the recovery.
  const int64_t done0 = t.At(TraceEvent::Kind::kDelivered, 0);
  EXPECT_GT(done0, Ms(10000));
  EXPECT_EQ(t.At(TraceEvent::Kind::kTookWorker, 1), done0);
  EXPECT_GT(t.Attempts(0).size(), 1u);
  EXPECT_EQ(r->delivered, 2);
}

TEST(PoolTest, AWaitingClientHoldsNoWorkerWhileTheCoordinatorHoldsItsCall) {
  Scenario s = TwoDeliveries(1);
  s.engine_policy.breaker.enabled = false;  // every failure: PROCEED(delay)
  Timeline t;
  absl::StatusOr<PolicyResult> r = Simulate(s, Policy::kCoordinated, t.Fn());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->deferrals, 0);
  // Delivery 0's first attempt fails at 0.25 s; its backoff becomes a
  // waiting Admit held by the coordinator, and its worker goes to
  // delivery 1 at once, which is delivered while #0 is still down.
  EXPECT_EQ(t.At(TraceEvent::Kind::kFreedWorker, 0), Ms(250));
  EXPECT_EQ(t.At(TraceEvent::Kind::kTookWorker, 1), Ms(250));
  EXPECT_EQ(t.At(TraceEvent::Kind::kDelivered, 1), Ms(500));
  EXPECT_GT(r->held, 0);
  // Each of delivery 0's retries took a worker again when its wait ended.
  EXPECT_GT(t.Attempts(0).size(), 1u);
  EXPECT_GT(t.At(TraceEvent::Kind::kTookWorker, 0, 1), Ms(250));
  EXPECT_GT(t.At(TraceEvent::Kind::kDelivered, 0), Ms(10000));
  EXPECT_EQ(r->delivered, 2);
}

// Four endpoints (#0 down for 5 s), 400 deliveries, 20 workers.
Scenario SharedPool() {
  Scenario s;
  s.subscriptions = 400;
  s.workers = 1;
  s.endpoints = {OutageEndpoint(absl::Seconds(5)), EndpointSpec{},
                 EndpointSpec{}, EndpointSpec{}};
  s.concurrency = 20;
  s.seed = 11;
  return s;
}

class PoolInvariantTest : public ::testing::TestWithParam<Policy> {};

TEST_P(PoolInvariantTest, NoMoreThanTheWorkersAtOnceAndOnlyWorkersSend) {
  const Scenario s = SharedPool();
  std::vector<bool> holding(s.subscriptions, false);
  std::vector<int> taken(s.subscriptions, 0);
  int held = 0, most = 0;
  bool sent_without_worker = false, double_take = false, bad_free = false;
  absl::StatusOr<PolicyResult> r =
      Simulate(s, GetParam(), [&](const TraceEvent& e) {
        switch (e.kind) {
          case TraceEvent::Kind::kTookWorker:
            if (holding[e.delivery]) double_take = true;
            holding[e.delivery] = true;
            ++taken[e.delivery];
            most = std::max(most, ++held);
            break;
          case TraceEvent::Kind::kFreedWorker:
            if (!holding[e.delivery]) bad_free = true;
            holding[e.delivery] = false;
            --held;
            break;
          case TraceEvent::Kind::kAttempt:
            if (!holding[e.delivery]) sent_without_worker = true;
            break;
          default:
            break;
        }
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LE(most, s.concurrency);
  EXPECT_EQ(most, s.concurrency);  // the pool was the bottleneck
  EXPECT_FALSE(sent_without_worker);
  EXPECT_FALSE(double_take);
  EXPECT_FALSE(bad_free);
  EXPECT_EQ(held, 0);  // every worker came back
  EXPECT_GT(r->peak_waiting_for_worker, 0);
  if (GetParam() != Policy::kCoordinated) {
    // An independent client takes a worker once and keeps it to the end.
    for (int i = 0; i < s.subscriptions; ++i) EXPECT_EQ(taken[i], 1) << i;
  }
  EXPECT_EQ(r->unfinished, 0);
  EXPECT_EQ(r->delivered + r->given_up, s.subscriptions);
  EXPECT_TRUE(r->healthy_time_to_99_s.has_value());
}

INSTANTIATE_TEST_SUITE_P(
    EveryPolicy, PoolInvariantTest, ::testing::ValuesIn(kAllPolicies),
    [](const ::testing::TestParamInfo<Policy>& info) {
      return std::string(PolicyKey(info.param));
    });

TEST(PoolTest, AWorkerPerDeliveryIsTheSameAsUnlimited) {
  for (Policy p : kAllPolicies) {
    Scenario unlimited = SharedPool();
    unlimited.concurrency = 0;
    Scenario one_each = unlimited;
    one_each.concurrency = one_each.subscriptions;
    absl::StatusOr<PolicyResult> a = Simulate(unlimited, p);
    absl::StatusOr<PolicyResult> b = Simulate(one_each, p);
    ASSERT_TRUE(a.ok() && b.ok()) << PolicyKey(p);
    EXPECT_EQ(a->attempts_per_bucket, b->attempts_per_bucket) << PolicyKey(p);
    EXPECT_EQ(a->delivered, b->delivered) << PolicyKey(p);
    EXPECT_EQ(a->time_to_99_s, b->time_to_99_s) << PolicyKey(p);
    EXPECT_EQ(a->healthy_time_to_99_s, b->healthy_time_to_99_s) << PolicyKey(p);
    EXPECT_EQ(b->peak_waiting_for_worker, 0) << PolicyKey(p);
  }
}

TEST(PoolTest, TheSameSeedGivesTheSameRunAndAnotherSeedDoesNot) {
  for (Policy p : {Policy::kFullJitter, Policy::kCoordinated}) {
    Scenario s = SharedPool();
    absl::StatusOr<PolicyResult> a = Simulate(s, p);
    absl::StatusOr<PolicyResult> b = Simulate(s, p);
    s.seed = 12;
    absl::StatusOr<PolicyResult> c = Simulate(s, p);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_EQ(a->attempts_per_bucket, b->attempts_per_bucket) << PolicyKey(p);
    EXPECT_EQ(a->healthy_time_to_99_s, b->healthy_time_to_99_s) << PolicyKey(p);
    EXPECT_EQ(a->events, b->events) << PolicyKey(p);
    EXPECT_NE(a->attempts_per_bucket, c->attempts_per_bucket) << PolicyKey(p);
  }
}

// --- Failure schedules: a flapping endpoint -------------------------------

TEST(FlappingTest, CyclesAreLaidOutFromTZero) {
  const std::vector<DownInterval> d =
      Flapping(absl::Seconds(5), absl::Seconds(3), 4);
  ASSERT_EQ(d.size(), 4u);
  const int64_t starts[] = {0, 8, 16, 24};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(d[i].start, absl::Seconds(starts[i])) << i;
    EXPECT_EQ(d[i].end, absl::Seconds(starts[i] + 5)) << i;
  }
  Scenario s;
  s.endpoints[0].down = d;
  EXPECT_EQ(Recovery(s), absl::Seconds(29));
}

class FlappingAccountingTest : public ::testing::TestWithParam<Policy> {};

TEST_P(FlappingAccountingTest, AttemptsFailExactlyInsideTheDownIntervals) {
  // Down 1.2 s, up 50 ms, six times: [0, 1.2 s), [1.25 s, 2.45 s), ...,
  // [6.25 s, 7.45 s). The up windows are short enough that every policy
  // here (immediate retries every 250 ms included) also fails after one.
  Scenario s;
  s.subscriptions = 300;
  s.workers = 1;
  s.endpoints[0].down =
      Flapping(absl::Milliseconds(1200), absl::Milliseconds(50), 6);
  const int64_t recovery = Ms(7450);
  ASSERT_EQ(Recovery(s), absl::Nanoseconds(recovery));
  s.seed = 5;
  auto down = [&s](int64_t t) {
    for (const DownInterval& d : s.endpoints[0].down) {
      if (t >= absl::ToInt64Nanoseconds(d.start) &&
          t < absl::ToInt64Nanoseconds(d.end)) {
        return true;
      }
    }
    return false;
  };
  int64_t mismatches = 0, failed_after_an_up_window = 0;
  int64_t failed_first = 0, failed_retries = 0, attempts = 0;
  std::vector<int64_t> delivered_at;
  absl::StatusOr<PolicyResult> r =
      Simulate(s, GetParam(), [&](const TraceEvent& e) {
        if (e.kind == TraceEvent::Kind::kDelivered) {
          delivered_at.push_back(e.time_ns);
        }
        if (e.kind != TraceEvent::Kind::kAttempt) return;
        ++attempts;
        if (e.failed != down(e.time_ns)) ++mismatches;
        if (e.failed && e.time_ns >= Ms(1250)) ++failed_after_an_up_window;
        if (e.failed) ++(e.attempt == 1 ? failed_first : failed_retries);
      });
  ASSERT_TRUE(r.ok()) << r.status();
  // Unlimited capacity: an attempt fails if and only if it lands while down,
  // in any of the six intervals (not only the first).
  EXPECT_EQ(mismatches, 0);
  EXPECT_GT(failed_after_an_up_window, 0);
  EXPECT_EQ(r->attempts, attempts);
  EXPECT_EQ(r->failed_first_attempts, failed_first);
  EXPECT_EQ(r->wasted_attempts, failed_retries);
  EXPECT_EQ(r->delivered + r->given_up, s.subscriptions);
  EXPECT_EQ(r->unfinished, 0);
  // Times to 99% count from the end of the last interval; 99% that came
  // before it (in the up windows) reads 0.
  ASSERT_GE(delivered_at.size(), 297u);
  std::sort(delivered_at.begin(), delivered_at.end());
  ASSERT_TRUE(r->time_to_99_s.has_value());
  EXPECT_DOUBLE_EQ(*r->time_to_99_s,
                   std::max<int64_t>(0, delivered_at[296] - recovery) / 1e9);
}

INSTANTIATE_TEST_SUITE_P(
    SomePolicies, FlappingAccountingTest,
    ::testing::Values(Policy::kNoBackoff, Policy::kExponential,
                      Policy::kFullJitter, Policy::kCoordinated),
    [](const ::testing::TestParamInfo<Policy>& info) {
      return std::string(PolicyKey(info.param));
    });

// --- Several endpoints -----------------------------------------------------

TEST(EndpointsTest, DeliveriesAreAssignedRoundRobinOrByShare) {
  Scenario s;
  s.subscriptions = 7;
  s.endpoints.resize(3);
  EXPECT_THAT(AssignEndpoints(s), ElementsAre(0, 1, 2, 0, 1, 2, 0));
  s.subscriptions = 1000;
  s.endpoints[2].share = 2;
  std::map<int, int> count;
  for (int e : AssignEndpoints(s)) ++count[e];
  EXPECT_EQ(count[0], 250);
  EXPECT_EQ(count[1], 250);
  EXPECT_EQ(count[2], 500);
}

class EndpointsAccountingTest : public ::testing::TestWithParam<Policy> {};

TEST_P(EndpointsAccountingTest, NothingIsLostAndEveryEndpointAddsUp) {
  // #0 down 5 s (500); #1 down [2 s, 6 s) with 503 + Retry-After 1 s;
  // #2 always up but 100/s. A pool of 50 workers.
  Scenario s;
  s.subscriptions = 600;
  s.workers = 2;
  EndpointSpec flaky = OutageEndpoint(absl::ZeroDuration(), 0, absl::Seconds(1));
  flaky.down = {{absl::Seconds(2), absl::Seconds(6)}};
  EndpointSpec slow;
  slow.capacity_per_second = 100;
  s.endpoints = {OutageEndpoint(absl::Seconds(5)), flaky, slow};
  s.concurrency = 50;
  s.seed = 9;
  const std::vector<int> assigned = AssignEndpoints(s);
  bool wrong_endpoint = false;
  absl::StatusOr<PolicyResult> r =
      Simulate(s, GetParam(), [&](const TraceEvent& e) {
        if (e.endpoint != assigned[e.delivery]) wrong_endpoint = true;
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(wrong_endpoint);
  EXPECT_EQ(r->unfinished, 0);
  EXPECT_EQ(r->delivered + r->given_up, s.subscriptions);
  ASSERT_EQ(r->per_endpoint.size(), 3u);
  PolicyResult::PerEndpoint sum;
  for (const PolicyResult::PerEndpoint& e : r->per_endpoint) {
    EXPECT_EQ(e.deliveries, 200);
    EXPECT_EQ(e.delivered + e.given_up, e.deliveries);
    sum.delivered += e.delivered;
    sum.given_up += e.given_up;
    sum.attempts += e.attempts;
    sum.wasted_attempts += e.wasted_attempts;
  }
  EXPECT_EQ(sum.delivered, r->delivered);
  EXPECT_EQ(sum.given_up, r->given_up);
  EXPECT_EQ(sum.attempts, r->attempts);
  EXPECT_EQ(sum.wasted_attempts, r->wasted_attempts);
  EXPECT_EQ(Recovery(s), absl::Seconds(6));
}

INSTANTIATE_TEST_SUITE_P(
    EveryPolicy, EndpointsAccountingTest, ::testing::ValuesIn(kAllPolicies),
    [](const ::testing::TestParamInfo<Policy>& info) {
      return std::string(PolicyKey(info.param));
    });

// --- Validation ------------------------------------------------------------

TEST(ScenarioModelTest, BadEndpointsAndPoolsAreNamed) {
  Scenario s;
  s.endpoints[0].down = {{absl::Seconds(0), absl::Seconds(5)},
                         {absl::Seconds(4), absl::Seconds(8)}};  // overlaps
  s.endpoints.push_back(EndpointSpec{});
  s.endpoints[1].share = 0;
  s.endpoints[1].capacity_per_second = -1;
  s.concurrency = -1;
  const absl::Status st = ValidateScenario(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("endpoints[0].down[1]:"));
  EXPECT_THAT(st.message(), HasSubstr("endpoints[1].share:"));
  EXPECT_THAT(st.message(), HasSubstr("endpoints[1].capacity_per_second:"));
  EXPECT_THAT(st.message(), HasSubstr("concurrency:"));

  Scenario none;
  none.endpoints.clear();
  EXPECT_THAT(ValidateScenario(none).message(), HasSubstr("endpoints:"));

  Scenario late;
  late.endpoints[0].down = {{absl::Hours(1), absl::Hours(3)}};
  EXPECT_THAT(ValidateScenario(late).message(), HasSubstr("max_virtual_time:"));

  Scenario ok;
  ok.endpoints = {EndpointSpec{}};  // always up
  EXPECT_TRUE(ValidateScenario(ok).ok());
  EXPECT_EQ(Recovery(ok), absl::ZeroDuration());
}

}  // namespace
}  // namespace stagger::sim
