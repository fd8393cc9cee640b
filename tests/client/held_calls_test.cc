// A C++ client with leases holds a waiting Admit over its replica's lease
// stream (sync_session.h, Hold). When a membership change replaces that
// replica, the call is not answered CANCELLED: it goes on, with the rest of
// its wait, as a waiting call of its own to the key's new owner.
// In-process FakeReplicas on loopback; the members come from a resolver the
// test controls (a dns:/// target, refreshed every 50 ms).
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/coordinator_target.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_agent_sync.h"

namespace stagger::client {
namespace {

using ::stagger::testing::FakeAgentSync;
using ::stagger::testing::FakeReplica;
using ::stagger::testing::MakeDecision;

TEST(HeldCallsTest, AReplacedReplicasHeldCallGoesToTheNewOwner) {
  FakeReplica a(FakeAgentSync::Mode::kHoldForever);
  FakeReplica b(FakeAgentSync::Mode::kHoldForever);
  ASSERT_TRUE(a.ok() && b.ok());
  b.coordinator().SetAdmit([](const v1::AdmitRequest& req,
                              v1::AdmitResponse* resp) {
    *resp->mutable_decision() =
        MakeDecision(v1::PROCEED, v1::RELEASED, req.attempt());
    return grpc::Status::OK;
  });
  absl::Mutex mu;
  std::vector<Member> members = {{"stagger-a", a.target()}};
  ClientOptions o;
  o.target = "dns:///stagger.test:50051";
  o.resolve_members = [&](absl::string_view, absl::string_view)
      -> absl::StatusOr<std::vector<Member>> {
    absl::MutexLock l(&mu);
    return members;
  };
  o.dns_refresh = absl::Milliseconds(50);
  o.leases = true;
  o.call_deadline = absl::Seconds(2);
  std::unique_ptr<CoordinatorClient> client = *CoordinatorClient::Create(o);
  const absl::Time until = absl::Now() + absl::Seconds(20);
  while (!client->lease_status("", 0).replicas[0].stream_connected) {
    ASSERT_LT(absl::Now(), until) << "the lease stream never opened";
    absl::SleepFor(absl::Milliseconds(10));
  }

  AdmitRequest in;
  in.endpoint = "https://partner.example/hook";
  in.attempt = 2;
  in.wait = absl::Seconds(20);
  absl::Notification answered;
  absl::StatusOr<ClientDecision> got;
  client->AdmitWaitingAsync(in, nullptr, [&](absl::StatusOr<ClientDecision> d) {
    got = std::move(d);
    answered.Notify();
  });
  while (a.sync().holds() == 0) {
    ASSERT_LT(absl::Now(), until) << "the call never reached replica a";
    absl::SleepFor(absl::Milliseconds(10));
  }
  {
    absl::MutexLock l(&mu);
    members = {{"stagger-b", b.target()}};  // a leaves, b comes
  }
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(15)))
      << "the held call was never answered";
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->source, DecisionSource::kCoordinator);
  EXPECT_EQ(got->reason, engine::Reason::kReleased) << "b's answer";
  ASSERT_EQ(b.coordinator().admit_calls(), 1);
  const v1::AdmitRequest sent = b.coordinator().last_admit();
  EXPECT_EQ(sent.endpoint(), in.endpoint);
  EXPECT_GT(sent.wait().seconds(), 10) << "the rest of its wait";
  EXPECT_LE(sent.wait().seconds(), 20);
  EXPECT_EQ(a.coordinator().admit_calls(), 0);
}

}  // namespace
}  // namespace stagger::client
