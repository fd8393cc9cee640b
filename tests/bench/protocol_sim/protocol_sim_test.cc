// The protocol simulator's own tests: it proves itself. Every planted
// regression (core/lease/planted.h; issue 27's held-call ones too) is
// caught within the seeds CI runs;
// a run is the same every time; a failure shrinks to fewer items that
// still fail the same way. (The 10,000 clean seeds CI runs are
// protocol_sim.seeds, a command of its own.)
#include <string>

#include "bench/protocol_sim/planted_names.h"
#include "bench/protocol_sim/run.h"
#include "core/lease/planted.h"
#include "gtest/gtest.h"

namespace stagger::protocol_sim {
namespace {

class PlantedTest : public ::testing::TestWithParam<PlantedSwitch> {
 protected:
  ~PlantedTest() override { lease::Planted() = {}; }
};

TEST_P(PlantedTest, IsCaughtWithinCisSeeds) {
  lease::Planted().*(GetParam().field) = true;
  const Totals t = RunSeeds(1, kCiSeeds, /*threads=*/2);
  ASSERT_TRUE(t.first_failure.has_value())
      << GetParam().name << " (" << GetParam().hole << ") went uncaught in "
      << t.seeds << " seeds";
  const SeedResult r = RunSeed(*t.first_failure);
  ASSERT_TRUE(r.violation.has_value());
  std::cout << GetParam().name << ": caught at seed " << *t.first_failure
            << ": " << r.violation->invariant << ": " << r.violation->what
            << "\n";
}

INSTANTIATE_TEST_SUITE_P(
    Each, PlantedTest, ::testing::ValuesIn(PlantedSwitches()),
    [](const ::testing::TestParamInfo<PlantedSwitch>& info) {
      return std::string(info.param.name);
    });

TEST(ProtocolSimTest, ASeedRunsTheSameEveryTime) {
  for (uint64_t seed : {3, 17, 1231}) {
    const SeedResult a = RunSeed(seed);
    const SeedResult b = RunSeed(seed);
    EXPECT_EQ(a.stats.events, b.stats.events) << seed;
    EXPECT_EQ(a.stats.delivered, b.stats.delivered) << seed;
    EXPECT_EQ(a.stats.local_admits, b.stats.local_admits) << seed;
    EXPECT_EQ(a.stats.probes, b.stats.probes) << seed;
    EXPECT_EQ(a.stats.held_calls, b.stats.held_calls) << seed;
    EXPECT_FALSE(a.violation.has_value()) << seed << ": " << a.violation->what;
  }
}

TEST(ProtocolSimTest, AFailureShrinksToFewerItemsThatFailTheSameWay) {
  lease::Planted().probe_ignores_acks = true;
  const SeedResult r = RunSeed(26);
  ASSERT_TRUE(r.violation.has_value());
  const Shrunk s = Shrink(r.plan, *r.violation);
  EXPECT_LT(s.plan.items.size(), r.plan.items.size());
  EXPECT_EQ(s.violation.invariant, r.violation->invariant);
  const SeedResult again = RunPlan(s.plan);  // the replay of --only=...
  ASSERT_TRUE(again.violation.has_value());
  EXPECT_EQ(again.violation->what, s.violation.what);
  const std::string story = Report(r, s);
  EXPECT_NE(story.find("seed 26 FAILED I1"), std::string::npos) << story;
  EXPECT_NE(story.find("--seed=26 --only="), std::string::npos) << story;
  lease::Planted() = {};
}

TEST(ProtocolSimTest, EverySeedMakesLeasesWorkAndFaultsHappen) {
  // A simulator that never leases, or never probes, proves nothing.
  const Totals t = RunSeeds(1, 200, /*threads=*/2);
  EXPECT_EQ(t.failed, 0);
  EXPECT_GT(t.stats.local_admits, t.stats.delivered / 4);
  EXPECT_GT(t.stats.probes, 100);
  EXPECT_GT(t.stats.fallback, 100);
  // Held calls are made and answered (I4), and some streams end with a
  // probe's answer not yet written (I5).
  EXPECT_GT(t.stats.held_calls, t.stats.delivered / 20);
  EXPECT_GT(t.stats.probes_unsent, 0);
}

}  // namespace
}  // namespace stagger::protocol_sim
