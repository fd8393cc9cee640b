// server/status/peer_health and the daemon step's flag checks: peers'
// addresses from --status_peers, held to --replicas; a peer's health asked
// over gRPC (a real in-process health server, and a closed port).
#include "server/status/peer_health.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "server/daemon/status_page_step.h"
#include "server/service/ownership.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::status {
namespace {

const std::vector<std::string> kMembers = {"s0", "s1", "s2"};

TEST(ParseStatusPeersTest, NameEqualsAddressForOtherMembers) {
  auto peers = ParseStatusPeers("s1=127.0.0.1:7001,s2=[::1]:7002", kMembers, "s0");
  ASSERT_TRUE(peers.ok()) << peers.status();
  EXPECT_EQ(peers->at("s1"), "127.0.0.1:7001");
  EXPECT_EQ(peers->at("s2"), "[::1]:7002");
  EXPECT_TRUE(ParseStatusPeers("", kMembers, "s0")->empty());
}

TEST(ParseStatusPeersTest, RefusesWithTheFlagAndTheProblem) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"s1", "want name=host:port, got \"s1\""},
      {"=a:1", "want name=host:port"},
      {"s1=", "want name=host:port"},
      {"s9=a:1", "\"s9\" is not in --replicas"},
      {"s0=a:1", "\"s0\" is this replica"},
      {"s1=a:1,s1=b:2", "\"s1\" given twice"},
  };
  for (const auto& [flag, want] : cases) {
    auto peers = ParseStatusPeers(flag, kMembers, "s0");
    ASSERT_FALSE(peers.ok()) << flag;
    EXPECT_TRUE(absl::StartsWith(peers.status().message(), "status_peers: "));
    EXPECT_TRUE(absl::StrContains(peers.status().message(), want))
        << peers.status();
  }
}

TEST(PeerHealthTest, OneReplicaShowsItselfServing) {
  PeerHealth health({}, "", {});
  const std::vector<PeerStatus> s = health.Snapshot();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_TRUE(s[0].self);
  EXPECT_EQ(s[0].health, "SERVING");
}

TEST(PeerHealthTest, AsksEachPeerWithAnAddressAndShowsTheOthersUnknown) {
  grpc::EnableDefaultHealthCheckService(true);
  // A server needs one service besides health to start: any will do.
  v1::RetryCoordinator::Service unimplemented;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&unimplemented);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  // A port nothing listens on: bound, then closed.
  int closed_port = 0;
  {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &closed_port);
    v1::RetryCoordinator::Service other;
    b.RegisterService(&other);
    b.BuildAndStart()->Shutdown();
  }
  PeerHealth health({"s0", "s1", "s2", "s3"}, "s0",
                    {{"s1", absl::StrCat("127.0.0.1:", port)},
                     {"s2", absl::StrCat("127.0.0.1:", closed_port)}});
  health.CheckOnce();
  const std::vector<PeerStatus> s = health.Snapshot();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].health, "SERVING");
  EXPECT_EQ(s[1].health, "SERVING") << s[1].detail;
  EXPECT_NE(s[1].checked_at, absl::InfinitePast());
  EXPECT_EQ(s[2].health, "UNREACHABLE");
  EXPECT_TRUE(absl::StrContains(s[2].detail, "gRPC code 14")) << s[2].detail;
  EXPECT_EQ(s[3].health, "UNKNOWN");
  EXPECT_EQ(s[3].checked_at, absl::InfinitePast());
  server->GetHealthCheckService()->SetServingStatus(false);
  health.CheckOnce();
  EXPECT_EQ(health.Snapshot()[1].health, "NOT_SERVING");
  server->Shutdown();
}

TEST(StatusPageStepTest, PeersNeedTheAddressAndTheReplicas) {
  auto ownership = service::Ownership::FromFlags("s0,s1", "s0", "");
  ASSERT_TRUE(ownership.ok());
  auto off = daemon::CheckStatusPage("", "", *ownership);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*daemon::StartStatusPage(*off, nullptr), nullptr);
  auto no_address = daemon::CheckStatusPage("", "s1=a:1", *ownership);
  ASSERT_FALSE(no_address.ok());
  EXPECT_TRUE(absl::StrContains(no_address.status().message(),
                                "status_peers: needs --status_address"));
  auto one_replica = daemon::CheckStatusPage("127.0.0.1:0", "s1=a:1", std::nullopt);
  ASSERT_FALSE(one_replica.ok());
  EXPECT_TRUE(absl::StrContains(one_replica.status().message(), "not in --replicas"));
  auto good = daemon::CheckStatusPage("127.0.0.1:0", "s1=a:1", *ownership);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->self, "s0");
  EXPECT_EQ(good->members, (std::vector<std::string>{"s0", "s1"}));
  EXPECT_EQ(good->peers.at("s1"), "a:1");
}

}  // namespace
}  // namespace stagger::status
