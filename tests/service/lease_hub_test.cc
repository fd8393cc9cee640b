// LeaseHub with a real engine, narrated on a fake clock: an agent asks and
// gets a lease on a clear endpoint; its counts are applied once however
// often they are re-sent; a failure report that opens the breaker revokes
// the lease and pushes the revoke to the agent's stream; a half-open probe
// waits for the agent's acknowledgement (or its lease's end) before it is
// admitted: a revocation racing a probe never lets both go. Bad messages
// are refused naming the field.
#include "server/service/lease_hub.h"

#include <memory>
#include <vector>

#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/wire/wire.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::service {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://hooks.example/a";
const lease::AgentKey kAgent{"node-a", 7};

// A stream peer that records what the hub pushes.
class RecordingPeer final : public SyncPeer {
 public:
  void PushRevokes(std::vector<lease::LeaseRevoke> revokes) override {
    for (auto& r : revokes) pushed.push_back(r);
  }
  void End() override { ended = true; }
  void Ref() override {}
  void Unref() override {}
  std::vector<lease::LeaseRevoke> pushed;
  bool ended = false;
};

class LeaseHubTest : public ::testing::Test {
 protected:
  LeaseHubTest() {
    engine::EngineConfig config;
    config.default_policy.breaker.consecutive_failures = 3;
    config.default_policy.breaker.half_open_probes = 1;
    config.default_policy.breaker.close_after_successes = 1;
    engine_ = std::make_unique<engine::Engine>(config, &clock_, &random_);
    hub_ = std::make_unique<LeaseHub>(engine_.get(),
                                      lease::LeaseLedger::Options{kTtl},
                                      nullptr, &clock_, nullptr);
    engine_->set_probe_hold([this](absl::string_view k, absl::Time now) {
      return hub_->ProbeHeld(k, now);
    });
    clock_.Advance(kTtl);  // past learning mode
    EXPECT_TRUE(hub_->Attach(kAgent, &peer_));
  }
  v1::SyncDown Send(const v1::SyncUp& up) {
    absl::StatusOr<v1::SyncDown> down = hub_->Handle(kAgent, up);
    EXPECT_TRUE(down.ok()) << down.status();
    return down.ok() ? *down : v1::SyncDown();
  }
  v1::SyncDown Ask() {
    v1::SyncUp up;
    up.add_lease_asks(kEp);
    return Send(up);
  }
  engine::Decision Admit(int attempt) {
    engine::AdmitInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    return *engine_->Admit(in);
  }
  void Fail() {
    engine::ReportInput in;
    in.endpoint = kEp;
    in.outcome = engine::Outcome::kRetryableFailure;
    ASSERT_TRUE(engine_->Report(in).ok());
    hub_->OnEndpointChanged(kEp);  // what CoordinatorService does after it
  }

  static constexpr absl::Duration kTtl = absl::Seconds(5);
  FakeClock clock_;
  engine::SeededRandom random_{5};
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<LeaseHub> hub_;
  RecordingPeer peer_;
};

TEST_F(LeaseHubTest, AClearEndpointIsLeased) {
  v1::SyncDown down = Ask();
  ASSERT_EQ(down.grants_size(), 1);
  EXPECT_EQ(down.grants(0).endpoint(), kEp);
  EXPECT_EQ(down.grants(0).ttl().seconds(), 5);
  EXPECT_GE(down.grants(0).allowance(), lease::LeaseLedger::kMinAllowance);
}

TEST_F(LeaseHubTest, CountsAreAppliedOnceHoweverOftenResent) {
  v1::SyncUp up;
  v1::CountReport* c = up.mutable_counts();
  c->set_seq(1);
  v1::EndpointCounts* e = c->add_endpoints();
  e->set_endpoint(kEp);
  v1::CountBucket* b = e->add_buckets();
  wire::ToProto(clock_.Now(), b->mutable_start());
  b->set_first_attempts(1000);
  EXPECT_EQ(Send(up).applied_seq(), 1u);
  const double once = engine_->Inspect(kEp)->budget_remaining;
  EXPECT_NEAR(once, 200, 1e-6);  // 0.2 x 1000
  EXPECT_EQ(Send(up).applied_seq(), 1u) << "re-sent after a reconnect";
  EXPECT_EQ(engine_->Inspect(kEp)->budget_remaining, once);
}

TEST_F(LeaseHubTest, ATripRevokesAtOnceAndAProbeWaitsForTheAck) {
  const uint64_t epoch = Ask().grants(0).epoch();
  Fail();
  Fail();  // 2 of 3: no longer clear, not tripped: revoked already
  ASSERT_EQ(peer_.pushed.size(), 1u);
  EXPECT_GT(peer_.pushed[0].epoch, epoch);
  EXPECT_TRUE(Ask().grants().empty()) << "not clear: no lease";
  Fail();  // trips
  clock_.Advance(absl::Seconds(1));  // open_base (250 ms) has passed
  // The agent has not acknowledged: no probe while its lease may be live.
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenBusy);
  v1::SyncUp ack;
  v1::LeaseAck* a = ack.add_lease_acks();
  a->set_endpoint(kEp);
  a->set_epoch(peer_.pushed[0].epoch);
  Send(ack);
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenProbe);
}

TEST_F(LeaseHubTest, AnAgentThatNeverAcknowledgesHoldsTheProbeOneTtlAtMost) {
  Ask();
  Fail();
  Fail();
  Fail();
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenBusy);
  clock_.Advance(kTtl + lease::LeaseLedger::kExpiryGrace);
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenProbe);
}

TEST_F(LeaseHubTest, ARevokeForAnAgentAwayWaitsForItsNextHello) {
  Ask();
  hub_->Detach(kAgent, &peer_);
  Fail();
  Fail();
  EXPECT_TRUE(peer_.pushed.empty());
  ASSERT_EQ(hub_->PendingRevokes(kAgent).size(), 1u);
}

TEST_F(LeaseHubTest, BadMessagesAreRefusedNamingTheField) {
  v1::SyncUp up;
  up.mutable_counts()->set_seq(0);
  EXPECT_EQ(hub_->Handle(kAgent, up).status().message(),
            "counts.seq: must be >= 1");
  up.mutable_counts()->set_seq(1);
  up.mutable_counts()->add_endpoints()->set_endpoint("");
  EXPECT_EQ(hub_->Handle(kAgent, up).status().message(),
            "counts.endpoints[0].endpoint: must not be empty");
  v1::SyncUp many;
  for (int i = 0; i < 10001; ++i) many.add_lease_asks("x");
  EXPECT_EQ(hub_->Handle(kAgent, many).status().message(),
            "lease_asks: at most 10000, got 10001");
  // An ask for a key this replica refuses gets no lease, and no error.
  v1::SyncUp odd;
  odd.add_lease_asks(std::string(600, 'k'));
  EXPECT_TRUE(Send(odd).grants().empty());
}

TEST_F(LeaseHubTest, ShutdownEndsEveryStreamAndRefusesNewOnes) {
  hub_->Shutdown();
  EXPECT_TRUE(peer_.ended);
  RecordingPeer late;
  EXPECT_FALSE(hub_->Attach({"node-b", 1}, &late));
}

}  // namespace
}  // namespace stagger::service
