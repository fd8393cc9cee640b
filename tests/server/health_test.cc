// What Kubernetes and grpcurl see of a running staggerd: the standard
// grpc.health.v1 service (the native `grpc:` probes call Check) and server
// reflection (grpcurl list / describe), through stubs generated from the
// grpc-proto package's health.proto and reflection.proto.
#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/server/rpc_helpers.h"
#include "tests/testing/staggerd_process.h"

#ifndef STAGGERD_PATH
#error "STAGGERD_PATH must name the staggerd binary (set by CMake)"
#endif

namespace stagger::server_test {
namespace {

using stagger::testing::StaggerdProcess;
using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;
using ::testing::Contains;
using ::testing::UnorderedElementsAre;

constexpr char kService[] = "stagger.v1.RetryCoordinator";

class HealthReflectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = StaggerdProcess::Spawn(
        STAGGERD_PATH, {"--address=127.0.0.1:0", "--metrics_address="});
    ASSERT_TRUE(c.ok()) << c.status();
    staggerd_ = *std::move(c);
    absl::Status up = staggerd_->WaitUntilListening();
    ASSERT_TRUE(up.ok()) << up;
    channel_ = Channel(staggerd_->target());
  }
  void TearDown() override {
    if (staggerd_ == nullptr) return;
    // An idle C++ channel is only polled every few seconds, and the server's
    // graceful GOAWAY waits for the client's answer: close it first.
    channel_.reset();
    staggerd_->Signal(SIGTERM);
    absl::StatusOr<int> code = staggerd_->WaitForExit();
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0);
  }

  // One request/response exchange on a fresh reflection stream.
  ServerReflectionResponse Reflect(const ServerReflectionRequest& req) {
    auto stub = ServerReflection::NewStub(channel_);
    grpc::ClientContext ctx;
    SetDeadline(ctx, kRpcDeadline);
    auto stream = stub->ServerReflectionInfo(&ctx);
    ServerReflectionResponse resp;
    EXPECT_TRUE(stream->Write(req));
    EXPECT_TRUE(stream->WritesDone());
    EXPECT_TRUE(stream->Read(&resp));
    grpc::Status s = stream->Finish();
    EXPECT_TRUE(s.ok()) << s;
    return resp;
  }

  std::unique_ptr<StaggerdProcess> staggerd_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(HealthReflectionTest, HealthCheckIsServingForServerAndService) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  HealthCheckResponse::ServingStatus status{};

  // "" is the whole server: what a probe without `service:` asks.
  grpc::Status s = HealthCheck(*health, "", &status);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(status, HealthCheckResponse::SERVING);

  s = HealthCheck(*health, kService, &status);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(status, HealthCheckResponse::SERVING);

  // A service staggerd does not have is NOT_FOUND, not SERVING: the two
  // answers above are not what it says to anything.
  s = HealthCheck(*health, "no.such.Service", &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s;
}

TEST_F(HealthReflectionTest, ReflectionListsTheCoordinatorAndHealth) {
  ServerReflectionRequest req;
  req.set_list_services("");
  ServerReflectionResponse resp = Reflect(req);
  ASSERT_TRUE(resp.has_list_services_response())
      << resp.ShortDebugString();
  std::vector<std::string> names;
  for (const auto& s : resp.list_services_response().service()) {
    names.push_back(s.name());
  }
  EXPECT_THAT(names, Contains(kService));
  EXPECT_THAT(names, Contains("grpc.health.v1.Health"));
  EXPECT_THAT(names, Contains("grpc.reflection.v1alpha.ServerReflection"));
}

TEST_F(HealthReflectionTest, ReflectionDescribesTheCoordinatorsMethods) {
  // What `grpcurl describe stagger.v1.RetryCoordinator` asks.
  ServerReflectionRequest req;
  req.set_file_containing_symbol(kService);
  ServerReflectionResponse resp = Reflect(req);
  ASSERT_TRUE(resp.has_file_descriptor_response()) << resp.ShortDebugString();

  // The answer carries coordinator.proto (and possibly its imports).
  std::optional<google::protobuf::FileDescriptorProto> coordinator;
  std::set<std::string> files;
  for (const std::string& bytes :
       resp.file_descriptor_response().file_descriptor_proto()) {
    google::protobuf::FileDescriptorProto f;
    ASSERT_TRUE(f.ParseFromString(bytes));
    files.insert(f.name());
    if (f.name() == "stagger/v1/coordinator.proto") coordinator = f;
  }
  ASSERT_TRUE(coordinator.has_value())
      << "files returned: " << ::testing::PrintToString(files);
  EXPECT_EQ(coordinator->package(), "stagger.v1");
  ASSERT_EQ(coordinator->service_size(), 1);
  const auto& service = coordinator->service(0);
  EXPECT_EQ(service.name(), "RetryCoordinator");
  std::vector<std::string> methods;
  for (const auto& m : service.method()) methods.push_back(m.name());
  EXPECT_THAT(methods,
              UnorderedElementsAre("Admit", "Report", "AdmitBatch",
                                   "ReportBatch", "GetEndpoint",
                                   "ListEndpoints"));

  // A message type resolves too (grpcurl needs it to build a request).
  ServerReflectionRequest msg_req;
  msg_req.set_file_containing_symbol("stagger.v1.AdmitRequest");
  ServerReflectionResponse msg_resp = Reflect(msg_req);
  EXPECT_TRUE(msg_resp.has_file_descriptor_response())
      << msg_resp.ShortDebugString();
}

}  // namespace
}  // namespace stagger::server_test
