// stagger-sim --matrix: a fixed grid of scenarios (fleet size, outage
// length, capacity after recovery, 500 vs 503 + Retry-After, a flapping
// endpoint, several endpoints sharing a worker pool), every policy's row for
// each, and the bar the coordinated row is held to:
//
//   (a) delivered >= best independent delivered minus 0.1% of it
//       (limit = best - floor(best / 1000));
//   (b) wasted_attempts <= full jitter's wasted_attempts / 10;
//   (c) time_to_99 <= 1.1 x best jittered independent time_to_99 + 1 s; no
//       constraint if no jittered row reaches 99% (a coordinated "never"
//       fails if any does);
//   (d) shared-pool scenarios only (a finite pool, an endpoint always up and
//       one that goes down): the always-up endpoints' 99% time, from t=0,
//       against the best jittered one by (c)'s formula.
//
// "Independent rows" are every policy but kCoordinated (no_backoff and
// full_jitter_budget included); the "jittered" ones are equal, full and
// decorrelated jitter and full jitter + budget (IsJittered): an unjittered
// herd is fast only where capacity is unlimited, so it is no reference for
// time. The coordinated row runs on the engine's own defaults
// (DefaultCoordinatedPolicy) in every scenario: the grid sets only the
// scenario, never engine parameters. Its fleet (waiting admission, agents
// with leases) is Scenario's default unless the caller changes it.
//
// Beside the bar, the limit target: recovery_to_99_s <= 1.2 x limit_s +
// 0.5 s (PolicyResult; limit.h), in every scenario whose backlog can finish
// (limit_s set). It is reported apart from the bar.
//
// Contract: the grid is one table in matrix.cc (MatrixGrid); results and
// text are deterministic for a seed and do not depend on `jobs`.
#ifndef STAGGER_BENCH_SIM_MATRIX_H_
#define STAGGER_BENCH_SIM_MATRIX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/sim/sim.h"

namespace stagger::sim {

struct MatrixScenario {
  std::string key;   // short snake_case, unique in the grid
  std::string note;  // why it is in the grid (may be empty)
  Scenario scenario;
};

// The grid, in print order, every scenario seeded with `seed`. Unless a
// scenario says otherwise: base 200 ms, cap 30 s, 50 attempts, horizon
// 120 s, 250 ms answers, 50 ms initial jitter, unlimited concurrency, one
// worker process (retry budget) per 1,000 deliveries.
std::vector<MatrixScenario> MatrixGrid(uint64_t seed);
// Scenarios outside the grid, run by name (stagger-sim --scenario=KEY) and
// by their own tests, never held to the bar: each turns on an engine
// option that is off by default. dead_week_disable_72h: an endpoint dead
// for a week, one delivery a minute, disable.after_unavailable 72 h (no
// attempt after the disable: PolicyResult::attempts_after_disable).
std::vector<MatrixScenario> ExtraScenarios(uint64_t seed);
// The grid's (or the extra scenarios') scenario `key`, or none.
std::optional<MatrixScenario> FindMatrixScenario(absl::string_view key,
                                                 uint64_t seed);
// For a scenario with one endpoint of finite capacity: how many deliveries
// that capacity can serve between the recovery and the horizon
// (capacity x (horizon - Recovery)); none otherwise (unlimited capacity,
// several endpoints, or no horizon).
std::optional<double> CapacityBound(const Scenario& s);
// The rows (c) and (d) take their reference from.
bool IsJittered(Policy p);

struct MatrixResult {
  MatrixScenario scenario;
  std::vector<PolicyResult> rows;  // one per policy, kAllPolicies order
};

// Runs `policies` (every policy by default) of every scenario of `grid`
// (MatrixGrid(seed) for the matrix), on `jobs` threads (>= 1); each
// result's rows are in `policies` order. Errors: a simulation failed (the
// message names the scenario and policy).
absl::StatusOr<std::vector<MatrixResult>> RunMatrix(
    const std::vector<MatrixScenario>& grid, int jobs = 1,
    const std::vector<Policy>& policies = {kAllPolicies.begin(),
                                           kAllPolicies.end()});

// One criterion of the bar. Values are +inf for "never" (99% not reached);
// limits are +inf for "no constraint".
struct BarCheck {
  bool applies = false;
  bool at_least = false;  // passes if value >= limit; else value <= limit
  double value = 0;
  double limit = 0;
  bool Passes() const;
  // How far inside the limit the value is (negative: outside), in the
  // value's unit; +inf with no constraint, -inf for a "never" that fails.
  double Margin() const;
};

struct ScenarioBar {
  std::string key;
  uint64_t seed = 0;
  BarCheck delivered, wasted, time_to_99, healthy_time_to_99;
  // The limit target (not part of the bar).
  BarCheck limit_target;
  double messages_per_delivery = 0;  // the coordinated row's
  bool Passes() const;  // every criterion of the bar that applies
};

// The limit target for a coordinated row: applies iff limit_s is set.
BarCheck LimitTarget(const PolicyResult& coordinated);
// The bar for one scenario's rows (which must include every policy).
ScenarioBar EvaluateBar(const MatrixResult& r);

// The bar over several seeds: per scenario and criterion, the worst seed's
// check (smallest margin; the first such seed on a tie) and how many seeds
// passed it.
struct AggregatedBar {
  struct Worst {
    BarCheck check;
    uint64_t seed = 0;
    int seeds_passed = 0;
  };
  std::string key;
  Worst delivered, wasted, time_to_99, healthy_time_to_99, limit_target;
  double messages_per_delivery = 0;  // the most on any seed
  int seeds = 0;
  int seeds_passed = 0;  // seeds on which the whole bar passed
  bool Passes() const { return seeds_passed == seeds; }
  bool MeetsLimit() const { return limit_target.seeds_passed == seeds; }
};
// `per_seed[i]` is one seed's bars, every seed listing the same scenarios
// in the same order.
std::vector<AggregatedBar> AggregateBars(
    const std::vector<std::vector<ScenarioBar>>& per_seed);

// The rows: exactly this header line, then one line per scenario and
// policy (values as in FormatCsv).
inline constexpr char kMatrixCsvHeader[] =
    "scenario,policy,peak_rps_outage,peak_rps_recovery,time_to_99_s,"
    "wasted_attempts,delivered,given_up,recovery_to_99_s,limit_s,"
    "messages_per_delivery";
std::string FormatMatrixCsv(const std::vector<MatrixResult>& results);
// The grid (one line per scenario, its parameters) and the rows, as
// Markdown tables.
std::string FormatMatrixMarkdown(const std::vector<MatrixResult>& results);

// The summary: one line per scenario and criterion that applies (the
// limit target as criterion "recovery_to_99_s", the coordinated row's most
// messages per delivery as "messages_per_delivery" with no rule), then one
// "bar" line per scenario; then, after a blank line, how many scenarios
// meet the whole bar (on every seed), how many the limit target applies to
// and how many of those meet it.
inline constexpr char kBarCsvHeader[] =
    "scenario,criterion,coordinated,rule,limit,result,worst_seed,"
    "seeds_passed,seeds";
std::string FormatBarCsv(const std::vector<AggregatedBar>& bars);
// The same as a Markdown table, one row per scenario, and a final line.
std::string FormatBarMarkdown(const std::vector<AggregatedBar>& bars);

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_MATRIX_H_
