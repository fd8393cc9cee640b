// Tests for stagger-sim --matrix (bench/sim/matrix.h): the grid covers its
// dimensions (fleet size, outage length, capacity, 500 vs 503 + Retry-After,
// flapping, a shared pool), every scenario and policy is listed, the CSV header
// is exact, the bar's arithmetic (on made-up rows, so it does not depend on the
// engine's numbers), aggregation over seeds, and determinism. The full matrix
// is not run here (it takes tens of seconds); RunMatrix is run on scaled-down
// grid scenarios. Nothing here asserts that the bar is met.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
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

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n');
}

// --- The grid ----------------------------------------------------------------

TEST(GridTest, KeysAreShortUniqueSnakeCase) {
  const std::vector<MatrixScenario> g = MatrixGrid(1);
  EXPECT_GE(g.size(), 12u);
  EXPECT_LE(g.size(), 24u);
  std::set<std::string> keys;
  for (const MatrixScenario& m : g) {
    EXPECT_TRUE(keys.insert(m.key).second) << "duplicate " << m.key;
    EXPECT_FALSE(m.key.empty());
    EXPECT_LE(m.key.size(), 40u) << m.key;
    for (char c : m.key) {
      EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')
          << m.key;
    }
    EXPECT_TRUE(FindMatrixScenario(m.key, 1).has_value()) << m.key;
  }
  EXPECT_FALSE(FindMatrixScenario("no_such_scenario", 1).has_value());
}

TEST(GridTest, EveryScenarioIsValidSeededAndOnTheEnginesDefaults) {
  const engine::PolicyParams defaults;
  for (const MatrixScenario& m : MatrixGrid(42)) {
    const Scenario& s = m.scenario;
    EXPECT_TRUE(ValidateScenario(s).ok()) << m.key << ": "
                                          << ValidateScenario(s).message();
    EXPECT_EQ(s.seed, 42u) << m.key;
    const engine::PolicyParams& e = s.engine_policy;
    EXPECT_EQ(e.deferral.release_rate_per_second,
              defaults.deferral.release_rate_per_second) << m.key;
    EXPECT_EQ(e.deferral.spread, defaults.deferral.spread) << m.key;
    EXPECT_EQ(e.breaker.enabled, defaults.breaker.enabled) << m.key;
    EXPECT_EQ(e.breaker.open_base, defaults.breaker.open_base) << m.key;
    EXPECT_EQ(e.breaker.open_max, defaults.breaker.open_max) << m.key;
    EXPECT_EQ(e.breaker.consecutive_failures,
              defaults.breaker.consecutive_failures) << m.key;
    EXPECT_EQ(e.breaker.half_open_probes, defaults.breaker.half_open_probes)
        << m.key;
    EXPECT_EQ(e.budget.ratio, defaults.budget.ratio) << m.key;
    EXPECT_EQ(e.budget.min_retries_per_second,
              defaults.budget.min_retries_per_second) << m.key;
    EXPECT_EQ(e.budget.window, defaults.budget.window) << m.key;
  }
}

TEST(GridTest, CoversTheIssuesDimensions) {
  std::set<int> fleets;
  std::set<int64_t> outages_s;
  std::set<double> capacities;
  bool retry_after = false, flapping = false, pool = false, saturated = false;
  for (const MatrixScenario& m : MatrixGrid(1)) {
    const Scenario& s = m.scenario;
    fleets.insert(s.subscriptions);
    for (const EndpointSpec& e : s.endpoints) {
      capacities.insert(e.capacity_per_second);
      if (e.down.size() == 1 && e.down[0].start == absl::ZeroDuration()) {
        outages_s.insert(absl::ToInt64Seconds(e.down[0].end));
      }
      if (!e.down.empty() && e.down_retry_after > absl::ZeroDuration()) {
        retry_after = true;
      }
      if (e.down.size() >= 3) flapping = true;
    }
    if (s.endpoints.size() >= 2 && s.concurrency > 0 && MixesHealthyAndDown(s)) {
      pool = true;
    }
    if (std::optional<double> bound = CapacityBound(s);
        bound && *bound < s.subscriptions) {
      saturated = true;
    }
    if (m.key == "outage_2min_10k") {
      // Long enough to deliver after a 2-minute outage.
      EXPECT_GE(s.horizon, absl::Minutes(10));
    }
  }
  for (int n : {1000, 10000, 100000}) EXPECT_TRUE(fleets.count(n)) << n;
  for (int64_t o : {2, 20, 120}) EXPECT_TRUE(outages_s.count(o)) << o;
  for (double c : {0.0, 2000.0, 500.0, 100.0, 50.0}) {
    EXPECT_TRUE(capacities.count(c)) << c;
  }
  EXPECT_TRUE(retry_after);
  EXPECT_TRUE(flapping);
  EXPECT_TRUE(pool);
  EXPECT_TRUE(saturated);
}

TEST(GridTest, OnlyTheScenariosNamedSaturatedAreBeyondTheirCapacity) {
  // Capacity x (horizon - recovery) < fleet: no policy can deliver it all.
  // Every other finite-capacity scenario leaves room for the whole fleet.
  for (const MatrixScenario& m : MatrixGrid(1)) {
    std::optional<double> bound = CapacityBound(m.scenario);
    if (!bound) {
      EXPECT_FALSE(absl::StrContains(m.key, "saturated")) << m.key;
      continue;
    }
    EXPECT_EQ(absl::StrContains(m.key, "saturated"),
              *bound < m.scenario.subscriptions)
        << m.key << ": bound " << *bound;
  }
}

// --- Listing -----------------------------------------------------------------

// Made-up rows for every grid scenario and policy (no simulation).
std::vector<MatrixResult> FakeResults() {
  std::vector<MatrixResult> out;
  for (MatrixScenario& m : MatrixGrid(1)) {
    MatrixResult r;
    r.scenario = std::move(m);
    for (Policy p : kAllPolicies) {
      PolicyResult row;
      row.policy = p;
      row.delivered = r.scenario.scenario.subscriptions;
      row.time_to_99_s = 10;
      row.wasted_attempts = p == Policy::kCoordinated ? 1 : 1000;
      r.rows.push_back(row);
    }
    out.push_back(std::move(r));
  }
  return out;
}

TEST(MatrixFormatTest, CsvHeaderIsExactlyTheIssues) {
  // Today's columns keep their order; the new ones come after them.
  EXPECT_EQ(std::string(kMatrixCsvHeader),
            "scenario,policy,peak_rps_outage,peak_rps_recovery,time_to_99_s,"
            "wasted_attempts,delivered,given_up,recovery_to_99_s,limit_s,"
            "messages_per_delivery,over_capacity,recovery_to_100_s");
  EXPECT_EQ(Lines(FormatMatrixCsv(FakeResults()))[0], kMatrixCsvHeader);
}

TEST(MatrixFormatTest, EveryScenarioAndEveryPolicyIsListedInOrder) {
  const std::vector<MatrixResult> results = FakeResults();
  std::vector<std::string> lines = Lines(FormatMatrixCsv(results));
  lines.erase(std::remove(lines.begin(), lines.end(), ""), lines.end());
  ASSERT_EQ(lines.size(), 1 + results.size() * kAllPolicies.size());
  size_t i = 1;
  for (const MatrixResult& m : results) {
    for (Policy p : kAllPolicies) {
      std::vector<std::string> cells = absl::StrSplit(lines[i++], ',');
      ASSERT_EQ(cells.size(), 13u);
      EXPECT_EQ(cells[0], m.scenario.key);
      EXPECT_EQ(cells[1], PolicyKey(p));
    }
  }
  const std::string md = FormatMatrixMarkdown(results);
  for (const MatrixResult& m : results) {
    EXPECT_THAT(md, HasSubstr(absl::StrCat("| `", m.scenario.key, "` |")));
  }
  for (Policy p : kAllPolicies) {
    EXPECT_THAT(md, HasSubstr(absl::StrCat("| ", PolicyKey(p), " |")));
  }
  // The summary lists every scenario too.
  std::vector<std::vector<ScenarioBar>> bars(1);
  for (const MatrixResult& m : results) bars[0].push_back(EvaluateBar(m));
  const std::string summary = FormatBarCsv(AggregateBars(bars));
  for (const MatrixResult& m : results) {
    EXPECT_THAT(summary, HasSubstr(absl::StrCat("\n", m.scenario.key, ",bar,")));
  }
}

// --- Running -----------------------------------------------------------------

// Two grid scenarios scaled down to 300 deliveries (and one budget process).
std::vector<MatrixScenario> SmallGrid(uint64_t seed) {
  std::vector<MatrixScenario> g;
  for (const char* key : {"baseline_10k_20s", "shared_pool_4x_w200_10k"}) {
    std::optional<MatrixScenario> m = FindMatrixScenario(key, seed);
    EXPECT_TRUE(m.has_value()) << key;
    if (!m) continue;
    m->scenario.subscriptions = 300;
    m->scenario.workers = 1;
    if (m->scenario.concurrency > 0) m->scenario.concurrency = 20;
    g.push_back(*std::move(m));
  }
  return g;
}

TEST(RunMatrixTest, RowsAreDeterministicPerSeedWhateverTheThreads) {
  absl::StatusOr<std::vector<MatrixResult>> a = RunMatrix(SmallGrid(3), 1);
  absl::StatusOr<std::vector<MatrixResult>> b = RunMatrix(SmallGrid(3), 2);
  absl::StatusOr<std::vector<MatrixResult>> c = RunMatrix(SmallGrid(4), 2);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(a->size(), 2u);
  for (const MatrixResult& m : *a) {
    ASSERT_EQ(m.rows.size(), kAllPolicies.size());
    for (size_t i = 0; i < kAllPolicies.size(); ++i) {
      EXPECT_EQ(m.rows[i].policy, kAllPolicies[i]);
      EXPECT_EQ(m.rows[i].delivered + m.rows[i].given_up, 300)
          << m.scenario.key << " " << PolicyKey(m.rows[i].policy);
    }
  }
  EXPECT_EQ(FormatMatrixCsv(*a), FormatMatrixCsv(*b));
  EXPECT_EQ(FormatMatrixMarkdown(*a), FormatMatrixMarkdown(*b));
  EXPECT_NE(FormatMatrixCsv(*a), FormatMatrixCsv(*c));
  // The pool scenario measures its always-up endpoints.
  EXPECT_TRUE((*a)[1].rows[3].healthy_time_to_99_s.has_value());
}

TEST(RunMatrixTest, AFailedSimulationNamesItsScenarioAndPolicy) {
  std::vector<MatrixScenario> g = SmallGrid(1);
  g[1].scenario.subscriptions = 0;
  absl::StatusOr<std::vector<MatrixResult>> r = RunMatrix(g, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("shared_pool_4x_w200_10k / "));
  EXPECT_THAT(r.status().message(), HasSubstr("subscriptions:"));
}

// --- The bar -----------------------------------------------------------------

// A scenario's rows with every independent row alike except as set.
MatrixResult Rows(bool pool = false) {
  MatrixResult r;
  r.scenario.key = "made_up";
  if (pool) {
    r.scenario.scenario.endpoints.resize(2);  // #0 down, #1 always up
    r.scenario.scenario.concurrency = 10;
  }
  for (Policy p : kAllPolicies) {
    PolicyResult row;
    row.policy = p;
    row.delivered = 9000;
    row.time_to_99_s = 50;
    row.healthy_time_to_99_s = 40;
    row.wasted_attempts = 5000;
    r.rows.push_back(row);
  }
  return r;
}

PolicyResult& Row(MatrixResult& r, Policy p) {
  for (PolicyResult& row : r.rows) {
    if (row.policy == p) return row;
  }
  return r.rows.front();
}

TEST(BarTest, LimitsFollowTheFormulas) {
  MatrixResult r = Rows();
  Row(r, Policy::kNoBackoff).delivered = 10000;   // best delivered
  Row(r, Policy::kFullJitter).wasted_attempts = 71384;
  Row(r, Policy::kDecorrelatedJitter).time_to_99_s = 26.6;  // best time
  PolicyResult& c = Row(r, Policy::kCoordinated);
  c.delivered = 9990;
  c.wasted_attempts = 7138;
  c.time_to_99_s = 30.26;
  c.recovery_to_99_s = 4.1;
  c.limit_s = 3;
  const ScenarioBar bar = EvaluateBar(r);
  // (a) best - 0.1%, (b) full jitter / 10, (c) 1.1 x best + 1 s.
  EXPECT_EQ(bar.delivered.limit, 9990);
  EXPECT_TRUE(bar.delivered.at_least);
  EXPECT_DOUBLE_EQ(bar.wasted.limit, 7138.4);
  EXPECT_DOUBLE_EQ(bar.time_to_99.limit, 1.1 * 26.6 + 1);
  EXPECT_TRUE(bar.delivered.Passes());
  EXPECT_TRUE(bar.wasted.Passes());
  EXPECT_TRUE(bar.time_to_99.Passes());
  EXPECT_FALSE(bar.healthy_time_to_99.applies);  // not a shared pool
  EXPECT_TRUE(bar.Passes());
  // The limit target: 1.2 x limit + 0.5 s.
  ASSERT_TRUE(bar.limit_target.applies);
  EXPECT_DOUBLE_EQ(bar.limit_target.limit, 1.2 * 3 + 0.5);
  EXPECT_TRUE(bar.limit_target.Passes());

  c.delivered = 9989;
  c.wasted_attempts = 7139;
  c.time_to_99_s = 30.3;
  c.recovery_to_99_s = 4.2;
  const ScenarioBar worse = EvaluateBar(r);
  EXPECT_FALSE(worse.delivered.Passes());
  EXPECT_FALSE(worse.wasted.Passes());
  EXPECT_FALSE(worse.time_to_99.Passes());
  EXPECT_FALSE(worse.Passes());
  EXPECT_FALSE(worse.limit_target.Passes());
}

TEST(BarTest, TheLimitTargetIsApartFromTheBarAndOnlyWhereTheBacklogCanFinish) {
  MatrixResult r = Rows();
  PolicyResult& c = Row(r, Policy::kCoordinated);
  c.wasted_attempts = 1;
  c.limit_s = 2;
  c.recovery_to_99_s.reset();  // never: fails the target ...
  const ScenarioBar bar = EvaluateBar(r);
  EXPECT_FALSE(bar.limit_target.Passes());
  EXPECT_EQ(bar.limit_target.Margin(), -kInf);
  EXPECT_TRUE(bar.Passes());  // ... but not the bar
  c.limit_s.reset();  // the backlog cannot finish: no target
  EXPECT_FALSE(EvaluateBar(r).limit_target.applies);
  EXPECT_TRUE(EvaluateBar(r).limit_target.Passes());
}

TEST(BarTest, BehindALimiterOverCapacityAnswersAndRecoveryTo100Count) {
  // An endpoint of 500/s after its outage: over-capacity answers at most 5%
  // of the 10,000 deliveries; 100% within 1.5 x limit + 1 s, nothing given
  // up; 99% within 1.2 x limit + 0.5 s, now part of the bar.
  MatrixResult r = Rows();
  r.scenario.scenario.endpoints[0].capacity_per_second = 500;
  PolicyResult& c = Row(r, Policy::kCoordinated);
  c.wasted_attempts = 1;
  c.limit_s = 20;
  c.recovery_to_99_s = 24.5;
  c.recovery_to_100_s = 31;
  c.over_capacity = 500;
  ScenarioBar bar = EvaluateBar(r);
  ASSERT_TRUE(bar.over_capacity.applies);
  EXPECT_DOUBLE_EQ(bar.over_capacity.limit, 500);
  ASSERT_TRUE(bar.recovery_to_100.applies);
  EXPECT_DOUBLE_EQ(bar.recovery_to_100.limit, 31);
  EXPECT_TRUE(bar.limit_enforced);
  EXPECT_TRUE(bar.Passes());
  // Each one over its limit fails the bar on its own.
  c.over_capacity = 501;
  EXPECT_FALSE(EvaluateBar(r).Passes());
  c.over_capacity = 500;
  c.recovery_to_100_s = 31.01;
  EXPECT_FALSE(EvaluateBar(r).Passes());
  c.recovery_to_100_s.reset();  // something was given up or never ended
  EXPECT_FALSE(EvaluateBar(r).recovery_to_100.Passes());
  c.recovery_to_100_s = 31;
  c.recovery_to_99_s = 24.6;
  EXPECT_FALSE(EvaluateBar(r).Passes());
  c.recovery_to_99_s = 24.5;
  // A limiter shared with traffic the fleet cannot see: 10%.
  r.scenario.scenario.endpoints[0].hidden_per_second = 100;
  c.over_capacity = 1000;
  bar = EvaluateBar(r);
  EXPECT_DOUBLE_EQ(bar.over_capacity.limit, 1000);
  EXPECT_TRUE(bar.Passes());
  // A backlog that cannot finish (a saturated endpoint, whose deliveries
  // all take their last chance): neither criterion applies.
  c.limit_s.reset();
  bar = EvaluateBar(r);
  EXPECT_FALSE(bar.over_capacity.applies);
  EXPECT_FALSE(bar.recovery_to_100.applies);
  EXPECT_FALSE(bar.limit_enforced);
}

TEST(BarTest, NothingMayBeGivenUpWhereTheFleetCanBeDelivered) {
  MatrixResult r = Rows();
  Row(r, Policy::kCoordinated).wasted_attempts = 1;
  Row(r, Policy::kCoordinated).given_up = 1;
  const ScenarioBar bar = EvaluateBar(r);
  ASSERT_TRUE(bar.given_up.applies);
  EXPECT_FALSE(bar.given_up.Passes());
  EXPECT_FALSE(bar.Passes());
  // A saturated endpoint: capacity x (horizon - recovery) below the fleet.
  r.scenario.scenario.endpoints[0].capacity_per_second = 50;
  EXPECT_FALSE(EvaluateBar(r).given_up.applies);
}

TEST(BarTest, TheDeliveredLimitIsInWholeDeliveries) {
  MatrixResult r = Rows();
  for (PolicyResult& row : r.rows) row.delivered = 999;
  EXPECT_EQ(EvaluateBar(r).delivered.limit, 999);  // 0.1% of 999 < 1
  for (PolicyResult& row : r.rows) row.delivered = 1999;
  EXPECT_EQ(EvaluateBar(r).delivered.limit, 1998);
}

TEST(BarTest, NeverFailsOnlyIfSomeIndependentRowGetsThere) {
  MatrixResult r = Rows();
  Row(r, Policy::kCoordinated).time_to_99_s.reset();
  EXPECT_FALSE(EvaluateBar(r).time_to_99.Passes());
  EXPECT_EQ(EvaluateBar(r).time_to_99.Margin(), -kInf);
  for (PolicyResult& row : r.rows) row.time_to_99_s.reset();
  const BarCheck none = EvaluateBar(r).time_to_99;
  EXPECT_EQ(none.limit, kInf);
  EXPECT_TRUE(none.Passes());  // no constraint
  // The reference is the best jittered row: an unjittered herd (no backoff,
  // plain exponential) sets no limit ...
  Row(r, Policy::kNoBackoff).time_to_99_s = 2;
  Row(r, Policy::kExponential).time_to_99_s = 2;
  EXPECT_EQ(EvaluateBar(r).time_to_99.limit, kInf);
  // ... and each jittered row alone does.
  for (Policy p : {Policy::kEqualJitter, Policy::kFullJitter,
                   Policy::kDecorrelatedJitter, Policy::kFullJitterBudget}) {
    MatrixResult one = r;
    Row(one, p).time_to_99_s = 2;
    EXPECT_DOUBLE_EQ(EvaluateBar(one).time_to_99.limit, 3.2) << PolicyKey(p);
    EXPECT_FALSE(EvaluateBar(one).time_to_99.Passes()) << PolicyKey(p);
  }
}

TEST(BarTest, OnlyTheJitteredRowsAreTheTimeReference) {
  int jittered = 0;
  for (Policy p : kAllPolicies) jittered += IsJittered(p) ? 1 : 0;
  EXPECT_EQ(jittered, 4);
  EXPECT_FALSE(IsJittered(Policy::kNoBackoff));
  EXPECT_FALSE(IsJittered(Policy::kExponential));
  EXPECT_FALSE(IsJittered(Policy::kCoordinated));
}

TEST(BarTest, TheHealthyEndpointsCountInSharedPoolScenarios) {
  MatrixResult r = Rows(/*pool=*/true);
  r.scenario.scenario.endpoints[0].down = {{absl::ZeroDuration(),
                                            absl::Seconds(20)}};
  Row(r, Policy::kFullJitterBudget).healthy_time_to_99_s = 10;
  Row(r, Policy::kExponential).healthy_time_to_99_s = 1;  // not jittered
  Row(r, Policy::kCoordinated).healthy_time_to_99_s = 12.5;
  const ScenarioBar bar = EvaluateBar(r);
  ASSERT_TRUE(bar.healthy_time_to_99.applies);
  EXPECT_DOUBLE_EQ(bar.healthy_time_to_99.limit, 12);
  EXPECT_FALSE(bar.healthy_time_to_99.Passes());
  EXPECT_FALSE(bar.Passes());
}

TEST(BarTest, SeedsAggregateToTheWorstCasePerCriterion) {
  auto bar = [](uint64_t seed, double delivered, double time) {
    ScenarioBar b;
    b.key = "k";
    b.seed = seed;
    b.delivered = {true, true, delivered, 9990};
    b.wasted = {true, false, 10, 100};
    b.time_to_99 = {true, false, time, 20};
    b.limit_target = {true, false, time / 5, 4.1};
    b.messages_per_delivery = seed;
    return b;
  };
  const std::vector<AggregatedBar> a = AggregateBars(
      {{bar(1, 10000, 12)}, {bar(2, 9995, 25)}, {bar(3, 9980, 15)}});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].seeds, 3);
  EXPECT_EQ(a[0].seeds_passed, 1);  // seed 1 only
  EXPECT_EQ(a[0].delivered.seed, 3u);
  EXPECT_EQ(a[0].delivered.check.value, 9980);
  EXPECT_EQ(a[0].delivered.seeds_passed, 2);
  EXPECT_EQ(a[0].time_to_99.seed, 2u);
  EXPECT_EQ(a[0].time_to_99.check.value, 25);
  EXPECT_EQ(a[0].wasted.seeds_passed, 3);
  EXPECT_FALSE(a[0].Passes());
  EXPECT_FALSE(a[0].healthy_time_to_99.check.applies);

  const std::string csv = FormatBarCsv(a);
  std::vector<std::string> lines = Lines(csv);
  EXPECT_EQ(lines[0], kBarCsvHeader);
  EXPECT_EQ(lines[1], "k,delivered,9980,>=,9990,FAIL,3,2,3");
  EXPECT_EQ(lines[2], "k,wasted_attempts,10,<=,100,PASS,1,3,3");
  EXPECT_EQ(lines[3], "k,time_to_99_s,25.00,<=,20.00,FAIL,2,2,3");
  EXPECT_EQ(lines[4], "k,recovery_to_99_s,5.00,<=,4.10,FAIL,2,2,3");
  EXPECT_EQ(lines[5], "k,messages_per_delivery,3.00,,,,,,3");
  EXPECT_EQ(lines[6], "k,bar,,,,FAIL,,1,3");
  EXPECT_EQ(lines[7], "");
  EXPECT_EQ(lines[8], "scenarios,meeting_bar,limit_applies,meeting_limit");
  EXPECT_EQ(lines[9], "1,0,1,0");
  EXPECT_FALSE(a[0].MeetsLimit());
  EXPECT_EQ(a[0].messages_per_delivery, 3);  // the most on any seed
  EXPECT_THAT(FormatBarMarkdown(a),
              HasSubstr("**0 of 1 scenarios meet the whole bar on every one "
                        "of 3 seeds.** Of the 1 whose backlog can finish, 0 "
                        "meet the limit target on every one of 3 seeds."));
}

}  // namespace
}  // namespace stagger::sim
