// Running seeds of the protocol simulator: one (RunSeed), shrinking a
// failing one to the fewest plan items that still fail the same way
// (Shrink), and many at once (RunSeeds).
//
//   SeedResult r = RunSeed(42);
//   if (r.violation) {
//     Shrunk s = Shrink(r.plan, *r.violation);
//     std::cout << Report(r, s);  // the seed, the violation, the items
//   }
// A run is a pure function of its plan: the same seed fails the same way
// on every rerun.
#ifndef STAGGER_BENCH_PROTOCOL_SIM_RUN_H_
#define STAGGER_BENCH_PROTOCOL_SIM_RUN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/protocol_sim/checks.h"
#include "bench/protocol_sim/plan.h"
#include "bench/protocol_sim/world.h"

namespace stagger::protocol_sim {

struct SeedResult {
  Plan plan;
  std::optional<Violation> violation;
  RunStats stats;
  int64_t fallback_sends = 0;
};

SeedResult RunPlan(const Plan& plan,
                   std::function<void(const std::string&)> trace = nullptr);
SeedResult RunSeed(uint64_t seed);

struct Shrunk {
  Plan plan;           // the items that still fail
  Violation violation; // as the shrunk plan fails
  int runs = 0;        // runs it took
};
// Drops items one at a time, keeping each drop after which the plan still
// violates the same invariant; then again, until a pass drops nothing (or
// `max_runs` runs).
Shrunk Shrink(const Plan& plan, const Violation& v, int max_runs = 400);

// The story of a failure: seed, size, violation, the shrunk items, and the
// command that replays it.
std::string Report(const SeedResult& r, const Shrunk& s);

struct Totals {
  int64_t seeds = 0;
  int64_t failed = 0;
  std::optional<uint64_t> first_failure;  // seed
  RunStats stats;
  int64_t fallback_sends = 0;
};
// Seeds [first, first + count) on `threads` threads, stopping at `until`
// (wall time) if given; stops early at the first failure if `stop`.
Totals RunSeeds(uint64_t first, int64_t count, int threads,
                absl::Time until = absl::InfiniteFuture(), bool stop = true);

}  // namespace stagger::protocol_sim

#endif  // STAGGER_BENCH_PROTOCOL_SIM_RUN_H_
