// The lease protocol end to end without a network: one ReplicaSync beside
// a real engine and one or two AgentLinks, messages handed over by the
// test, narrated on fake clocks. (The protocol simulator runs the same
// objects under random faults: bench/protocol_sim.)
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/random/random.h"
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

constexpr char kEp[] = "https://partner.example/orders";
constexpr absl::Duration kTtl = absl::Seconds(2);
// This file's agents flush every half second (one Advance(kFlush) each).
constexpr absl::Duration kFlush = absl::Milliseconds(500);

class LeaseProtocolTest : public ::testing::Test {
 protected:
  LeaseProtocolTest() {
    config_.default_policy.breaker.consecutive_failures = 4;
    config_.default_policy.breaker.open_base = absl::Seconds(10);
    config_.default_policy.breaker.open_max = absl::Seconds(10);
    config_.default_policy.breaker.half_open_probes = 1;
    config_.default_policy.breaker.close_after_successes = 1;
    config_.default_policy.backoff.initial_jitter = absl::Milliseconds(200);
    // Shorter than the ttl: the learning period after a start is one ttl.
    config_.default_policy.breaker.probe_timeout = absl::Seconds(1);
    engine_ = std::make_unique<engine::Engine>(config_, &wall_, &random_);
    StartReplica(1);
  }
  ~LeaseProtocolTest() override { Planted() = {}; }

  void StartReplica(uint64_t incarnation, absl::Duration ttl = kTtl) {
    ReplicaSync::Options o;
    o.ttl = ttl;
    o.incarnation = incarnation;
    replica_ = std::make_unique<ReplicaSync>(o, engine_.get(), &mono_);
    replica_->AttachToEngine();
  }
  AgentLink::Options AgentOptions(std::string id) {
    AgentLink::Options o;
    o.agent_id = std::move(id);
    o.incarnation = 99;
    o.members = {"stagger-0"};
    o.flush_interval = kFlush;
    return o;
  }
  // Opens `a`'s stream and hands its first messages over; returns the
  // stream's id.
  uint64_t Connect(AgentLink& a) {
    std::vector<Up> first = a.OnOpen(mono_.Now());
    absl::StatusOr<ReplicaSync::Opened> o = replica_->Open(first[0]);
    EXPECT_TRUE(o.ok()) << o.status();
    a.OnDown(o->first, mono_.Now());
    for (size_t i = 1; i < first.size(); ++i) Send(a, o->stream, first[i]);
    return o->stream;
  }
  void Send(AgentLink& a, uint64_t stream, const Up& up) {
    absl::StatusOr<Down> d = replica_->Receive(stream, up);
    ASSERT_TRUE(d.ok()) << d.status();
    a.OnDown(*d, mono_.Now());
  }
  // The agent's due message (a flush or a nudge) goes up and its answer
  // comes back at once.
  void Exchange(AgentLink& a, uint64_t stream) {
    if (std::optional<Up> up = a.Poll(mono_.Now())) Send(a, stream, *up);
  }
  // The replica's coalesced push reaches `agents`.
  void Push(std::vector<AgentLink*> agents) {
    if (std::optional<Down> d = replica_->Tick()) {
      for (AgentLink* a : agents) a->OnDown(*d, mono_.Now());
    }
  }
  void Advance(absl::Duration d) {
    mono_.Advance(d);
    wall_.Advance(d);
  }
  std::optional<engine::Decision> LocalAdmit(AgentLink& a) {
    engine::AdmitInput in;
    in.endpoint = kEp;
    return a.Admit(in, mono_.Now(), gen_);
  }
  engine::Decision Report(engine::Outcome o,
                          uint64_t admission = engine::kNoAdmission) {
    engine::ReportInput in;
    in.endpoint = kEp;
    in.outcome = o;
    in.admission = admission;
    return *engine_->Report(in);
  }
  engine::Decision Admit(int attempt) {
    engine::AdmitInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    return *engine_->Admit(in);
  }
  // Past the learning period and its hold on probes, with `a` leased.
  uint64_t Leased(AgentLink& a) {
    Advance(Stretch(kTtl) + SendBound(absl::Milliseconds(200)));
    const uint64_t s = Connect(a);
    EXPECT_TRUE(a.LocalOk(kEp, mono_.Now()));
    return s;
  }
  void TripAndHalfOpen() {
    for (int i = 0; i < 4; ++i) Report(engine::Outcome::kRetryableFailure);
    ASSERT_EQ(engine_->Inspect(kEp)->breaker_state,
              engine::BreakerState::kOpen);
    wall_.Set(engine_->Inspect(kEp)->open_until);
  }

  engine::EngineConfig config_;
  FakeClock wall_;  // the engine's
  FakeClock mono_{absl::FromUnixSeconds(1000)};  // the replica's and agents'
  engine::SeededRandom random_{5};
  absl::BitGen gen_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<ReplicaSync> replica_;
};

TEST_F(LeaseProtocolTest, ANewReplicaGrantsNoLeaseInItsFirstTtl) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Connect(a);
  EXPECT_TRUE(a.status(mono_.Now()).in_sync) << "the snapshot came";
  EXPECT_FALSE(a.LocalOk(kEp, mono_.Now())) << "no lease yet";
  EXPECT_FALSE(LocalAdmit(a).has_value());
  Advance(kTtl);
  Advance(kFlush);
  Exchange(a, s);  // the flush renews
  EXPECT_TRUE(a.LocalOk(kEp, mono_.Now()));
}

TEST_F(LeaseProtocolTest, AHealthyKeyNeverSeenIsAnsweredLocallyAndCounted) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Leased(a);
  std::optional<engine::Decision> d = LocalAdmit(a);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->reason, engine::Reason::kInitialJitter);
  EXPECT_EQ(d->admission, engine::kLocalAdmission);
  EXPECT_LT(d->delay, absl::Milliseconds(200));
  engine::ReportInput ok;
  ok.endpoint = kEp;
  ok.admission = d->admission;
  ASSERT_TRUE(a.Report(ok, mono_.Now()).has_value());
  EXPECT_FALSE(engine_->Inspect(kEp).ok()) << "the engine heard nothing yet";
  Advance(kFlush);
  Exchange(a, s);  // the flush carries the counts
  EXPECT_TRUE(engine_->Inspect(kEp).ok()) << "now it learned them";
  EXPECT_EQ(replica_->stats().counts_applied, 1);
}

TEST_F(LeaseProtocolTest, ATripStopsLocalAnswersAndTheProbeWaitsForTheAck) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Leased(a);
  Report(engine::Outcome::kRetryableFailure);
  Report(engine::Outcome::kRetryableFailure);  // near a trip: in the set
  EXPECT_TRUE(a.LocalOk(kEp, mono_.Now())) << "the push has not come yet";
  TripAndHalfOpen();
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenBusy)
      << "the agent has not acknowledged: it may still admit locally";
  Push({&a});
  EXPECT_FALSE(a.LocalOk(kEp, mono_.Now())) << "the entry arrived";
  Advance(AgentLink::kNudge);
  Exchange(a, s);  // the acknowledgement goes up at once
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenBusy)
      << "a local admission may still be in its delay";
  Advance(SendBound(absl::Milliseconds(200)));
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenProbe);
}

TEST_F(LeaseProtocolTest, AnAgentThatNeverAcksHoldsTheProbeOneTtlAtMost) {
  AgentLink a(AgentOptions("node-1"));
  Leased(a);
  const absl::Time leased_at = mono_.Now();
  for (int i = 0; i < 4; ++i) Report(engine::Outcome::kRetryableFailure);
  wall_.Set(engine_->Inspect(kEp)->open_until);
  // The agent hears nothing more (a partition).
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenBusy);
  mono_.Set(leased_at + kTtl);
  EXPECT_FALSE(a.LocalOk(kEp, mono_.Now())) << "its lease ended first";
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenBusy);
  mono_.Set(leased_at + kTtl + SendBound(absl::Milliseconds(200)));
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenProbe);
}

TEST_F(LeaseProtocolTest, AnAgentMissingTheChangeHoldsTheProbeOneTtlAtMost) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Leased(a);
  const absl::Time entered = mono_.Now();
  for (int i = 0; i < 4; ++i) Report(engine::Outcome::kRetryableFailure);
  wall_.Set(engine_->Inspect(kEp)->open_until);
  // The push is lost (or the agent's reader is stuck); its flushes still
  // go up and are answered with renewals for the newer set.
  ASSERT_TRUE(replica_->Tick().has_value());
  for (absl::Duration t = absl::ZeroDuration(); t < 3 * kTtl;
       t += kFlush) {
    Advance(kFlush);
    Exchange(a, s);
  }
  EXPECT_FALSE(a.LocalOk(kEp, mono_.Now()))
      << "the agent took no renewal for a set newer than its copy";
  ASSERT_GT(mono_.Now(), entered + kTtl + SendBound(absl::Milliseconds(200)));
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenProbe)
      << "no lease that could admit locally on the key has lived for a ttl";
}

TEST_F(LeaseProtocolTest, TheLeaseRunsFromWhenTheAgentSentNotWhenItHeard) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Leased(a);
  Advance(kFlush);
  const absl::Time sent = mono_.Now();
  std::optional<Up> up = a.Poll(mono_.Now());
  ASSERT_TRUE(up.has_value());
  absl::StatusOr<Down> down = replica_->Receive(s, *up);
  ASSERT_TRUE(down.ok());
  Advance(absl::Seconds(1));  // the renewal takes a second to come back
  a.OnDown(*down, mono_.Now());
  EXPECT_EQ(a.status(mono_.Now()).lease_until, sent + AgentLeaseSpan(kTtl));
}

TEST_F(LeaseProtocolTest, ALeaseIsRenewedTwicePerTtlWhateverTheFlushInterval) {
  StartReplica(2, absl::Seconds(1));  // the shortest ttl staggerd grants
  AgentLink::Options o = AgentOptions("node-1");
  o.flush_interval = absl::Seconds(1);  // the longest flush an agent takes
  AgentLink a(o);
  const uint64_t s = Leased(a);
  // The first renewal told the agent the ttl: it now renews every 500 ms,
  // not every second, so its lease (980 ms from each send) never lapses.
  for (int step = 1; step <= 50; ++step) {
    Advance(absl::Milliseconds(100));
    ASSERT_TRUE(a.LocalOk(kEp, mono_.Now())) << "lapsed at step " << step;
    Exchange(a, s);
  }
}

TEST_F(LeaseProtocolTest, ARenewalForANewerSetThanTheCopyIsNotTaken) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Leased(a);
  const absl::Time until = a.status(mono_.Now()).lease_until;
  for (int i = 0; i < 2; ++i) Report(engine::Outcome::kRetryableFailure);
  std::optional<Down> push = replica_->Tick();  // lost on the way
  ASSERT_TRUE(push.has_value());
  Advance(kFlush);
  Exchange(a, s);
  EXPECT_EQ(a.status(mono_.Now()).lease_until, until) << "not renewed";
  a.OnDown(*push, mono_.Now());
  Advance(kFlush);
  Exchange(a, s);
  EXPECT_GT(a.status(mono_.Now()).lease_until, until);
}

TEST_F(LeaseProtocolTest, ADeltaAfterAGapDropsTheCopyUntilASnapshot) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Leased(a);
  Report(engine::Outcome::kRetryableFailure);
  Report(engine::Outcome::kRetryableFailure);
  replica_->Tick();  // this delta never reaches the agent
  engine::ReportInput other;
  other.endpoint = "https://other.example";
  other.outcome = engine::Outcome::kRateLimited;
  other.retry_after = absl::Seconds(30);
  ASSERT_TRUE(engine_->Report(other).ok());
  Push({&a});  // starts after the version the agent holds
  EXPECT_FALSE(a.status(mono_.Now()).in_sync);
  EXPECT_FALSE(a.LocalOk(kEp, mono_.Now()));
  Advance(AgentLink::kNudge);
  Exchange(a, s);  // asks for a resync and gets the snapshot
  EXPECT_TRUE(a.status(mono_.Now()).in_sync);
  EXPECT_FALSE(a.LocalOk(kEp, mono_.Now())) << "the snapshot holds the key";
  EXPECT_FALSE(a.LocalOk("https://other.example", mono_.Now()));
}

TEST_F(LeaseProtocolTest, AnAgentWithOtherMembersGetsNoLeaseAndIsTold) {
  AgentLink::Options o = AgentOptions("node-1");
  o.members = {"stagger-0", "stagger-1"};
  AgentLink a(o);
  Advance(kTtl);
  Connect(a);
  EXPECT_FALSE(a.LocalOk(kEp, mono_.Now()));
  EXPECT_NE(a.status(mono_.Now()).refusal.find("members"), std::string::npos);

  // The agent learns the members; its next stream is leased, and no
  // longer shows the old refusal.
  a.OnBroken();
  ASSERT_TRUE(a.SetMembers({"stagger-0"}));
  Connect(a);
  EXPECT_TRUE(a.LocalOk(kEp, mono_.Now()));
  EXPECT_EQ(a.status(mono_.Now()).refusal, "");
}

TEST_F(LeaseProtocolTest, AnotherProtocolVersionIsRefusedByName) {
  Up up;
  up.hello = Hello{"node-1", 99, /*protocol=*/1, {}, 1};
  absl::StatusOr<ReplicaSync::Opened> o = replica_->Open(up);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(o.status().message().find("protocol 2, the agent 1"),
            std::string::npos)
      << o.status();
}

TEST_F(LeaseProtocolTest, CountsAreAppliedOnceInOrderAndAGapIsAnError) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Leased(a);
  LocalAdmit(a);
  Advance(kFlush);
  std::optional<Up> up = a.Poll(mono_.Now());
  ASSERT_TRUE(up.has_value() && up->counts.has_value());
  EXPECT_EQ(up->counts->seq, 1u);
  ASSERT_TRUE(replica_->Receive(s, *up).ok());
  ASSERT_TRUE(replica_->Receive(s, *up).ok()) << "re-sent: applied once";
  EXPECT_EQ(replica_->stats().counts_applied, 1);
  Up skip;
  skip.counts = CountReport{/*seq=*/3, /*lost=*/0, {}};
  absl::StatusOr<Down> d = replica_->Receive(s, skip);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(d.status().message().find("expected 2, got 3"), std::string::npos);
  skip.counts->lost = 1;  // the agent says it dropped report 2
  ASSERT_TRUE(replica_->Receive(s, skip).ok());
  EXPECT_EQ(replica_->stats().counts_lost, 1);
}

// Late successes end a run of failures only when the replica can order
// them: stamped on its own incarnation's clock and after the last failure.
// A report whose times are on another incarnation's clock (taken before
// this replica restarted) counts its successes but ends no run.
TEST_F(LeaseProtocolTest, LateSuccessesEndARunOnlyOnThisIncarnationsClock) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Leased(a);
  Report(engine::Outcome::kRetryableFailure);
  Report(engine::Outcome::kRetryableFailure);
  ASSERT_EQ(engine_->Inspect(kEp)->consecutive_failures, 2);
  Advance(absl::Milliseconds(300));
  Exchange(a, s);  // a fresh replica time for the agent's stamps
  engine::ReportInput ok;
  ok.endpoint = kEp;
  ok.outcome = engine::Outcome::kSuccess;
  ok.attempt = 1;
  ASSERT_TRUE(a.Report(ok, mono_.Now()).has_value()) << "answered locally";
  Advance(kFlush);
  std::optional<Up> up = a.Poll(mono_.Now());
  ASSERT_TRUE(up.has_value() && up->counts.has_value());
  EXPECT_EQ(up->counts->clock_incarnation, 1u) << "stamped on incarnation 1";

  // Another incarnation's clock: the success is counted, the run stands.
  CountReport foreign = *up->counts;
  foreign.clock_incarnation = 7;
  Up other;
  other.counts = foreign;
  ASSERT_TRUE(replica_->Receive(s, other).ok());
  EXPECT_EQ(engine_->Inspect(kEp)->consecutive_failures, 2)
      << "order unknown: no run ends";

  // Its own clock, after the failures: the run ends.
  up->counts->seq = foreign.seq + 1;
  ASSERT_TRUE(replica_->Receive(s, *up).ok());
  EXPECT_EQ(engine_->Inspect(kEp)->consecutive_failures, 0);
}

// The hooks staggerd binds identities and caps counts with
// (server/service): a stream opened under a bound id keeps its own count
// sequence, apart from the same hello under another id; the counts filter
// sees each report once, as applied, under the bound id, and what it cuts
// is not applied.
TEST_F(LeaseProtocolTest, BoundIdsKeepCountSequencesApartAndTheFilterTrims) {
  std::vector<std::string> filtered;
  replica_->set_counts_filter([&](const AgentKey& agent, CountReport* r) {
    filtered.push_back(agent.id);
    r->endpoints.clear();  // cut everything: nothing reaches the engine
  });
  const auto open = [&](const std::string& bound) {
    Up hello;
    hello.hello = Hello{"node-1", 99, kProtocolVersion, {}, 1};
    hello.counts = CountReport{/*seq=*/1, /*lost=*/0,
                               {EndpointCounts{kEp, {CountBucket{wall_.Now(),
                                                                 5, 0}}}}};
    absl::StatusOr<ReplicaSync::Opened> o = replica_->Open(hello, bound);
    EXPECT_TRUE(o.ok()) << o.status();
    return o.ok() ? o->first.applied_seq : 0;
  };
  EXPECT_EQ(open("spiffe://t/a|node-1"), 1u);
  EXPECT_EQ(open("spiffe://t/b|node-1"), 1u) << "its own sequence";
  EXPECT_EQ(open("spiffe://t/a|node-1"), 1u) << "re-sent: applied once";
  EXPECT_EQ(filtered, (std::vector<std::string>{"spiffe://t/a|node-1",
                                                "spiffe://t/b|node-1"}));
  EXPECT_EQ(replica_->stats().counts_applied, 2);
  EXPECT_FALSE(engine_->Inspect(kEp).ok()) << "the filter cut the counts";
}

TEST_F(LeaseProtocolTest, ALaggingCopyIsNotRenewedOnceEveryOtherLeaseHoldsIt) {
  AgentLink fast(AgentOptions("node-1"));
  AgentLink slow(AgentOptions("node-2"));
  Advance(kTtl);
  const uint64_t fs = Connect(fast);
  const uint64_t ss = Connect(slow);
  for (int i = 0; i < 4; ++i) Report(engine::Outcome::kRetryableFailure);
  Push({&fast});  // the slow agent's stream is stuck
  Advance(AgentLink::kNudge);
  Exchange(fast, fs);
  wall_.Set(engine_->Inspect(kEp)->open_until);
  // The slow agent's lease ends; then the probe may go, and its version is
  // now one every lease must hold.
  Advance(kTtl + SendBound(absl::Milliseconds(200)));
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenProbe);
  Exchange(slow, ss);  // a renewal asked with the old copy
  EXPECT_FALSE(slow.LocalOk("https://elsewhere.example", mono_.Now()))
      << "not renewed: its copy lacks the tripped key";
}

TEST_F(LeaseProtocolTest, ARestartedReplicaHoldsProbesForATtl) {
  TripAndHalfOpen();
  StartReplica(2);  // the same engine state, a new incarnation
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenBusy);
  Advance(Stretch(kTtl) + SendBound(absl::Milliseconds(200)));
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenProbe);
}

TEST_F(LeaseProtocolTest, EachKeysPolicyReachesTheAgentAndAReloadUpdatesIt) {
  AgentLink a(AgentOptions("node-1"));
  const uint64_t s = Leased(a);
  engine::AdmitInput in;
  in.endpoint = "https://bulk.example/in";
  // One policy for now: up to 200 ms of jitter.
  std::optional<engine::Decision> d = a.Admit(in, mono_.Now(), gen_);
  ASSERT_TRUE(d.has_value());
  EXPECT_LT(d->delay, absl::Milliseconds(200));
  // A reload: keys under https://bulk. get no jitter at all.
  engine::EngineConfig reloaded = config_;
  engine::PolicyOverride o;
  o.match = engine::PolicyOverride::Match::kPrefix;
  o.pattern = "https://bulk.";
  o.policy = config_.default_policy;
  o.policy.backoff.initial_jitter = absl::ZeroDuration();
  reloaded.overrides.push_back(o);
  engine_->SetConfig(reloaded);
  replica_->OnConfig(reloaded);
  Push({&a});
  for (int i = 0; i < 20; ++i) {
    d = a.Admit(in, mono_.Now(), gen_);
    ASSERT_TRUE(d.has_value());
    EXPECT_EQ(d->delay, absl::ZeroDuration()) << "the override's jitter";
  }
  engine::AdmitInput other;
  other.endpoint = kEp;
  bool some_jitter = false;
  for (int i = 0; i < 20; ++i) {
    d = a.Admit(other, mono_.Now(), gen_);
    ASSERT_TRUE(d.has_value());
    some_jitter = some_jitter || d->delay > absl::ZeroDuration();
  }
  EXPECT_TRUE(some_jitter) << "other keys keep the default's";
  (void)s;
}

TEST_F(LeaseProtocolTest, PlantedProbeIgnoresAcksLetsTheProbeGoAtOnce) {
  AgentLink a(AgentOptions("node-1"));
  Leased(a);
  Planted().probe_ignores_acks = true;
  TripAndHalfOpen();
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenProbe)
      << "the hole: the agent may still admit locally";
  EXPECT_TRUE(a.LocalOk(kEp, mono_.Now()));
}

}  // namespace
}  // namespace stagger::lease
