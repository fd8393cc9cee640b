// AgentService (agent/agent_service.h) in process, on 127.0.0.1:0, with a
// coordinator that never answers (its client decides by the fail-open
// fallback): every Admit is parsed once, waiting or not, held or not
// (core/rpc/raw_unary.h's observer counts parses), and bytes that are no
// AdmitRequest are refused naming the type, as staggerd refuses them.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/agent_service.h"
#include "agent/work_pool.h"
#include "client/coordinator_client.h"
#include "core/rpc/raw_unary.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::agent {
namespace {

std::atomic<int> admit_parses{0};
void CountAdmitParses(absl::string_view type) {
  if (type == "stagger.v1.AdmitRequest") admit_parses.fetch_add(1);
}

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client::ClientOptions o;
    o.target = "127.0.0.1:1";  // nothing answers: the fallback decides
    o.call_deadline = absl::Milliseconds(20);
    auto c = client::CoordinatorClient::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    service_ = std::make_unique<AgentService>(client_.get(), &pool_);
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::RetryCoordinator::NewStub(channel_);
    rpc::parse_observer.store(&CountAdmitParses);
  }
  void TearDown() override {
    rpc::parse_observer.store(nullptr);
    admit_parses.store(0);
    if (server_ != nullptr) server_->Shutdown();
  }

  grpc::Status Admit(int attempt, int wait_seconds, v1::AdmitResponse* out) {
    v1::AdmitRequest req;
    req.set_endpoint("https://hooks.example/a");
    req.set_attempt(attempt);
    if (wait_seconds > 0) req.mutable_wait()->set_seconds(wait_seconds);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    return stub_->Admit(&ctx, req, out);
  }
  grpc::Status RawAdmit(const std::string& bytes) {
    grpc::GenericStub stub(channel_);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer req(&slice, 1);
    grpc::ByteBuffer resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    absl::Notification done;
    grpc::Status status;
    stub.UnaryCall(&ctx, "/stagger.v1.RetryCoordinator/Admit",
                   grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
                     status = std::move(s);
                     done.Notify();
                   });
    done.WaitForNotification();
    return status;
  }

  WorkPool pool_{2, 100};
  std::unique_ptr<client::CoordinatorClient> client_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
};

TEST_F(AgentServiceTest, EveryAdmitIsParsedOnceWaitingOrNot) {
  v1::AdmitResponse resp;
  ASSERT_TRUE(Admit(1, 0, &resp).ok());
  EXPECT_EQ(resp.decision().verdict(), v1::PROCEED);
  EXPECT_EQ(admit_parses.exchange(0), 1) << "a plain Admit";
  ASSERT_TRUE(Admit(2, 0, &resp).ok());
  EXPECT_EQ(admit_parses.exchange(0), 1) << "a retry (the pool's)";
  ASSERT_TRUE(Admit(2, 1, &resp).ok());
  EXPECT_EQ(admit_parses.exchange(0), 1) << "a waiting Admit";
  // The held call leaves the count once its reactor is done, which may
  // come just after the worker has its answer.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (service_->waiting_calls() != 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(service_->waiting_calls(), 0);
}

TEST_F(AgentServiceTest, UnparsableBytesAreRefusedNamingTheType) {
  const grpc::Status s = RawAdmit("\x08\xff\xff\xff");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "request: 4 bytes that are not a valid stagger.v1.AdmitRequest "
            "(malformed protobuf, or a string field that is not UTF-8)");
  EXPECT_EQ(admit_parses.exchange(0), 1);
}

}  // namespace
}  // namespace stagger::agent
