// Tests for stagger-sim's core (bench/sim/sim.h, report.h): the accounting
// (every attempt counted once, every delivery ends exactly once with a reason,
// the virtual clock never goes back), determinism per seed, the output formats,
// and — on a scenario scaled down tenfold — the orderings the table must show
// (independent peaks falling from no backoff to the jittered policies, a budget
// cutting waste tenfold, the coordinated row wasting least and losing nothing).
// No real time passes anywhere: the simulator runs on a virtual clock, so
// nothing here depends on the machine's speed.
#include <algorithm>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/sim/matrix.h"
#include "bench/sim/report.h"
#include "bench/sim/sim.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/bench/sim/policy_printer.h"

namespace stagger::sim {
namespace {

using ::testing::HasSubstr;

// The engine policy these tests were written against (the coordinated
// row's before it ran on the engine's defaults): breaker open 1 s..4 s and
// a release pace of at most 700/s. Set explicitly, so that what the tests
// assert does not move with the engine's defaults; the matrix
// (matrix_test.cc) is where the defaults are measured.
engine::PolicyParams PinnedEngine() {
  engine::PolicyParams p;
  p.breaker.open_base = absl::Seconds(1);
  p.breaker.open_max = absl::Seconds(4);
  p.deferral.release_rate_per_second = 700;
  return p;
}

// The default scenario (sim::Scenario) scaled by 1/10: 1,000 deliveries, one
// worker process (so each process's budget sees the same 1,000 deliveries as in
// the default's 10 processes x 1,000), and the coordinated row's release rate
// scaled with the fleet (700/s -> 65/s). Outage, base, cap, horizon and
// response time are the defaults.
Scenario Small(uint64_t seed = 7) {
  Scenario s;
  s.subscriptions = 1000;
  s.workers = 1;
  s.engine_policy = PinnedEngine();
  s.engine_policy.deferral.release_rate_per_second = 65;
  s.seed = seed;
  return s;
}

const PolicyResult& Row(const std::vector<PolicyResult>& rows, Policy p) {
  for (const PolicyResult& r : rows) {
    if (r.policy == p) return r;
  }
  ADD_FAILURE() << "no row for " << PolicyKey(p);
  return rows.front();
}

std::vector<Policy> All() {
  return std::vector<Policy>(kAllPolicies.begin(), kAllPolicies.end());
}

// --- Accounting ------------------------------------------------------------

class AccountingTest : public ::testing::TestWithParam<Policy> {};

TEST_P(AccountingTest, EveryAttemptIsCountedOnceAndEveryDeliveryEndsOnce) {
  Scenario s = Small();
  s.subscriptions = 300;
  s.engine_policy.deferral.release_rate_per_second = 20;
  struct PerDelivery {
    int last_attempt = 0;  // attempts seen so far, numbered 1, 2, ...
    int endings = 0;       // kDelivered + kGaveUp events
    bool attempt_after_end = false;
  };
  std::vector<PerDelivery> seen(s.subscriptions);
  int64_t traced_attempts = 0, traced_failed_retries = 0;
  int64_t traced_delivered = 0, traced_given_up = 0;
  int64_t previous_time = 0;
  bool time_went_back = false;
  bool attempts_in_order = true;
  std::map<engine::Reason, int64_t> reasons;

  absl::StatusOr<PolicyResult> r =
      Simulate(s, GetParam(), [&](const TraceEvent& e) {
        if (e.time_ns < previous_time) time_went_back = true;
        previous_time = e.time_ns;
        PerDelivery& d = seen[e.delivery];
        switch (e.kind) {
          case TraceEvent::Kind::kAttempt:
            ++traced_attempts;
            if (e.failed && e.attempt >= 2) ++traced_failed_retries;
            // Attempts of one delivery are numbered 1, 2, 3, ... with no
            // gap and no repeat: each is sent (and counted) once.
            if (e.attempt != d.last_attempt + 1) attempts_in_order = false;
            d.last_attempt = e.attempt;
            if (d.endings > 0) d.attempt_after_end = true;
            break;
          case TraceEvent::Kind::kDelivered:
            ++traced_delivered;
            ++d.endings;
            break;
          case TraceEvent::Kind::kGaveUp:
            ++traced_given_up;
            ++d.endings;
            ++reasons[e.reason];
            break;
          case TraceEvent::Kind::kTookWorker:
          case TraceEvent::Kind::kFreedWorker:
            break;  // pool_test.cc
        }
      });
  ASSERT_TRUE(r.ok()) << r.status();

  // The trace and the result agree, attempt for attempt.
  EXPECT_TRUE(attempts_in_order);
  EXPECT_EQ(r->attempts, traced_attempts);
  EXPECT_EQ(r->wasted_attempts, traced_failed_retries);
  int64_t bucketed = 0;
  for (int64_t c : r->attempts_per_bucket) bucketed += c;
  EXPECT_EQ(bucketed, r->attempts);  // each attempt lands in one bucket
  // Every delivery made exactly one first attempt (all are created at t=0,
  // before anyone can know the endpoint is down).
  EXPECT_EQ(r->first_attempts, s.subscriptions);
  EXPECT_EQ(r->failed_first_attempts, s.subscriptions);

  // Nothing is lost: every delivery ends exactly once, delivered or given
  // up, and nothing is sent after the end.
  EXPECT_EQ(r->unfinished, 0);
  EXPECT_EQ(r->delivered + r->given_up, s.subscriptions);
  EXPECT_EQ(r->delivered, traced_delivered);
  EXPECT_EQ(r->given_up, traced_given_up);
  for (int i = 0; i < s.subscriptions; ++i) {
    EXPECT_EQ(seen[i].endings, 1) << "delivery " << i;
    EXPECT_FALSE(seen[i].attempt_after_end) << "delivery " << i;
  }
  // Every give-up has a reason, and the reasons add up.
  int64_t by_reason = 0;
  for (int64_t c : r->given_up_by_reason) by_reason += c;
  EXPECT_EQ(by_reason, r->given_up);
  for (const auto& [reason, count] : reasons) {
    EXPECT_EQ(r->given_up_by_reason[static_cast<int>(reason)], count);
    EXPECT_NE(reason, engine::Reason::kSucceeded);
  }

  // The virtual clock only moves forward.
  EXPECT_FALSE(time_went_back);
  EXPECT_EQ(r->clock_regressions, 0);
}

INSTANTIATE_TEST_SUITE_P(
    EveryPolicy, AccountingTest, ::testing::ValuesIn(kAllPolicies),
    [](const ::testing::TestParamInfo<Policy>& info) {
      return std::string(PolicyKey(info.param));
    });

TEST(CoordinatedTest, EveryAttemptIsAdmittedAndReportedOnce) {
  absl::StatusOr<PolicyResult> r = Simulate(Small(), Policy::kCoordinated);
  ASSERT_TRUE(r.ok()) << r.status();
  // One Report per attempt sent, by the coordinator or by an agent under
  // a lease, no more, no fewer.
  EXPECT_EQ(r->reports + r->local_reports, r->attempts);
  // One Admit before every attempt, plus the Admits that were deferred or
  // given up instead.
  EXPECT_GE(r->admits + r->local_admits, r->attempts);
  EXPECT_GT(r->deferrals, 0);  // the breaker parked the fleet
  EXPECT_GT(r->deferred_by_reason[static_cast<int>(engine::Reason::kCircuitOpen)],
            0);
  // Every message to or from the coordinator is counted once.
  EXPECT_EQ(r->coordinator_messages,
            r->admits + r->reports + r->sync_up + r->sync_down);
  EXPECT_DOUBLE_EQ(r->messages_per_delivery,
                   static_cast<double>(r->coordinator_messages) / 1000);
}

TEST(CoordinatedTest, WaitingCallsAreHeldAndReleasedOnEvidence) {
  // Parked deliveries wait with the coordinator; when the probes show the
  // endpoint is back, held calls go before their waits run out (RELEASED).
  absl::StatusOr<PolicyResult> r = Simulate(Small(), Policy::kCoordinated);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_GT(r->waiting_admits, 0);
  EXPECT_GT(r->held, 0);
  EXPECT_GT(r->released, 0);
  EXPECT_GT(r->expired, 0);  // checked in during the outage
  EXPECT_EQ(r->held, r->released + r->expired);  // none left at the end
  EXPECT_LE(r->peak_held, 1000);
  EXPECT_EQ(r->delivered, 1000);
}

TEST(CoordinatedTest, TheOldClientNeverWaitsWithTheCoordinator) {
  Scenario s = Small();
  s.waiting_admission = false;
  absl::StatusOr<PolicyResult> old = Simulate(s, Policy::kCoordinated);
  absl::StatusOr<PolicyResult> waiting = Simulate(Small(), Policy::kCoordinated);
  ASSERT_TRUE(old.ok() && waiting.ok());
  EXPECT_EQ(old->waiting_admits, 0);
  EXPECT_EQ(old->held, 0);
  EXPECT_EQ(old->delivered, 1000);
  // Released on evidence instead of at their next check-in, the waiting
  // fleet is delivered no later.
  ASSERT_TRUE(old->time_to_99_s && waiting->time_to_99_s);
  EXPECT_LE(*waiting->time_to_99_s, *old->time_to_99_s);
}

TEST(IndependentTest, ClientsNeverCallTheEngine) {
  absl::StatusOr<PolicyResult> r = Simulate(Small(), Policy::kFullJitter);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->admits, 0);
  EXPECT_EQ(r->reports, 0);
}

TEST(RetryAfterTest, TheDownEndpointsRetryAfterIsHonouredAndNothingIsLost) {
  // The down endpoint answers 503 + Retry-After: 5s. Independent clients
  // honour it above their computed delay; the engine remembers it for the
  // whole fleet. Paced 503s do not trip the breaker, so the retry budget
  // is what holds the fleet back here: at full size (10,000 deliveries) a
  // budget that books deferrals at its own 10/s would push most of them
  // past the horizon.
  Scenario s;
  s.endpoints[0].down_retry_after = absl::Seconds(5);
  s.engine_policy = PinnedEngine();
  absl::StatusOr<std::vector<PolicyResult>> rows =
      SimulateAll(s, {Policy::kExponential, Policy::kCoordinated});
  ASSERT_TRUE(rows.ok()) << rows.status();
  // Plain exponential would send 7 attempts in 20 s; waiting >= 5 s between
  // them leaves at most 4 inside the outage (at ~0, 5.25, 10.5, 15.75 s).
  EXPECT_LE(Row(*rows, Policy::kExponential).wasted_attempts, 3 * s.subscriptions);
  const PolicyResult& c = Row(*rows, Policy::kCoordinated);
  EXPECT_GT(c.deferred_by_reason[static_cast<int>(engine::Reason::kRetryAfterWindow)],
            0);
  EXPECT_EQ(c.delivered, s.subscriptions);
}

// --- Determinism -----------------------------------------------------------

TEST(DeterminismTest, TheSameSeedGivesTheSameTableAndAnotherSeedDoesNot) {
  absl::StatusOr<std::vector<PolicyResult>> a = SimulateAll(Small(7), All());
  absl::StatusOr<std::vector<PolicyResult>> b = SimulateAll(Small(7), All());
  absl::StatusOr<std::vector<PolicyResult>> c = SimulateAll(Small(8), All());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(FormatCsv(*a), FormatCsv(*b));
  EXPECT_EQ(FormatMarkdown(Small(7), *a), FormatMarkdown(Small(7), *b));
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].attempts_per_bucket, (*b)[i].attempts_per_bucket)
        << PolicyKey((*a)[i].policy);
  }
  EXPECT_NE(FormatCsv(*a), FormatCsv(*c));
}

TEST(DeterminismTest, ARowDoesNotDependOnWhichOtherRowsRan) {
  absl::StatusOr<std::vector<PolicyResult>> all = SimulateAll(Small(), All());
  absl::StatusOr<PolicyResult> alone = Simulate(Small(), Policy::kEqualJitter);
  ASSERT_TRUE(all.ok() && alone.ok());
  EXPECT_EQ(Row(*all, Policy::kEqualJitter).attempts_per_bucket,
            alone->attempts_per_bucket);
}

// --- Output ----------------------------------------------------------------

TEST(FormatTest, CsvHasExactlyTheHeaderAndOneLinePerPolicy) {
  absl::StatusOr<std::vector<PolicyResult>> rows = SimulateAll(Small(), All());
  ASSERT_TRUE(rows.ok());
  const std::string csv = FormatCsv(*rows);
  std::vector<std::string> lines =
      absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1 + kAllPolicies.size());
  // Today's columns keep their order; the new ones come after them.
  EXPECT_EQ(lines[0],
            "policy,peak_rps_outage,peak_rps_recovery,time_to_99_s,"
            "wasted_attempts,delivered,given_up,recovery_to_99_s,limit_s,"
            "messages_per_delivery");
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    EXPECT_EQ(cells.size(), 10u) << lines[i];
    EXPECT_EQ(cells[0], PolicyKey(kAllPolicies[i - 1]));
    // Only the coordinated row talks to a coordinator.
    EXPECT_EQ(cells[9] == "0.00", kAllPolicies[i - 1] != Policy::kCoordinated)
        << lines[i];
  }
  // No backoff gives up inside the outage: its time to 99% is "inf".
  EXPECT_THAT(lines[1], HasSubstr(",inf,"));
}

TEST(FormatTest, MarkdownSaysNeverAndExplainsEveryGiveUp) {
  absl::StatusOr<std::vector<PolicyResult>> rows =
      SimulateAll(Small(), {Policy::kNoBackoff, Policy::kFullJitter});
  ASSERT_TRUE(rows.ok());
  const std::string md = FormatMarkdown(Small(), *rows);
  EXPECT_THAT(md, HasSubstr("| No backoff (immediate retry) | 4,000 | 0 | never |"));
  EXPECT_THAT(md, HasSubstr("gave up: ATTEMPTS_EXHAUSTED 1,000"));
}

TEST(FormatTest, ThePlotHasALinePerPolicyTheOutageAxesAndALegend) {
  absl::StatusOr<std::vector<PolicyResult>> rows = SimulateAll(Small(), All());
  ASSERT_TRUE(rows.ok());
  const std::string svg = RenderSvg(Small(), *rows);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  size_t lines = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, kAllPolicies.size());
  EXPECT_THAT(svg, HasSubstr("endpoint down (outage)"));
  EXPECT_THAT(svg, HasSubstr("time since the outage began (s)"));
  EXPECT_THAT(svg, HasSubstr("attempts per second (log scale"));
  for (Policy p : kAllPolicies) EXPECT_THAT(svg, HasSubstr(PolicyTitle(p)));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
}

// --- Scenario --------------------------------------------------------------

TEST(ScenarioTest, BadFieldsAreAllNamed) {
  Scenario s;
  s.subscriptions = 0;
  s.cap = absl::Milliseconds(100);  // below base
  s.max_attempts = 101;             // above the engine's range
  s.workers = 0;
  const absl::Status st = ValidateScenario(s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("subscriptions:"));
  EXPECT_THAT(st.message(), HasSubstr("cap:"));
  EXPECT_THAT(st.message(), HasSubstr("max_attempts:"));
  EXPECT_THAT(st.message(), HasSubstr("workers:"));
  EXPECT_FALSE(Simulate(s, Policy::kFullJitter).ok());
}

TEST(ScenarioTest, TheOpeningWaveEndsWhenRetryIntervalsOutgrowTheBucket) {
  Scenario s;
  // Plain exponential: attempt 1 answered at 0.25 s; retries 0.2, 0.4 and
  // 0.8 s apart, each answered 0.25 s later: 2.4 s; the next interval
  // (1.6 s) is longer than the 1 s bucket. Rounded up to a bucket: 3 s.
  EXPECT_EQ(OpeningWave(s), absl::Seconds(3));
  s.opening_wave = absl::Seconds(1);
  EXPECT_EQ(OpeningWave(s), absl::Seconds(1));
}

// --- The table's orderings, on the scaled-down scenario --------------------

class OrderingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::vector<PolicyResult>> r = SimulateAll(Small(), All());
    ASSERT_TRUE(r.ok()) << r.status();
    rows_ = new std::vector<PolicyResult>(*std::move(r));
  }
  static void TearDownTestSuite() { delete rows_; }
  static const PolicyResult& Get(Policy p) { return Row(*rows_, p); }
  static std::vector<PolicyResult>* rows_;
};
std::vector<PolicyResult>* OrderingTest::rows_ = nullptr;

TEST_F(OrderingTest, OutagePeaksFallFromNoBackoffToJitter) {
  const double none = Get(Policy::kNoBackoff).peak_rps_outage;
  const double plain = Get(Policy::kExponential).peak_rps_outage;
  const double equal = Get(Policy::kEqualJitter).peak_rps_outage;
  const double full = Get(Policy::kFullJitter).peak_rps_outage;
  const double decorrelated = Get(Policy::kDecorrelatedJitter).peak_rps_outage;
  // none > plain > equal > full ~ decorrelated
  EXPECT_GT(none, plain);
  EXPECT_GT(plain, equal);
  EXPECT_GT(equal, full);
  EXPECT_GT(equal, decorrelated);
  EXPECT_LT(std::max(full, decorrelated) / std::min(full, decorrelated), 1.5);
  // Plain exponential's herd is the whole fleet, in one bucket.
  EXPECT_EQ(plain, 1000);
}

TEST_F(OrderingTest, PlainBackoffIsStillAHerdAtRecoveryAndJitterIsNot) {
  const PolicyResult& plain = Get(Policy::kExponential);
  EXPECT_EQ(plain.peak_rps_recovery, plain.peak_rps_outage);
  EXPECT_LT(Get(Policy::kEqualJitter).peak_rps_recovery,
            plain.peak_rps_recovery);
  EXPECT_LT(Get(Policy::kFullJitter).peak_rps_recovery,
            Get(Policy::kEqualJitter).peak_rps_recovery);
}

TEST_F(OrderingTest, TheBudgetCutsFullJittersWasteByAnOrderOfMagnitude) {
  const int64_t full = Get(Policy::kFullJitter).wasted_attempts;
  const int64_t budget = Get(Policy::kFullJitterBudget).wasted_attempts;
  EXPECT_GT(budget, 0);
  EXPECT_LE(budget * 10, full);
}

TEST_F(OrderingTest, CoordinatedWastesATenthOfTheBudgetRow) {
  EXPECT_LE(Get(Policy::kCoordinated).wasted_attempts * 10,
            Get(Policy::kFullJitterBudget).wasted_attempts);
}

TEST_F(OrderingTest, CoordinatedRecoversNoHarderThanFullJitter) {
  EXPECT_LE(Get(Policy::kCoordinated).peak_rps_recovery,
            Get(Policy::kFullJitter).peak_rps_recovery);
}

TEST_F(OrderingTest, CoordinatedLosesNothing) {
  const PolicyResult& c = Get(Policy::kCoordinated);
  EXPECT_EQ(c.unfinished, 0);
  EXPECT_EQ(c.given_up, 0);
  EXPECT_EQ(c.delivered, 1000);
}

TEST_F(OrderingTest, CoordinatedDeliversSoonerThanEveryJitteredRow) {
  // Plain exponential is left out on purpose: with unlimited capacity its
  // synchronised herd lands all at once (peak = the whole fleet), which no
  // policy held to full jitter's recovery peak can match (docs/SIMULATOR.md).
  const PolicyResult& c = Get(Policy::kCoordinated);
  ASSERT_TRUE(c.time_to_99_s.has_value());
  for (Policy p : {Policy::kEqualJitter, Policy::kFullJitter,
                   Policy::kDecorrelatedJitter, Policy::kFullJitterBudget}) {
    const PolicyResult& r = Get(p);
    if (!r.time_to_99_s.has_value()) continue;  // never: coordinated wins
    EXPECT_LE(*c.time_to_99_s, *r.time_to_99_s) << PolicyKey(p);
  }
}

TEST(CapacityTest, ALimitedEndpointBreaksPlainBackoffsHerdButNotStagger) {
  // After recovery the endpoint answers at most 200 attempts/s; above that
  // it fails like an overloaded server.
  Scenario s = Small();
  s.endpoints[0].capacity_per_second = 200;
  absl::StatusOr<std::vector<PolicyResult>> rows =
      SimulateAll(s, {Policy::kExponential, Policy::kCoordinated});
  ASSERT_TRUE(rows.ok()) << rows.status();
  const PolicyResult& plain = Row(*rows, Policy::kExponential);
  const PolicyResult& c = Row(*rows, Policy::kCoordinated);
  EXPECT_GT(plain.given_up, 0);  // its herd keeps failing past the horizon
  EXPECT_EQ(c.delivered, s.subscriptions);
  ASSERT_TRUE(c.time_to_99_s.has_value());
}

TEST(CapacityTest, AFullSizeFleetAgainstAFiniteCapacityIsStillDelivered) {
  // The full default scenario (10,000 deliveries, release rate 700/s) with
  // an endpoint that answers only 500 or 300 attempts/s after recovery: the
  // parked backlog comes back faster than that, the overload 503s (no
  // Retry-After, below the breaker's ratio at 500/s) halve the engine's
  // release pace instead of emptying the retry budget, and Stagger delivers
  // like full jitter does (before the adaptive pace: 54% and 20%).
  for (double capacity : {500.0, 300.0}) {
    Scenario s;
    s.engine_policy = PinnedEngine();
    s.endpoints[0].capacity_per_second = capacity;
    absl::StatusOr<PolicyResult> r = Simulate(s, Policy::kCoordinated);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GE(r->delivered, s.subscriptions * 99 / 100) << capacity;
    EXPECT_EQ(r->delivered + r->given_up, s.subscriptions) << capacity;
    EXPECT_EQ(r->unfinished, 0) << capacity;
    EXPECT_TRUE(r->time_to_99_s.has_value()) << capacity;
    // The release pace, not the budget, held the backlog back.
    EXPECT_EQ(r->deferred_by_reason[static_cast<int>(
                  engine::Reason::kBudgetExhausted)], 0) << capacity;
  }
}

// A tenant's endpoint dead for a week, with disable.after_unavailable 72 h:
// the coordinated fleet stops sending the moment the endpoint is disabled
// (every delivery created after it is dead-lettered at its first Admit),
// while independent clients go on sending for the rest of the week.
TEST(DeadWeekTest, NoAttemptAfterTheDisable) {
  std::optional<MatrixScenario> m = FindMatrixScenario("dead_week_disable_72h", 1);
  ASSERT_TRUE(m.has_value());
  absl::StatusOr<PolicyResult> c = Simulate(m->scenario, Policy::kCoordinated);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->disabled_s.has_value());
  EXPECT_GE(*c->disabled_s, 72 * 3600.0);
  EXPECT_LE(*c->disabled_s, 72 * 3600.0 + 600) << "within minutes of 72 h";
  EXPECT_EQ(c->attempts_after_disable, 0);
  const double after_h = 168 - *c->disabled_s / 3600;  // hours disabled
  const int64_t disabled_deliveries =
      c->given_up_by_reason[static_cast<int>(engine::Reason::kEndpointDisabled)];
  EXPECT_GE(disabled_deliveries, static_cast<int64_t>(after_h * 60) - 2);
  EXPECT_EQ(c->unfinished, 0);
  // Full jitter, for contrast: attempts all week long.
  absl::StatusOr<PolicyResult> fj = Simulate(m->scenario, Policy::kFullJitter);
  ASSERT_TRUE(fj.ok()) << fj.status();
  EXPECT_FALSE(fj->disabled_s.has_value());
  int64_t late = 0;
  const size_t from = static_cast<size_t>(*c->disabled_s);  // 1 s buckets
  for (size_t b = from; b < fj->attempts_per_bucket.size(); ++b) {
    late += fj->attempts_per_bucket[b];
  }
  EXPECT_GT(late, 50000) << "independent clients keep sending";
}

}  // namespace
}  // namespace stagger::sim
