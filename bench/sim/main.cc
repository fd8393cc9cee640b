// stagger-sim: seed 000's outage benchmark on a virtual clock, driving the
// real engine for the coordinated row. Prints the table (Markdown, or CSV
// with --format=csv) and optionally writes the plot (--plot FILE.svg).
// Exit status: 0 on success, 2 on bad flags, 1 if a run failed.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/sim/report.h"
#include "bench/sim/sim.h"

namespace {
const stagger::sim::Scenario kDefaults;
const stagger::engine::PolicyParams& kEngine = kDefaults.engine_policy;
}  // namespace

// The scenario (seed 000's, as interpreted; see the README).
ABSL_FLAG(int, subscriptions, kDefaults.subscriptions,
          "deliveries, all created at t=0 (one per subscription)");
ABSL_FLAG(absl::Duration, outage, kDefaults.outage,
          "the endpoint fails every attempt for this long, then recovers");
ABSL_FLAG(absl::Duration, base, kDefaults.base, "backoff base");
ABSL_FLAG(absl::Duration, cap, kDefaults.cap, "backoff cap");
ABSL_FLAG(int, max_attempts, kDefaults.max_attempts,
          "attempt limit per delivery, counting the first (1..100)");
ABSL_FLAG(absl::Duration, horizon, kDefaults.horizon,
          "usefulness horizon from creation; 0 = none");
ABSL_FLAG(absl::Duration, response_time, kDefaults.response_time,
          "time from sending an attempt to its answer");
ABSL_FLAG(double, capacity, kDefaults.capacity_per_second,
          "attempts/s the endpoint can answer after recovery; 0 = unlimited");
ABSL_FLAG(absl::Duration, initial_jitter, kDefaults.initial_jitter,
          "first attempts are spread over [0, this)");
ABSL_FLAG(absl::Duration, outage_retry_after, kDefaults.outage_retry_after,
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
ABSL_FLAG(uint64_t, seed, kDefaults.seed, "random seed");
// The coordinated row's engine (defaults: sim::DefaultCoordinatedPolicy()).
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
// Output.
ABSL_FLAG(std::string, format, "markdown", "markdown or csv");
ABSL_FLAG(std::string, plot, "", "write attempts/s over time to this SVG file");
ABSL_FLAG(std::string, policies, "",
          "comma-separated subset of: no_backoff, exponential, equal_jitter, "
          "full_jitter, decorrelated_jitter, full_jitter_budget, coordinated");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Simulates a fleet retrying against an endpoint that is down for a "
      "while (seed 000's benchmark) and prints one row per retry policy.\n"
      "  stagger-sim [--format=csv] [--plot FILE.svg] [--seed N] ...");
  absl::FlagsUsageConfig usage;
  // --help lists this program's flags (they live in bench/sim/main.cc).
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "bench/sim/");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  namespace sim = stagger::sim;

  sim::Scenario s;
  s.subscriptions = absl::GetFlag(FLAGS_subscriptions);
  s.outage = absl::GetFlag(FLAGS_outage);
  s.base = absl::GetFlag(FLAGS_base);
  s.cap = absl::GetFlag(FLAGS_cap);
  s.max_attempts = absl::GetFlag(FLAGS_max_attempts);
  s.horizon = absl::GetFlag(FLAGS_horizon);
  s.response_time = absl::GetFlag(FLAGS_response_time);
  s.capacity_per_second = absl::GetFlag(FLAGS_capacity);
  s.initial_jitter = absl::GetFlag(FLAGS_initial_jitter);
  s.outage_retry_after = absl::GetFlag(FLAGS_outage_retry_after);
  s.workers = absl::GetFlag(FLAGS_workers);
  s.bucket = absl::GetFlag(FLAGS_bucket);
  s.recovery_window = absl::GetFlag(FLAGS_recovery_window);
  s.seed = absl::GetFlag(FLAGS_seed);
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
    return 2;
  }
  stagger::engine::PolicyParams& e = s.engine_policy;
  e.breaker.open_base = absl::GetFlag(FLAGS_breaker_open_base);
  e.breaker.open_max = absl::GetFlag(FLAGS_breaker_open_max);
  e.breaker.consecutive_failures = absl::GetFlag(FLAGS_breaker_failures);
  e.breaker.half_open_probes = absl::GetFlag(FLAGS_breaker_probes);
  e.breaker.close_after_successes = absl::GetFlag(FLAGS_breaker_close_after);
  e.deferral.spread = absl::GetFlag(FLAGS_defer_spread);
  e.deferral.release_rate_per_second = absl::GetFlag(FLAGS_release_rate);
  e.budget.ratio = absl::GetFlag(FLAGS_budget_ratio);
  e.budget.min_retries_per_second = absl::GetFlag(FLAGS_budget_min_rps);
  e.budget.window = absl::GetFlag(FLAGS_budget_window);

  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "markdown" && format != "csv") {
    std::cerr << "--format: must be markdown or csv, got \"" << format
              << "\"\n";
    return 2;
  }
  std::vector<sim::Policy> policies;
  const std::string list = absl::GetFlag(FLAGS_policies);
  if (list.empty()) {
    policies.assign(sim::kAllPolicies.begin(), sim::kAllPolicies.end());
  } else {
    for (absl::string_view key : absl::StrSplit(list, ',')) {
      std::optional<sim::Policy> p = sim::PolicyFromKey(key);
      if (!p) {
        std::cerr << "--policies: unknown policy \"" << key << "\"\n";
        return 2;
      }
      policies.push_back(*p);
    }
  }
  if (absl::Status st = sim::ValidateScenario(s); !st.ok()) {
    std::cerr << "bad scenario:\n" << st.message() << "\n";
    return 2;
  }

  absl::StatusOr<std::vector<sim::PolicyResult>> results =
      sim::SimulateAll(s, policies);
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
