// stagger-sim: a fleet retrying through an outage, on a virtual clock,
// driving the real engine for the coordinated row.
//
//   stagger-sim [scenario flags]  one scenario (default: baseline_10k_20s),
//                                 one row per policy: Markdown, or CSV with
//                                 --format=csv; --plot FILE.svg for the plot.
//   stagger-sim --scenario=KEY    the same for one scenario of the matrix.
//   stagger-sim --matrix          every scenario of the grid (bench/sim/
//                                 matrix.h), every policy's row, then the
//                                 bar's summary; --seeds=A..B: the summary
//                                 only, worst case over those seeds.
//
// Engine flags override the engine's defaults for experiments (one
// scenario, or --scenario); the matrix always runs on the defaults.
// Exit status: 0 on success (also when the matrix misses the bar: it is a
// report), 2 on bad flags, 1 if a run failed, 3 with --matrix_strict when a
// scenario misses the bar.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/sim/lease_table.h"
#include "bench/sim/matrix.h"
#include "bench/sim/report.h"
#include "bench/sim/sim.h"

namespace {
const stagger::sim::Scenario kDefaults;
const stagger::engine::PolicyParams& kEngine = kDefaults.engine_policy;
const stagger::sim::EndpointSpec& kEndpoint0 = kDefaults.endpoints[0];
const stagger::sim::LeaseModel& kLeases = kDefaults.leases;
}  // namespace

// The scenario (defaults: sim::Scenario, bench/sim/sim.h).
ABSL_FLAG(int, subscriptions, kDefaults.subscriptions,
          "deliveries, all created at t=0 (one per subscription)");
ABSL_FLAG(absl::Duration, outage, kEndpoint0.down[0].end,
          "the endpoint fails every attempt in [0, this), then recovers");
ABSL_FLAG(std::string, down, "",
          "instead of --outage: the endpoint's down intervals, e.g. "
          "'0s-5s,8s-13s,16s-21s' (a flapping endpoint)");
ABSL_FLAG(int, endpoints, 1,
          "endpoints sharing the deliveries equally: #0 goes down (--outage "
          "or --down), the others are always up; all have --capacity");
ABSL_FLAG(int, concurrency, kDefaults.concurrency,
          "workers shared by every delivery; 0 = unlimited. An independent "
          "client sleeping in backoff holds its worker; a deferred "
          "coordinated delivery frees it");
ABSL_FLAG(absl::Duration, base, kDefaults.base, "backoff base");
ABSL_FLAG(absl::Duration, cap, kDefaults.cap, "backoff cap");
ABSL_FLAG(int, max_attempts, kDefaults.max_attempts,
          "attempt limit per delivery, counting the first (1..100)");
ABSL_FLAG(absl::Duration, horizon, kDefaults.horizon,
          "usefulness horizon from creation; 0 = none");
ABSL_FLAG(absl::Duration, response_time, kDefaults.response_time,
          "time from sending an attempt to its answer");
ABSL_FLAG(double, capacity, kEndpoint0.capacity_per_second,
          "attempts/s the endpoint can answer while up; 0 = unlimited");
ABSL_FLAG(absl::Duration, initial_jitter, kDefaults.initial_jitter,
          "first attempts are spread over [0, this)");
ABSL_FLAG(absl::Duration, outage_retry_after, kEndpoint0.down_retry_after,
          "if > 0, the down endpoint answers 503 with this Retry-After");
ABSL_FLAG(int, workers, kDefaults.workers,
          "worker processes (the budget row keeps one budget per process)");
ABSL_FLAG(absl::Duration, bucket, kDefaults.bucket,
          "rate measurement bucket width");
ABSL_FLAG(absl::Duration, recovery_window, kDefaults.recovery_window,
          "'peak at recovery' is the highest bucket this long after recovery");
ABSL_FLAG(absl::Duration, opening_wave, absl::InfiniteDuration(),
          "'peak during the outage' ignores buckets before this; default "
          "(inf): derived, see sim.h");
ABSL_FLAG(std::string, budget_accounting, "every",
          "budget row: 'every' retry spends when sent (Finagle), or only "
          "'failed' retries spend");
ABSL_FLAG(double, arrival_rate, kDefaults.arrival_rate,
          "deliveries created per second from t=0; 0 = all at t=0");
ABSL_FLAG(double, up_failure_share, kEndpoint0.up_failure_share,
          "share of the attempts that fail (500) while the endpoints are up, "
          "spread evenly; 0..1");
ABSL_FLAG(uint64_t, seed, kDefaults.seed, "random seed");
// The coordinated fleet's client (also with --scenario and --matrix).
ABSL_FLAG(bool, waiting_admission, kDefaults.waiting_admission,
          "coordinated: waiting Admits for deferrals and backoffs, held by "
          "a model of staggerd's wait room; false: the old client");
ABSL_FLAG(int, agents, kLeases.agents,
          "coordinated: agents holding leases; 0 = every call goes to the "
          "coordinator");
ABSL_FLAG(absl::Duration, flush_interval, kLeases.flush_interval,
          "coordinated: each agent sends its counts and renews its lease "
          "this often");
ABSL_FLAG(absl::Duration, push_latency, kLeases.push_latency,
          "coordinated: one way between an agent and the coordinator");
ABSL_FLAG(absl::Duration, lease_ttl, kLeases.ttl,
          "coordinated: the agents' stream leases' time to live");
ABSL_FLAG(int, deaf_agents, kLeases.deaf_agents,
          "coordinated: agents whose lease stream goes quiet at the first "
          "set change");
// Overrides of the coordinated row's engine (defaults: the engine's own).
ABSL_FLAG(absl::Duration, breaker_open_base, kEngine.breaker.open_base,
          "engine: breaker open duration on the first trip");
ABSL_FLAG(absl::Duration, breaker_open_max, kEngine.breaker.open_max,
          "engine: breaker open duration ceiling");
ABSL_FLAG(int, breaker_failures, kEngine.breaker.consecutive_failures,
          "engine: consecutive failures that trip the breaker");
ABSL_FLAG(int, breaker_probes, kEngine.breaker.half_open_probes,
          "engine: fleet-wide half-open probe quota");
ABSL_FLAG(int, breaker_close_after, kEngine.breaker.close_after_successes,
          "engine: probe successes that close the breaker");
ABSL_FLAG(absl::Duration, defer_spread, kEngine.deferral.spread,
          "engine: deferrals are spread over this window");
ABSL_FLAG(double, release_rate, kEngine.deferral.release_rate_per_second,
          "engine: deferred deliveries released per second, at most");
ABSL_FLAG(double, budget_ratio, kEngine.budget.ratio,
          "retry budget: retries per first attempt (engine and budget row)");
ABSL_FLAG(double, budget_min_rps, kEngine.budget.min_retries_per_second,
          "retry budget: retries/s always allowed (engine and budget row)");
ABSL_FLAG(absl::Duration, budget_window, kEngine.budget.window,
          "retry budget: sliding window (engine and budget row)");
// What to run.
ABSL_FLAG(std::string, scenario, "",
          "run this scenario of the matrix, or an extra one such as "
          "dead_week_disable_72h (its key), instead of the flags' scenario; "
          "engine flags still apply");
ABSL_FLAG(bool, matrix, false,
          "run the scenario matrix (every scenario, every policy, on the "
          "engine's defaults) and print the bar's summary");
ABSL_FLAG(std::string, seeds, "",
          "with --matrix: 'A..B' runs seeds A to B and prints the summary "
          "only, worst case per criterion over the seeds");
ABSL_FLAG(bool, matrix_strict, false,
          "with --matrix: exit 3 if any scenario misses the bar (for CI)");
ABSL_FLAG(int, jobs, 1, "with --matrix: simulations run on this many threads");
ABSL_FLAG(bool, ttl_table, false,
          "print the lease TTL's effect on time to recovery when one "
          "agent's lease stream goes quiet (a fixed scenario; --seed "
          "applies)");
// Output.
ABSL_FLAG(std::string, format, "markdown", "markdown or csv");
ABSL_FLAG(std::string, plot, "", "write attempts/s over time to this SVG file");
ABSL_FLAG(std::string, policies, "",
          "comma-separated subset of: no_backoff, exponential, equal_jitter, "
          "full_jitter, decorrelated_jitter, full_jitter_budget, coordinated");

namespace {

namespace sim = stagger::sim;

template <typename T>
bool Changed(const absl::Flag<T>& f) {
  const absl::CommandLineFlag& h = absl::GetFlagReflectionHandle(f);
  return h.CurrentValue() != h.DefaultValue();
}

// The names of the changed flags among `flags`, "--a, --b".
std::string ChangedNames(
    const std::vector<const absl::CommandLineFlag*>& flags) {
  std::vector<std::string> names;
  for (const absl::CommandLineFlag* f : flags) {
    if (f->CurrentValue() != f->DefaultValue()) {
      names.push_back(absl::StrCat("--", f->Name()));
    }
  }
  return absl::StrJoin(names, ", ");
}

std::vector<const absl::CommandLineFlag*> ScenarioFlags() {
  return {&absl::GetFlagReflectionHandle(FLAGS_subscriptions),
          &absl::GetFlagReflectionHandle(FLAGS_outage),
          &absl::GetFlagReflectionHandle(FLAGS_down),
          &absl::GetFlagReflectionHandle(FLAGS_endpoints),
          &absl::GetFlagReflectionHandle(FLAGS_concurrency),
          &absl::GetFlagReflectionHandle(FLAGS_base),
          &absl::GetFlagReflectionHandle(FLAGS_cap),
          &absl::GetFlagReflectionHandle(FLAGS_max_attempts),
          &absl::GetFlagReflectionHandle(FLAGS_horizon),
          &absl::GetFlagReflectionHandle(FLAGS_response_time),
          &absl::GetFlagReflectionHandle(FLAGS_capacity),
          &absl::GetFlagReflectionHandle(FLAGS_initial_jitter),
          &absl::GetFlagReflectionHandle(FLAGS_outage_retry_after),
          &absl::GetFlagReflectionHandle(FLAGS_workers),
          &absl::GetFlagReflectionHandle(FLAGS_bucket),
          &absl::GetFlagReflectionHandle(FLAGS_recovery_window),
          &absl::GetFlagReflectionHandle(FLAGS_opening_wave),
          &absl::GetFlagReflectionHandle(FLAGS_budget_accounting),
          &absl::GetFlagReflectionHandle(FLAGS_arrival_rate),
          &absl::GetFlagReflectionHandle(FLAGS_up_failure_share)};
}

// The coordinated fleet's client: waiting admission and leases.
void ApplyFleetFlags(sim::Scenario& s) {
  s.waiting_admission = absl::GetFlag(FLAGS_waiting_admission);
  s.leases.agents = absl::GetFlag(FLAGS_agents);
  s.leases.flush_interval = absl::GetFlag(FLAGS_flush_interval);
  s.leases.push_latency = absl::GetFlag(FLAGS_push_latency);
  s.leases.ttl = absl::GetFlag(FLAGS_lease_ttl);
  s.leases.deaf_agents = absl::GetFlag(FLAGS_deaf_agents);
}

std::vector<const absl::CommandLineFlag*> EngineFlags() {
  return {&absl::GetFlagReflectionHandle(FLAGS_breaker_open_base),
          &absl::GetFlagReflectionHandle(FLAGS_breaker_open_max),
          &absl::GetFlagReflectionHandle(FLAGS_breaker_failures),
          &absl::GetFlagReflectionHandle(FLAGS_breaker_probes),
          &absl::GetFlagReflectionHandle(FLAGS_breaker_close_after),
          &absl::GetFlagReflectionHandle(FLAGS_defer_spread),
          &absl::GetFlagReflectionHandle(FLAGS_release_rate),
          &absl::GetFlagReflectionHandle(FLAGS_budget_ratio),
          &absl::GetFlagReflectionHandle(FLAGS_budget_min_rps),
          &absl::GetFlagReflectionHandle(FLAGS_budget_window)};
}

// Engine flags that were changed override `e` (the others keep the
// engine's defaults, whatever they are).
void ApplyEngineFlags(stagger::engine::PolicyParams& e) {
  if (Changed(FLAGS_breaker_open_base)) {
    e.breaker.open_base = absl::GetFlag(FLAGS_breaker_open_base);
  }
  if (Changed(FLAGS_breaker_open_max)) {
    e.breaker.open_max = absl::GetFlag(FLAGS_breaker_open_max);
  }
  if (Changed(FLAGS_breaker_failures)) {
    e.breaker.consecutive_failures = absl::GetFlag(FLAGS_breaker_failures);
  }
  if (Changed(FLAGS_breaker_probes)) {
    e.breaker.half_open_probes = absl::GetFlag(FLAGS_breaker_probes);
  }
  if (Changed(FLAGS_breaker_close_after)) {
    e.breaker.close_after_successes = absl::GetFlag(FLAGS_breaker_close_after);
  }
  if (Changed(FLAGS_defer_spread)) {
    e.deferral.spread = absl::GetFlag(FLAGS_defer_spread);
  }
  if (Changed(FLAGS_release_rate)) {
    e.deferral.release_rate_per_second = absl::GetFlag(FLAGS_release_rate);
  }
  if (Changed(FLAGS_budget_ratio)) e.budget.ratio = absl::GetFlag(FLAGS_budget_ratio);
  if (Changed(FLAGS_budget_min_rps)) {
    e.budget.min_retries_per_second = absl::GetFlag(FLAGS_budget_min_rps);
  }
  if (Changed(FLAGS_budget_window)) {
    e.budget.window = absl::GetFlag(FLAGS_budget_window);
  }
}

// "0s-5s,8s-13s" -> intervals; an error names the bad part.
absl::StatusOr<std::vector<sim::DownInterval>> ParseDown(absl::string_view v) {
  std::vector<sim::DownInterval> out;
  for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    sim::DownInterval d;
    if (ends.size() != 2 || !absl::ParseDuration(ends[0], &d.start) ||
        !absl::ParseDuration(ends[1], &d.end)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--down: \"", part, "\" is not START-END (e.g. 0s-5s)"));
    }
    out.push_back(d);
  }
  return out;
}

// The flags' endpoints: the first one has the outage (--outage or --down),
// the other --endpoints - 1 are always up, alike otherwise. Exit status 2 in
// *exit on bad flags.
std::optional<std::vector<sim::EndpointSpec>> EndpointsFromFlags(int* exit) {
  sim::EndpointSpec e0 = sim::OutageEndpoint(
      absl::GetFlag(FLAGS_outage), absl::GetFlag(FLAGS_capacity),
      absl::GetFlag(FLAGS_outage_retry_after));
  if (Changed(FLAGS_down)) {
    if (Changed(FLAGS_outage)) {
      std::cerr << "--down and --outage: give one of them\n";
      *exit = 2;
      return std::nullopt;
    }
    absl::StatusOr<std::vector<sim::DownInterval>> down =
        ParseDown(absl::GetFlag(FLAGS_down));
    if (!down.ok()) {
      std::cerr << down.status().message() << "\n";
      *exit = 2;
      return std::nullopt;
    }
    e0.down = *std::move(down);
  }
  const int endpoints = absl::GetFlag(FLAGS_endpoints);
  if (endpoints < 1 || endpoints > 1000) {
    std::cerr << "--endpoints: must be in [1, 1000], got " << endpoints << "\n";
    *exit = 2;
    return std::nullopt;
  }
  e0.up_failure_share = absl::GetFlag(FLAGS_up_failure_share);
  std::vector<sim::EndpointSpec> out = {e0};
  for (int i = 1; i < endpoints; ++i) {
    sim::EndpointSpec up;
    up.capacity_per_second = e0.capacity_per_second;
    up.up_failure_share = e0.up_failure_share;
    out.push_back(up);
  }
  return out;
}

// The flags' scenario. Exit status 2 in *exit on bad flags.
std::optional<sim::Scenario> ScenarioFromFlags(int* exit) {
  sim::Scenario s;
  s.subscriptions = absl::GetFlag(FLAGS_subscriptions);
  std::optional<std::vector<sim::EndpointSpec>> endpoints =
      EndpointsFromFlags(exit);
  if (!endpoints.has_value()) return std::nullopt;
  s.endpoints = *std::move(endpoints);
  s.arrival_rate = absl::GetFlag(FLAGS_arrival_rate);
  s.concurrency = absl::GetFlag(FLAGS_concurrency);
  s.base = absl::GetFlag(FLAGS_base);
  s.cap = absl::GetFlag(FLAGS_cap);
  s.max_attempts = absl::GetFlag(FLAGS_max_attempts);
  s.horizon = absl::GetFlag(FLAGS_horizon);
  s.response_time = absl::GetFlag(FLAGS_response_time);
  s.initial_jitter = absl::GetFlag(FLAGS_initial_jitter);
  s.workers = absl::GetFlag(FLAGS_workers);
  s.bucket = absl::GetFlag(FLAGS_bucket);
  s.recovery_window = absl::GetFlag(FLAGS_recovery_window);
  if (absl::GetFlag(FLAGS_opening_wave) != absl::InfiniteDuration()) {
    s.opening_wave = absl::GetFlag(FLAGS_opening_wave);
  }
  const std::string accounting = absl::GetFlag(FLAGS_budget_accounting);
  if (accounting == "every") {
    s.budget_accounting = sim::Scenario::BudgetAccounting::kEveryRetry;
  } else if (accounting == "failed") {
    s.budget_accounting = sim::Scenario::BudgetAccounting::kFailedRetries;
  } else {
    std::cerr << "--budget_accounting: must be every or failed, got \""
              << accounting << "\"\n";
    *exit = 2;
    return std::nullopt;
  }
  return s;
}

// --scenario's grid scenario, or the flags' one. Exit status 2 in *exit on
// bad flags.
std::optional<sim::Scenario> ChosenScenario(int* exit) {
  const std::string key = absl::GetFlag(FLAGS_scenario);
  if (key.empty()) return ScenarioFromFlags(exit);
  if (std::string n = ChangedNames(ScenarioFlags()); !n.empty()) {
    std::cerr << "--scenario=" << key << " sets the scenario; it does not "
              << "take " << n << "\n";
    *exit = 2;
    return std::nullopt;
  }
  std::optional<sim::MatrixScenario> m =
      sim::FindMatrixScenario(key, absl::GetFlag(FLAGS_seed));
  if (!m) {
    std::vector<std::string> keys;
    for (const sim::MatrixScenario& g : sim::MatrixGrid(1)) keys.push_back(g.key);
    std::cerr << "--scenario: unknown key \"" << key << "\"; one of "
              << absl::StrJoin(keys, ", ") << "\n";
    *exit = 2;
    return std::nullopt;
  }
  return m->scenario;
}

// --seeds "A..B" (A <= B, at most 1000 seeds).
std::optional<std::vector<uint64_t>> ParseSeeds(absl::string_view v) {
  std::vector<absl::string_view> ends = absl::StrSplit(v, "..");
  uint64_t a = 0, b = 0;
  if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &a) ||
      !absl::SimpleAtoi(ends[1], &b) || a > b || b - a >= 1000) {
    return std::nullopt;
  }
  std::vector<uint64_t> out;
  for (uint64_t s = a; s <= b; ++s) out.push_back(s);
  return out;
}

// The flags --matrix does not take ("--a, --b"), or "".
std::string MatrixConflicts() {
  std::vector<std::string> conflicts;
  if (std::string n = ChangedNames(ScenarioFlags()); !n.empty()) {
    conflicts.push_back(n);
  }
  if (std::string n = ChangedNames(EngineFlags()); !n.empty()) {
    conflicts.push_back(n);
  }
  for (const char* name : {"scenario", "policies", "plot"}) {
    const absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
    if (f->CurrentValue() != f->DefaultValue()) {
      conflicts.push_back(absl::StrCat("--", name));
    }
  }
  if (Changed(FLAGS_seeds) && Changed(FLAGS_seed)) conflicts.push_back("--seed");
  return absl::StrJoin(conflicts, ", ");
}

// The seeds --matrix runs: --seeds A..B, else --seed. nullopt (the error
// printed) if --seeds is malformed.
std::optional<std::vector<uint64_t>> MatrixSeeds() {
  if (!Changed(FLAGS_seeds)) {
    return std::vector<uint64_t>{absl::GetFlag(FLAGS_seed)};
  }
  std::optional<std::vector<uint64_t>> parsed =
      ParseSeeds(absl::GetFlag(FLAGS_seeds));
  if (!parsed) {
    std::cerr << "--seeds: must be A..B with A <= B and at most 1000 "
                 "seeds, got \""
              << absl::GetFlag(FLAGS_seeds) << "\"\n";
  }
  return parsed;
}

// Runs the grid once per seed on `jobs` threads and returns each seed's
// bars; with one seed, also prints its table (Markdown, or CSV). nullopt
// (the error printed) if a run failed.
std::optional<std::vector<std::vector<sim::ScenarioBar>>> RunMatrixSeeds(
    const std::vector<uint64_t>& seeds, int jobs, bool csv) {
  std::vector<std::vector<sim::ScenarioBar>> bars;
  for (uint64_t seed : seeds) {
    std::vector<sim::MatrixScenario> grid = sim::MatrixGrid(seed);
    for (sim::MatrixScenario& m : grid) ApplyFleetFlags(m.scenario);
    absl::StatusOr<std::vector<sim::MatrixResult>> results =
        sim::RunMatrix(grid, jobs);
    if (!results.ok()) {
      std::cerr << "simulation failed: " << results.status().message() << "\n";
      return std::nullopt;
    }
    bars.emplace_back();
    for (const sim::MatrixResult& r : *results) {
      bars.back().push_back(sim::EvaluateBar(r));
    }
    if (seeds.size() == 1) {
      std::cout << (csv ? sim::FormatMatrixCsv(*results)
                        : sim::FormatMatrixMarkdown(*results))
                << "\n";
    }
  }
  return bars;
}

// Prints the bar's summary (stdout) and the run's size and wall time since
// `start` (stderr).
void PrintMatrixSummary(const std::vector<sim::AggregatedBar>& summary,
                        const std::vector<uint64_t>& seeds, bool csv,
                        std::chrono::steady_clock::time_point start) {
  if (seeds.size() > 1 && !csv) {
    std::cout << "Seeds " << seeds.front() << ".." << seeds.back()
              << ": each criterion's worst seed.\n\n";
  }
  std::cout << (csv ? sim::FormatBarCsv(summary)
                    : sim::FormatBarMarkdown(summary));
  const double wall = std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count();
  std::cerr << "stagger-sim --matrix: " << summary.size() << " scenarios x "
            << sim::kNumPolicies << " policies x " << seeds.size()
            << " seed(s) in " << absl::StrFormat("%.1f", wall)
            << " s of wall time\n";
}

// --matrix: checks its flags (exit 2), runs every seed (exit 1 if a run
// fails), prints the summary; exit 3 with --matrix_strict if a scenario
// misses the bar, else 0.
int RunMatrixMode(bool csv) {
  if (std::string conflicts = MatrixConflicts(); !conflicts.empty()) {
    std::cerr << "--matrix runs a fixed grid on the engine's defaults; it "
                 "does not take "
              << conflicts
              << " (use --scenario=KEY to experiment with one scenario)\n";
    return 2;
  }
  const std::optional<std::vector<uint64_t>> seeds = MatrixSeeds();
  if (!seeds) return 2;
  const int jobs = absl::GetFlag(FLAGS_jobs);
  if (jobs < 1 || jobs > 64) {
    std::cerr << "--jobs: must be in [1, 64], got " << jobs << "\n";
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::optional<std::vector<std::vector<sim::ScenarioBar>>> bars =
      RunMatrixSeeds(*seeds, jobs, csv);
  if (!bars) return 1;
  const std::vector<sim::AggregatedBar> summary = sim::AggregateBars(*bars);
  PrintMatrixSummary(summary, *seeds, csv, start);
  bool all = true;
  for (const sim::AggregatedBar& a : summary) all = all && a.Passes();
  return absl::GetFlag(FLAGS_matrix_strict) && !all ? 3 : 0;
}

// --ttl_table: the table for --seed (Markdown). Exit 2 if other flags are
// given, 1 if a run fails.
int RunTtlTableMode() {
  std::vector<const absl::CommandLineFlag*> others = ScenarioFlags();
  for (const absl::CommandLineFlag* f : EngineFlags()) others.push_back(f);
  for (const char* name :
       {"scenario", "policies", "plot", "matrix", "seeds", "matrix_strict",
        "jobs", "format", "waiting_admission", "agents", "flush_interval",
        "push_latency", "lease_ttl", "deaf_agents"}) {
    others.push_back(absl::FindCommandLineFlag(name));
  }
  if (std::string n = ChangedNames(others); !n.empty()) {
    std::cerr << "--ttl_table runs a fixed scenario; it does not take " << n
              << "\n";
    return 2;
  }
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  absl::StatusOr<std::vector<sim::TtlRow>> rows = sim::RunTtlTable(seed);
  if (!rows.ok()) {
    std::cerr << "simulation failed: " << rows.status().message() << "\n";
    return 1;
  }
  std::cout << sim::FormatTtlTableMarkdown(*rows, seed);
  return 0;
}

// Sets --help's text and the flags it lists, then parses the command line.
void ParseFlags(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Simulates a fleet retrying against endpoints that are down for a "
      "while and prints one row per retry policy.\n"
      "  stagger-sim [--format=csv] [--plot FILE.svg] [--seed N] ...\n"
      "  stagger-sim --scenario=KEY [...]   one scenario of the matrix\n"
      "  stagger-sim --matrix [--format=csv] [--seed=N | --seeds=A..B]\n"
      "      every scenario of the grid, every policy, and the bar the "
      "coordinated row (on the engine's defaults) is held to\n"
      "  stagger-sim --ttl_table [--seed=N]   the lease TTL's effect on "
      "recovery\n"
      "The coordinated fleet's client flags (waiting_admission, agents, "
      "flush_interval, push_latency, lease_ttl, deaf_agents) apply to one "
      "scenario, --scenario and --matrix.\n"
      "The coordinated row runs on the engine's defaults; the engine flags "
      "(breaker_*, defer_spread, release_rate, budget_*) override them for "
      "one scenario, never for --matrix.");
  absl::FlagsUsageConfig usage;
  // --help lists this program's flags (they live in bench/sim/main.cc).
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "bench/sim/");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
}

// The policies --policies names (all of them if empty); nullopt (the error
// printed) on an unknown one.
std::optional<std::vector<sim::Policy>> ChosenPolicies() {
  std::vector<sim::Policy> policies;
  const std::string list = absl::GetFlag(FLAGS_policies);
  if (list.empty()) {
    policies.assign(sim::kAllPolicies.begin(), sim::kAllPolicies.end());
    return policies;
  }
  for (absl::string_view p_key : absl::StrSplit(list, ',')) {
    std::optional<sim::Policy> p = sim::PolicyFromKey(p_key);
    if (!p) {
      std::cerr << "--policies: unknown policy \"" << p_key << "\"\n";
      return std::nullopt;
    }
    policies.push_back(*p);
  }
  return policies;
}

// One scenario (--scenario's, or the flags'): every chosen policy's row in
// `format`, and the plot if --plot. Exit 2 on bad flags, 1 if the run or
// the plot fails, else 0.
int RunScenarioMode(const std::string& format) {
  for (const char* name : {"seeds", "matrix_strict", "jobs"}) {
    const absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
    if (f->CurrentValue() != f->DefaultValue()) {
      std::cerr << "--" << name << ": only with --matrix\n";
      return 2;
    }
  }
  int exit = 0;
  std::optional<sim::Scenario> scenario = ChosenScenario(&exit);
  if (!scenario) return exit;
  sim::Scenario& s = *scenario;
  s.seed = absl::GetFlag(FLAGS_seed);
  ApplyEngineFlags(s.engine_policy);
  ApplyFleetFlags(s);
  const std::optional<std::vector<sim::Policy>> policies = ChosenPolicies();
  if (!policies) return 2;
  if (absl::Status st = sim::ValidateScenario(s); !st.ok()) {
    std::cerr << "bad scenario:\n" << st.message() << "\n";
    return 2;
  }

  absl::StatusOr<std::vector<sim::PolicyResult>> results =
      sim::SimulateAll(s, *policies);
  if (!results.ok()) {
    std::cerr << "simulation failed: " << results.status().message() << "\n";
    return 1;
  }
  std::cout << (format == "csv" ? sim::FormatCsv(*results)
                                : sim::FormatMarkdown(s, *results));
  const std::string plot = absl::GetFlag(FLAGS_plot);
  if (!plot.empty()) {
    std::ofstream f(plot);
    f << sim::RenderSvg(s, *results);
    if (!f) {
      std::cerr << "--plot: cannot write " << plot << "\n";
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ParseFlags(argc, argv);
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "markdown" && format != "csv") {
    std::cerr << "--format: must be markdown or csv, got \"" << format
              << "\"\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_ttl_table)) return RunTtlTableMode();
  if (absl::GetFlag(FLAGS_matrix)) return RunMatrixMode(format == "csv");
  return RunScenarioMode(format);
}
