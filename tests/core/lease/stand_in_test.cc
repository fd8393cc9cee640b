// The rule for local answers with two members: an owner and the replica
// that stands in for it while an agent cannot reach the owner. Both
// replicas, their engines and the agent's two links are real; messages are
// handed over by the test (or held back: a slow link), narrated on fake
// clocks. (The protocol simulator found this story at random:
// AddStandInBehindSlowLink in bench/protocol_sim/plan.cc.)
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/lease/agent_link.h"
#include "core/lease/planted.h"
#include "core/lease/replica_sync.h"
#include "core/lease/time_bounds.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::lease {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://partner.example/orders";  // stagger-0's
constexpr absl::Duration kTtl = absl::Seconds(2);
constexpr absl::Duration kJitter = absl::Milliseconds(200);
const std::vector<std::string> kMembers = {"stagger-0", "stagger-1"};

// One replica: its engine and its side of the lease streams.
struct Replica {
  Replica(const engine::EngineConfig& config, FakeClock* wall,
          FakeClock* mono, int self)
      : random(7 + self),
        engine(config, wall, &random) {
    ReplicaSync::Options o;
    o.ttl = kTtl;
    o.incarnation = 1 + self;
    o.members = kMembers;
    o.self = kMembers[self];
    o.owner_of = [](absl::string_view) { return size_t{0}; };
    sync = std::make_unique<ReplicaSync>(o, &engine, mono);
    sync->AttachToEngine();
  }
  engine::SeededRandom random;
  engine::Engine engine;
  std::unique_ptr<ReplicaSync> sync;
};

class StandInTest : public ::testing::Test {
 protected:
  StandInTest() {
    config_.default_policy.breaker.consecutive_failures = 4;
    config_.default_policy.breaker.open_base = absl::Seconds(10);
    config_.default_policy.breaker.open_max = absl::Seconds(10);
    config_.default_policy.breaker.half_open_probes = 1;
    config_.default_policy.breaker.close_after_successes = 1;
    config_.default_policy.backoff.initial_jitter = kJitter;
    config_.default_policy.breaker.probe_timeout = absl::Seconds(1);
    owner_ = std::make_unique<Replica>(config_, &wall_, &mono_, 0);
    stand_in_ = std::make_unique<Replica>(config_, &wall_, &mono_, 1);
    for (int r = 0; r < 2; ++r) {
      AgentLink::Options o;
      o.agent_id = "node-1";
      o.incarnation = 99;
      o.members = kMembers;
      links_.push_back(std::make_unique<AgentLink>(o));
    }
  }
  ~StandInTest() override { Planted() = {}; }

  AgentLink& link(int r) { return *links_[r]; }
  Replica& replica(int r) { return r == 0 ? *owner_ : *stand_in_; }
  // Opens the agent's stream to replica `r`; its first answer comes back.
  uint64_t Connect(int r) {
    std::vector<Up> first = link(r).OnOpen(mono_.Now());
    absl::StatusOr<ReplicaSync::Opened> o = replica(r).sync->Open(first[0]);
    EXPECT_TRUE(o.ok()) << o.status();
    link(r).OnDown(o->first, mono_.Now());
    return o->stream;
  }
  void Advance(absl::Duration d) {
    mono_.Advance(d);
    wall_.Advance(d);
  }
  bool MayAnswer() {
    const LinkView* const views[] = {&link(0), &link(1)};
    return MayAnswerLocally(views, kMembers, 0, kEp, mono_.Now());
  }
  engine::Decision StandInReport(engine::Outcome o) {
    engine::ReportInput in;
    in.endpoint = kEp;
    in.outcome = o;
    return *stand_in_->engine.Report(in);
  }
  engine::Decision StandInAdmit(int attempt) {
    engine::AdmitInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    return *stand_in_->engine.Admit(in);
  }

  engine::EngineConfig config_;
  FakeClock wall_;  // the engines'
  FakeClock mono_{absl::FromUnixSeconds(1000)};  // everyone's monotonic
  std::unique_ptr<Replica> owner_, stand_in_;
  std::vector<std::unique_ptr<AgentLink>> links_;
};

TEST_F(StandInTest, ACopyWithoutALiveLeaseCannotVouchThatNobodyStandsIn) {
  Advance(Stretch(kTtl) + SendBound(kJitter));  // past both learning periods
  const uint64_t to_owner = Connect(0);
  const uint64_t to_stand_in = Connect(1);
  EXPECT_TRUE(MayAnswer()) << "both leases live, nobody stands in";

  // The link to stagger-1 turns slow: nothing gets through either way.
  // Then the owner's stream breaks, so the agent sends kEp's calls to
  // stagger-1, which stands in and sees the endpoint fail.
  link(0).OnBroken();
  owner_->sync->Close(to_owner);
  stand_in_->sync->OnStandIn("stagger-0");
  for (int i = 0; i < 4; ++i) StandInReport(engine::Outcome::kRetryableFailure);
  const std::optional<Down> held = stand_in_->sync->Tick();
  ASSERT_TRUE(held.has_value())
      << "the stand-in's entry goes out, and is held up on the slow link";

  // The agent's lease on stagger-1 ends; stagger-1 takes that as the
  // agent having stopped, so after its hold its probe goes.
  Advance(Stretch(kTtl) + SendBound(kJitter));
  wall_.Set(std::max(wall_.Now(), stand_in_->engine.Inspect(kEp)->open_until));
  EXPECT_FALSE(link(1).Current(mono_.Now()));
  EXPECT_EQ(StandInAdmit(2).reason, engine::Reason::kHalfOpenProbe);

  // The owner's stream comes back: a fresh lease on kEp.
  Connect(0);
  EXPECT_TRUE(link(0).LocalOk(kEp, mono_.Now()));
  EXPECT_FALSE(link(1).StandsInFor("stagger-0")) << "it never heard";
  EXPECT_FALSE(MayAnswer())
      << "the copy of stagger-1's set has no live lease: it cannot say "
         "that nobody stands in, and stagger-1's probe is in flight";
  Planted().stand_in_trusts_stale_copy = true;
  EXPECT_TRUE(MayAnswer()) << "the hole: the stale copy vouched";
  Planted() = {};

  // The slow link catches up: the entry arrives, the acknowledgement goes
  // up and gets a renewal. Now the copy is current, and it says so itself.
  link(1).OnDown(*held, mono_.Now());
  Advance(AgentLink::kNudge);
  std::optional<Up> up = link(1).Poll(mono_.Now());
  ASSERT_TRUE(up.has_value());
  absl::StatusOr<Down> renewed = stand_in_->sync->Receive(to_stand_in, *up);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  link(1).OnDown(*renewed, mono_.Now());
  EXPECT_TRUE(link(1).Current(mono_.Now()));
  EXPECT_TRUE(link(1).StandsInFor("stagger-0"));
  EXPECT_FALSE(MayAnswer()) << "stagger-1 stands in for the owner";
}

// A replica that starts standing in for a member holds probes on its keys
// for one ttl after it announced that: an agent may still answer them
// under the owner's lease until it hears. (The simulator cannot catch this
// hold's absence: an agent also answers a member's keys only with a live
// lease from every other replica, which covers it there. So this test is
// its proof.)
TEST_F(StandInTest, AStandInHoldsItsProbesOneTtlAfterItAnnounced) {
  Advance(Stretch(kTtl) + SendBound(kJitter));  // past learning
  stand_in_->sync->OnStandIn("stagger-0");
  for (int i = 0; i < 4; ++i) StandInReport(engine::Outcome::kRetryableFailure);
  wall_.Set(stand_in_->engine.Inspect(kEp)->open_until);  // half-open
  EXPECT_EQ(StandInAdmit(2).reason, engine::Reason::kHalfOpenBusy)
      << "within a ttl of the announcement";
  Planted().no_stand_in_hold = true;
  EXPECT_EQ(StandInAdmit(2).reason, engine::Reason::kHalfOpenProbe)
      << "the planted hole: the probe goes at once";
  Planted() = {};
}

TEST_F(StandInTest, AStandInsProbeGoesOnceTheHoldHasPassed) {
  Advance(Stretch(kTtl) + SendBound(kJitter));  // past learning
  stand_in_->sync->OnStandIn("stagger-0");
  for (int i = 0; i < 4; ++i) StandInReport(engine::Outcome::kRetryableFailure);
  wall_.Set(stand_in_->engine.Inspect(kEp)->open_until);  // half-open
  EXPECT_EQ(StandInAdmit(2).reason, engine::Reason::kHalfOpenBusy);
  Advance(Stretch(kTtl) + SendBound(kJitter));
  EXPECT_EQ(StandInAdmit(2).reason, engine::Reason::kHalfOpenProbe);
}

}  // namespace
}  // namespace stagger::lease
