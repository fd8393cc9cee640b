#include "bench/protocol_sim/run.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"

namespace stagger::protocol_sim {

SeedResult RunPlan(const Plan& plan,
                   std::function<void(const std::string&)> trace) {
  World world(plan, std::move(trace));
  world.Run();
  SeedResult r;
  r.plan = plan;
  r.violation = world.checks().violation();
  r.stats = world.stats();
  r.fallback_sends = world.checks().fallback_sends();
  return r;
}

SeedResult RunSeed(uint64_t seed) { return RunPlan(MakePlan(seed)); }

Shrunk Shrink(const Plan& plan, const Violation& v, int max_runs) {
  Shrunk s{plan, v, 0};
  bool dropped = true;
  while (dropped && s.runs < max_runs) {
    dropped = false;
    for (size_t i = 0; i < s.plan.items.size() && s.runs < max_runs;) {
      const Plan smaller = s.plan.Without({s.plan.items[i].id});
      ++s.runs;
      SeedResult r = RunPlan(smaller);
      if (r.violation.has_value() && r.violation->invariant == v.invariant) {
        s.plan = smaller;
        s.violation = *r.violation;
        dropped = true;
      } else {
        ++i;
      }
    }
  }
  return s;
}

std::string Report(const SeedResult& r, const Shrunk& s) {
  std::string out = absl::StrFormat(
      "seed %d FAILED %s at %.3fs: %s\n  size: %s\n", r.plan.seed,
      r.violation->invariant, absl::ToDoubleSeconds(r.violation->at),
      r.violation->what, r.plan.Size());
  absl::StrAppend(&out, "  shrunk to ", s.plan.items.size(), " of ",
                  r.plan.items.size(), " items in ", s.runs,
                  " runs; it fails so: ", s.violation.invariant, " at ",
                  absl::StrFormat("%.3fs", absl::ToDoubleSeconds(s.violation.at)),
                  ": ", s.violation.what, "\n");
  std::vector<std::string> ids;
  for (const Item& it : s.plan.items) {
    absl::StrAppend(&out, "    ", Describe(it), "\n");
    ids.push_back(absl::StrCat(it.id));
  }
  absl::StrAppend(&out, "  replay: stagger-protocol-sim --seed=", r.plan.seed,
                  "   (the shrunk plan: --seed=", r.plan.seed, " --only=",
                  absl::StrJoin(ids, ","), ")\n");
  return out;
}

Totals RunSeeds(uint64_t first, int64_t count, int threads, absl::Time until,
                bool stop) {
  std::atomic<int64_t> next{0};
  std::atomic<bool> halt{false};
  absl::Mutex mu;
  Totals totals;
  auto work = [&] {
    while (!halt.load()) {
      const int64_t i = next.fetch_add(1);
      if (i >= count || absl::Now() >= until) return;
      SeedResult r = RunSeed(first + static_cast<uint64_t>(i));
      absl::MutexLock l(&mu);
      ++totals.seeds;
      totals.stats.events += r.stats.events;
      totals.stats.delivered += r.stats.delivered;
      totals.stats.local_admits += r.stats.local_admits;
      totals.stats.local_reports += r.stats.local_reports;
      totals.stats.central_calls += r.stats.central_calls;
      totals.stats.fallback += r.stats.fallback;
      totals.stats.probes += r.stats.probes;
      totals.stats.held_calls += r.stats.held_calls;
      totals.stats.held_lost += r.stats.held_lost;
      totals.stats.probes_unsent += r.stats.probes_unsent;
      totals.fallback_sends += r.fallback_sends;
      if (r.violation.has_value()) {
        ++totals.failed;
        if (!totals.first_failure || r.plan.seed < *totals.first_failure) {
          totals.first_failure = r.plan.seed;
        }
        if (stop) halt.store(true);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return totals;
}

}  // namespace stagger::protocol_sim
