// The product's claim, held by a test: on the whole scenario matrix
// (bench/sim/matrix.h), with the engine on its own defaults, the coordinated
// fleet meets the bar (EvaluateBar, matrix.h) against the best independent
// retry policy, on three seeds: behind real limiters too (over-capacity
// answers, recovery to 100% and to 99% against the limit). The only
// exceptions are the known failures docs/SIMULATOR.md explains ("The bars
// that fail, and why"); for those scenarios every other criterion must
// still hold.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bench/sim/matrix.h"
#include "gtest/gtest.h"

namespace stagger::sim {
namespace {

// (scenario, criterion) pairs that fail, each explained in
// docs/SIMULATOR.md from the run's timeline.
const std::set<std::pair<std::string, std::string>>& Explained() {
  static const auto* explained =
      new std::set<std::pair<std::string, std::string>>{
          // The fleet's Retry-After window drifts later each cycle, and the
          // paced release follows; the independent herd goes at once.
          {"retry_after_5s_10k", "time_to_99"},
          // Detecting the recovery (a probe about every second) costs
          // capacity x detection time.
          {"saturated_capacity_50_10k", "delivered"},
      };
  return *explained;
}

void ExpectMet(const std::string& key, const char* criterion,
               const BarCheck& check, uint64_t seed) {
  if (!check.applies) return;
  if (Explained().count({key, criterion}) > 0) return;
  EXPECT_TRUE(check.Passes())
      << key << " " << criterion << " seed " << seed << ": " << check.value
      << " against the limit " << check.limit;
}

class FleetBarTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FleetBarTest, TheCoordinatedFleetMeetsTheBarOnEveryScenario) {
  const uint64_t seed = GetParam();
  absl::StatusOr<std::vector<MatrixResult>> results =
      RunMatrix(MatrixGrid(seed), /*jobs=*/2);
  ASSERT_TRUE(results.ok()) << results.status();
  std::set<std::string> keys;
  for (const MatrixResult& r : *results) {
    const ScenarioBar bar = EvaluateBar(r);
    keys.insert(bar.key);
    ExpectMet(bar.key, "delivered", bar.delivered, seed);
    ExpectMet(bar.key, "wasted", bar.wasted, seed);
    ExpectMet(bar.key, "time_to_99", bar.time_to_99, seed);
    ExpectMet(bar.key, "healthy_time_to_99", bar.healthy_time_to_99, seed);
    ExpectMet(bar.key, "given_up", bar.given_up, seed);
    ExpectMet(bar.key, "over_capacity", bar.over_capacity, seed);
    ExpectMet(bar.key, "recovery_to_100", bar.recovery_to_100, seed);
    if (bar.limit_enforced) {
      ExpectMet(bar.key, "recovery_to_99", bar.limit_target, seed);
    }
  }
  for (const auto& [key, criterion] : Explained()) {
    EXPECT_EQ(keys.count(key), 1u) << key << " is no longer in the grid";
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, FleetBarTest, ::testing::Values(1, 2, 3));

}  // namespace
}  // namespace stagger::sim
