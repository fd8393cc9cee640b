// StateKeeper with a real engine on a fake clock: what one engine saved,
// another restores at the same instants; state idle past the eviction age
// at load is dropped; a bad file leaves the engine empty and is counted by
// reason; a failed save is counted and leaves the previous snapshot; Stop()
// saves exactly once. And the metric's reasons are the load outcomes'.
#include "server/state/state_keeper.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "server/metrics/server_metrics.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/files.h"

namespace stagger::state {
namespace {

using engine::Outcome;

engine::EngineConfig Config() {
  engine::EngineConfig c;
  c.default_policy.breaker.consecutive_failures = 3;
  c.default_policy.breaker.open_base = absl::Seconds(600);
  c.default_policy.breaker.open_max = absl::Seconds(3600);
  c.default_policy.backoff.retry_after_max = absl::Hours(1);
  return c;
}

class StateKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    path_ = dir_ / "state.snap";
  }
  std::unique_ptr<engine::Engine> NewEngine(engine::EngineConfig c = Config()) {
    return std::make_unique<engine::Engine>(std::move(c), &clock_, &random_);
  }
  StateKeeper::Options Options() {
    StateKeeper::Options o;
    o.path = path_;
    o.writer = "test";
    o.metrics = &metrics_;
    o.log = [this](const std::string& line) { log_.push_back(line); };
    return o;
  }
  void Report(engine::Engine& e, const std::string& ep, Outcome o,
              std::optional<absl::Duration> retry_after = std::nullopt) {
    engine::ReportInput in;
    in.endpoint = ep;
    in.attempt = 1;
    in.outcome = o;
    in.retry_after = retry_after;
    ASSERT_TRUE(e.Report(in).ok());
  }
  // Trips "broken" and gives "pacing" a 1 h Retry-After window.
  void Teach(engine::Engine& e) {
    for (int i = 0; i < 3; ++i) Report(e, "broken", Outcome::kRetryableFailure);
    Report(e, "pacing", Outcome::kRateLimited, absl::Hours(1));
  }
  double Metric(const std::string& name, const std::string& label = "") {
    const std::string text =
        prometheus::TextSerializer().Serialize(registry_.Collect());
    const std::string key = label.empty() ? name + " " : name + "{" + label + "} ";
    const size_t at = text.find("\n" + key);
    return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size() + 1));
  }

  testing::FakeClock clock_;
  engine::SeededRandom random_{11};
  prometheus::Registry registry_;
  metrics::ServerMetrics metrics_{registry_, 8};
  testing::ScratchDir dir_;
  std::string path_;
  std::vector<std::string> log_;
};

TEST_F(StateKeeperTest, WhatOneEngineSavedAnotherRestoresAtTheSameInstants) {
  auto first = NewEngine();
  Teach(*first);
  const auto broken = first->Inspect("broken");
  const auto pacing = first->Inspect("pacing");
  ASSERT_EQ(broken->breaker_state, engine::BreakerState::kOpen);
  {
    StateKeeper keeper(first.get(), &clock_, Options());
    ASSERT_TRUE(keeper.SaveNow().ok());
  }
  clock_.Advance(absl::Seconds(7));  // the restart
  auto second = NewEngine();
  StateKeeper keeper(second.get(), &clock_, Options());
  const StateKeeper::LoadSummary s = keeper.Load();
  EXPECT_EQ(s.outcome, LoadOutcome::kLoaded);
  EXPECT_EQ(s.import.restored, 2);
  const auto b = second->Inspect("broken");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->breaker_state, engine::BreakerState::kOpen);
  EXPECT_EQ(b->open_until, broken->open_until);
  EXPECT_EQ(b->consecutive_trips, 1);
  const auto p = second->Inspect("pacing");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->retry_after_until, pacing->retry_after_until);
  EXPECT_EQ(second->Stats().tracked, 2);
  EXPECT_EQ(second->Stats().by_breaker_state[static_cast<int>(
                engine::BreakerState::kOpen)],
            1);
  EXPECT_EQ(Metric("stagger_state_endpoints_restored"), 2);
  // The breaker half-opens at exactly the instant it was given.
  clock_.Set(broken->open_until - absl::Nanoseconds(1));
  engine::AdmitInput in;
  in.endpoint = "broken";
  in.attempt = 2;
  EXPECT_EQ(second->Admit(in)->reason, engine::Reason::kCircuitOpen);
  clock_.Set(broken->open_until);
  EXPECT_EQ(second->Admit(in)->reason, engine::Reason::kHalfOpenProbe);
}

TEST_F(StateKeeperTest, OperatorPausesSurviveARestartAndEndedOnesAreDropped) {
  auto first = NewEngine();
  const absl::Time t0 = clock_.Now();
  ASSERT_TRUE(first->pauses()
                  .Set("https://partner.example/", true, absl::Hours(2),
                       "partner maintenance", "spiffe://ops/alice", t0)
                  .ok());
  ASSERT_TRUE(first->pauses()
                  .Set("https://short.example/hook", false, absl::Minutes(1),
                       "one minute", "bob", t0)
                  .ok());
  StateKeeper(first.get(), &clock_, Options()).SaveNow().IgnoreError();

  clock_.Advance(absl::Minutes(5));  // the restart; the short pause ended
  auto second = NewEngine();
  const auto s = StateKeeper(second.get(), &clock_, Options()).Load();
  EXPECT_EQ(s.pauses_restored, 1);
  EXPECT_EQ(s.pauses_ended, 1);
  EXPECT_EQ(s.pauses_refused, 0);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find("1 pauses restored, 1 ended meanwhile"),
            std::string::npos)
      << log_.back();
  const auto listed = second->pauses().List(clock_.Now());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].target, "https://partner.example/");
  EXPECT_TRUE(listed[0].prefix);
  EXPECT_EQ(listed[0].since, t0);
  EXPECT_EQ(listed[0].until, t0 + absl::Hours(2));
  EXPECT_EQ(listed[0].reason, "partner maintenance");
  EXPECT_EQ(listed[0].paused_by, "spiffe://ops/alice");

  // A worker is held until exactly the saved end, then admitted.
  engine::AdmitInput in;
  in.endpoint = "https://partner.example/orders";
  in.attempt = 1;
  EXPECT_EQ(second->Admit(in)->reason, engine::Reason::kPaused);
  clock_.Set(t0 + absl::Hours(2));
  EXPECT_NE(second->Admit(in)->reason, engine::Reason::kPaused);
}

// A disable by hand and one by the permanent-failure trigger survive a
// restart with who, why and since; one idle past the eviction age too (a
// disabled endpoint is never idle enough to drop); a pause keeps its id.
TEST_F(StateKeeperTest, DisabledEndpointsSurviveARestartWhateverTheirAge) {
  engine::EngineConfig c = Config();
  c.default_policy.disable.permanent_failures = 2;
  auto first = NewEngine(c);
  const absl::Time t0 = clock_.Now();
  engine::Disable d;
  d.reason = "tenant deleted it";
  d.by = "spiffe://ops/alice";
  d.operation_id = "op-7";
  ASSERT_TRUE(first->Disable("https://gone.example/a", d).ok());
  ASSERT_TRUE(first->pauses()
                  .Set("https://p.example/", true, absl::Hours(2), "m", "ops",
                       t0, "op-pause")
                  .ok());
  clock_.Advance(absl::Minutes(30));
  Report(*first, "https://410.example/b", Outcome::kNotRetryable);
  Report(*first, "https://410.example/b", Outcome::kNotRetryable);
  StateKeeper(first.get(), &clock_, Options()).SaveNow().IgnoreError();

  clock_.Advance(absl::Minutes(1));
  auto second = NewEngine(c);
  const auto s = StateKeeper(second.get(), &clock_, Options()).Load();
  EXPECT_EQ(s.disabled_restored, 2);
  EXPECT_EQ(s.disabled_refused, 0);
  EXPECT_NE(log_.back().find("2 disabled endpoints restored"), std::string::npos)
      << log_.back();
  const std::vector<engine::Disable> listed = second->disables().List();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].endpoint, "https://410.example/b");
  EXPECT_EQ(listed[0].trigger, engine::DisableTrigger::kPermanentFailures);
  EXPECT_EQ(listed[1].endpoint, "https://gone.example/a");
  EXPECT_EQ(listed[1].trigger, engine::DisableTrigger::kOperator);
  EXPECT_EQ(listed[1].since, t0);
  EXPECT_EQ(listed[1].reason, "tenant deleted it");
  EXPECT_EQ(listed[1].by, "spiffe://ops/alice");
  EXPECT_EQ(listed[1].operation_id, "op-7");
  engine::AdmitInput in;
  in.endpoint = "https://gone.example/a";
  in.attempt = 1;
  EXPECT_EQ(second->Admit(in)->reason, engine::Reason::kEndpointDisabled);
  const auto pauses = second->pauses().List(clock_.Now());
  ASSERT_EQ(pauses.size(), 1u);
  EXPECT_EQ(pauses[0].id, "op-pause");
}

TEST_F(StateKeeperTest, StateIdlePastTheEvictionAgeIsDropped) {
  auto first = NewEngine();
  Teach(*first);
  clock_.Advance(absl::Minutes(6));
  Report(*first, "recent", Outcome::kRetryableFailure);
  StateKeeper(first.get(), &clock_, Options()).SaveNow().IgnoreError();
  clock_.Advance(absl::Minutes(5));  // broken/pacing: 11 min idle; recent: 5
  auto second = NewEngine();  // idle_eviction: 10 min (default)
  const auto s = StateKeeper(second.get(), &clock_, Options()).Load();
  EXPECT_EQ(s.import.restored, 1);
  EXPECT_EQ(s.import.stale, 2);
  EXPECT_TRUE(second->Inspect("recent").ok());
  EXPECT_FALSE(second->Inspect("broken").ok());
}

TEST_F(StateKeeperTest, BadFileLeavesTheEngineEmptyAndIsCounted) {
  ASSERT_TRUE(testing::WriteFile(path_, "garbage"));
  auto e = NewEngine();
  const auto s = StateKeeper(e.get(), &clock_, Options()).Load();
  EXPECT_EQ(s.outcome, LoadOutcome::kCorrupt);
  EXPECT_EQ(e->Stats().tracked, 0);
  EXPECT_EQ(Metric("stagger_state_load_failures_total", "reason=\"corrupt\""), 1);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find("starting with fresh state"), std::string::npos)
      << log_.back();
}

TEST_F(StateKeeperTest, MissingFileIsCountedAsMissing) {
  auto e = NewEngine();
  EXPECT_EQ(StateKeeper(e.get(), &clock_, Options()).Load().outcome,
            LoadOutcome::kMissing);
  EXPECT_EQ(Metric("stagger_state_load_failures_total", "reason=\"missing\""), 1);
}

TEST_F(StateKeeperTest, FailedSaveIsCountedAndKeepsThePreviousSnapshot) {
  auto e = NewEngine();
  Teach(*e);
  StateKeeper::Options o = Options();
  o.path = dir_ / "missing-folder/state.snap";
  StateKeeper keeper(e.get(), &clock_, o);
  EXPECT_FALSE(keeper.SaveNow().ok());
  EXPECT_EQ(Metric("stagger_state_saves_total", "result=\"failure\""), 1);
  EXPECT_EQ(Metric("stagger_state_last_save_timestamp_seconds"), 0);
  ASSERT_FALSE(log_.empty());
  EXPECT_NE(log_.back().find("missing-folder"), std::string::npos);
}

TEST_F(StateKeeperTest, StopSavesOnceAfterThePeriodicThread) {
  auto e = NewEngine();
  Teach(*e);
  StateKeeper::Options o = Options();
  o.save_interval = absl::Hours(1);  // only Stop() saves
  StateKeeper keeper(e.get(), &clock_, o);
  keeper.Start();
  keeper.Stop();
  keeper.Stop();
  EXPECT_EQ(Metric("stagger_state_saves_total", "result=\"success\""), 1);
  auto again = NewEngine();
  EXPECT_EQ(StateKeeper(again.get(), &clock_, Options()).Load().import.restored, 2);
}

TEST(StateKeeperMetrics, FailureReasonsAreTheLoadOutcomes) {
  std::set<std::string> outcomes;
  for (int o = 0; o < kNumLoadOutcomes; ++o) {
    if (static_cast<LoadOutcome>(o) == LoadOutcome::kLoaded) continue;
    outcomes.insert(LoadOutcomeName(static_cast<LoadOutcome>(o)));
  }
  const std::set<std::string> reasons(
      metrics::ServerMetrics::kStateLoadFailureReasons.begin(),
      metrics::ServerMetrics::kStateLoadFailureReasons.end());
  EXPECT_EQ(reasons, outcomes);
}

}  // namespace
}  // namespace stagger::state
