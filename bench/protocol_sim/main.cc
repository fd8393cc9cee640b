// stagger-protocol-sim: the lease protocol's deterministic simulator
// (docs/TESTING.md, "The protocol simulator"). Runs seeds; each seed is a
// world of agents, replicas and endpoints with faults, checked after every
// event. A failing seed is shrunk and printed with the command that
// replays it.
//
//   stagger-protocol-sim --seeds=10000        CI's run
//   stagger-protocol-sim --hours=8            a long run
//   stagger-protocol-sim --seed=1234 -v       one seed, with its story
//   stagger-protocol-sim --planted=probe_ignores_acks --seeds=2000
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/protocol_sim/planted_names.h"
#include "bench/protocol_sim/run.h"
#include "core/lease/planted.h"
#include "core/cli/usage.h"

ABSL_FLAG(int64_t, seeds, 10000, "Seeds to run, from --first_seed.");
ABSL_FLAG(uint64_t, first_seed, 1, "The first seed.");
ABSL_FLAG(double, hours, 0,
          "Run seeds for this long instead of --seeds (0: off).");
ABSL_FLAG(int64_t, seed, 0,
          "Run this one seed and print its story (0: off).");
ABSL_FLAG(std::string, only, "",
          "With --seed: keep only these plan items (ids, comma-separated): "
          "a shrunk plan as a failure printed it.");
ABSL_FLAG(int, threads, 2, "Threads running seeds.");
ABSL_FLAG(bool, trace, false,
          "With --seed: print every worker step of the run.");
ABSL_FLAG(std::string, planted, "",
          "Turn on a planted regression (core/lease/planted.h) by name: the "
          "run must then fail. --planted=list prints them; --planted=table "
          "prints the seed that catches each (docs/TESTING.md).");

namespace stagger::protocol_sim {
namespace {

int OneSeed(uint64_t seed, const std::string& only) {
  Plan plan = MakePlan(seed);
  if (!only.empty()) {
    std::vector<int> keep;
    for (absl::string_view id : absl::StrSplit(only, ',')) {
      int v;
      if (!absl::SimpleAtoi(id, &v)) {
        std::cerr << "--only: not a list of item ids: " << only << "\n";
        return 2;
      }
      keep.push_back(v);
    }
    std::vector<int> drop;
    for (const Item& it : plan.items) {
      if (std::find(keep.begin(), keep.end(), it.id) == keep.end()) {
        drop.push_back(it.id);
      }
    }
    plan = plan.Without(drop);
  }
  std::function<void(const std::string&)> trace;
  if (absl::GetFlag(FLAGS_trace)) {
    trace = [](const std::string& line) { std::cout << line << "\n"; };
  }
  SeedResult r = RunPlan(plan, trace);
  std::cout << "seed " << seed << ": " << plan.Size() << "\n";
  const RunStats& s = r.stats;
  std::cout << absl::StrFormat(
      "  %d events; deliveries: %d delivered, %d given up, %d cancelled, "
      "%d lost with their agent; %d local admits, %d local reports, %d "
      "calls, %d fallback decisions, %d probes; held calls: %d answered, "
      "%d lost with their agent, %d probes never written\n",
      s.events, s.delivered, s.gave_up, s.cancelled, s.lost_with_agent,
      s.local_admits, s.local_reports, s.central_calls, s.fallback, s.probes,
      s.held_calls, s.held_lost, s.probes_unsent);
  if (!r.violation.has_value()) {
    std::cout << "  no violation\n";
    return 0;
  }
  std::cout << Report(r, Shrink(r.plan, *r.violation));
  return 1;
}

// --planted=table: each planted regression, the first of CI's seeds that
// catches it, and the invariant that does (docs/TESTING.md's table).
int PlantedTable(int threads) {
  std::cout << "| regression | caught at seed | by |\n| --- | --- | --- |\n";
  int uncaught = 0;
  for (const PlantedSwitch& s : PlantedSwitches()) {
    lease::Planted() = {};
    lease::Planted().*(s.field) = true;
    const Totals t = RunSeeds(1, kCiSeeds, threads);
    std::string seed = "not caught", by = "-";
    if (t.first_failure.has_value()) {
      const SeedResult r = RunSeed(*t.first_failure);
      seed = absl::StrCat(*t.first_failure);
      by = r.violation.has_value() ? r.violation->invariant : "?";
    } else {
      ++uncaught;
    }
    std::cout << "| `" << s.name << "`: " << s.hole << " | " << seed << " | "
              << by << " |\n";
  }
  lease::Planted() = {};
  return uncaught == 0 ? 0 : 1;
}

int Main(int argc, char** argv) {
  cli::InstallUsage("stagger-protocol-sim", "bench/protocol_sim");
  absl::ParseCommandLine(argc, argv);
  const std::string planted = absl::GetFlag(FLAGS_planted);
  if (planted == "list") {
    for (const PlantedSwitch& s : PlantedSwitches()) {
      std::cout << s.name << ": " << s.hole << "\n";
    }
    return 0;
  }
  if (planted == "table") return PlantedTable(absl::GetFlag(FLAGS_threads));
  if (!planted.empty() && !TurnOn(planted)) {
    std::cerr << "--planted: no planted regression named \"" << planted
              << "\" (--planted=list)\n";
    return 2;
  }
  if (absl::GetFlag(FLAGS_seed) != 0) {
    return OneSeed(static_cast<uint64_t>(absl::GetFlag(FLAGS_seed)),
                   absl::GetFlag(FLAGS_only));
  }
  const double hours = absl::GetFlag(FLAGS_hours);
  const int threads = absl::GetFlag(FLAGS_threads);
  if (threads < 1 || threads > 256) {
    std::cerr << "--threads: must be 1..256, got " << threads << "\n";
    return 2;
  }
  const absl::Time start = absl::Now();
  const absl::Time until =
      hours > 0 ? start + absl::Seconds(hours * 3600) : absl::InfiniteFuture();
  const int64_t count = hours > 0 ? INT64_MAX : absl::GetFlag(FLAGS_seeds);
  const Totals t = RunSeeds(absl::GetFlag(FLAGS_first_seed), count, threads,
                            until, /*stop=*/true);
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  std::cout << absl::StrFormat(
      "%d seeds in %.1f s (%.2f ms each): %d events, %d delivered, %d local "
      "admits, %d local reports, %d calls, %d fallback decisions, %d probes, "
      "%d held calls (%d lost with their agent, %d probes never written)\n",
      t.seeds, secs, 1000 * secs / std::max<int64_t>(1, t.seeds),
      t.stats.events, t.stats.delivered, t.stats.local_admits,
      t.stats.local_reports, t.stats.central_calls, t.stats.fallback,
      t.stats.probes, t.stats.held_calls, t.stats.held_lost,
      t.stats.probes_unsent);
  if (t.first_failure.has_value()) {
    SeedResult r = RunSeed(*t.first_failure);
    std::cout << Report(r, Shrink(r.plan, *r.violation));
    return 1;
  }
  std::cout << "no violation\n";
  return 0;
}

}  // namespace
}  // namespace stagger::protocol_sim

int main(int argc, char** argv) {
  return stagger::protocol_sim::Main(argc, argv);
}
