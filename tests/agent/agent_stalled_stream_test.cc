// stagger-agent's waiting calls when its lease stream stalls: a replica
// that stops reading (FakeReplica, kNeverRead) leaves the agent's stream
// writer blocked in Write once HTTP/2 flow control is full. The calls
// held over that stream must still be answered on time, by the
// fallback: by min(wait + 50 ms, the worker's deadline - 100 ms)
// (AgentService, SyncSession::kHeldGrace), and the agent's count of
// waiting calls must drop. Real time throughout: the bounds are asserted
// one-sided, against the workers' own deadlines.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/agent_service.h"
#include "agent/work_pool.h"
#include "client/coordinator_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "stagger/v1/coordinator.grpc.pb.h"
#include "tests/testing/fake_agent_sync.h"

namespace stagger::agent {
namespace {

using ::stagger::testing::FakeAgentSync;
using ::stagger::testing::FakeReplica;

// One worker's waiting Admit: when it was answered, and how.
struct Call {
  grpc::ClientContext ctx;
  v1::AdmitRequest req;
  v1::AdmitResponse resp;
  absl::Time started;
  absl::Time deadline;
  absl::Time ended;
  grpc::Status status;
  std::string source;
};

class AgentStalledStreamTest : public ::testing::Test {
 protected:
  AgentStalledStreamTest() : replica_(FakeAgentSync::Mode::kNeverRead) {
    client::ClientOptions o;
    o.target = replica_.target();
    o.leases = true;
    o.lease_holder_id = "node-1";
    o.call_deadline = absl::Seconds(2);
    client_ = *client::CoordinatorClient::Create(o);
    pool_ = std::make_unique<WorkPool>(2, 100);
    service_ = std::make_unique<AgentService>(client_.get(), pool_.get());
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    stub_ = v1::RetryCoordinator::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  }
  ~AgentStalledStreamTest() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    server_->Wait();
  }

  bool StreamUp() {
    const client::LeaseStatus st = client_->lease_status("", 0);
    return !st.replicas.empty() && st.replicas[0].stream_connected;
  }

  // Starts a waiting Admit (attempt 2) on a 500-byte key: `wait`, and a
  // gRPC deadline `deadline` from now.
  void Start(Call* c, int i, absl::Duration wait, absl::Duration deadline) {
    c->req.set_endpoint(
        absl::StrCat("https://tenant-", i, ".example/", std::string(450, 'k')));
    c->req.set_attempt(2);
    c->req.mutable_wait()->set_seconds(absl::ToInt64Seconds(wait));
    c->started = absl::Now();
    c->deadline = c->started + deadline;
    c->ctx.set_deadline(absl::ToChronoTime(c->deadline));
    stub_->async()->Admit(&c->ctx, &c->req, &c->resp,
                          [this, c](grpc::Status s) {
                            absl::MutexLock l(&mu_);
                            c->ended = absl::Now();
                            c->status = std::move(s);
                            const auto& md = c->ctx.GetServerInitialMetadata();
                            auto it = md.find(AgentService::kSourceHeader);
                            if (it != md.end()) {
                              c->source.assign(it->second.data(),
                                               it->second.size());
                            }
                            ++ended_;
                          });
  }

  FakeReplica replica_;
  std::unique_ptr<client::CoordinatorClient> client_;
  std::unique_ptr<WorkPool> pool_;
  std::unique_ptr<AgentService> service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
  absl::Mutex mu_;
  int ended_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(AgentStalledStreamTest, HeldCallsEndOnTimeWhileTheWriterIsBlocked) {
  ASSERT_TRUE(replica_.ok());
  const absl::Time up_by = absl::Now() + absl::Seconds(20);
  while (!StreamUp()) {
    ASSERT_LT(absl::Now(), up_by) << "the lease stream never opened";
    absl::SleepFor(absl::Milliseconds(10));
  }
  // 400 waiting calls, ~200 KB of held calls up a stream whose replica
  // never reads: the writer blocks behind the 64 KiB window. Half wait
  // 1 s with a 5 s deadline (the wait binds); half wait 30 s with a 2 s
  // deadline (the deadline binds).
  constexpr int kCalls = 400;
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.push_back(std::make_unique<Call>());
    const bool wait_binds = i % 2 == 0;
    Start(calls.back().get(), i,
          wait_binds ? absl::Seconds(1) : absl::Seconds(30),
          wait_binds ? absl::Seconds(5) : absl::Seconds(2));
  }
  {
    absl::MutexLock l(&mu_);
    const auto all = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return ended_ == kCalls;
    };
    ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(30)))
        << ended_ << " of " << kCalls << " calls ended";
  }
  absl::Duration latest_wait_binds, latest_before_deadline = absl::Hours(1);
  for (int i = 0; i < kCalls; ++i) {
    const Call& c = *calls[i];
    ASSERT_TRUE(c.status.ok()) << "call " << i << ": " << c.status.error_code()
                               << " " << c.status.error_message();
    EXPECT_EQ(c.source, "local") << "call " << i << ": the fallback's answer";
    EXPECT_LT(c.ended, c.deadline) << "call " << i;
    if (i % 2 == 0) {
      latest_wait_binds = std::max(latest_wait_binds, c.ended - c.started);
    } else {
      latest_before_deadline =
          std::min(latest_before_deadline, c.deadline - c.ended);
    }
  }
  // The wait binds: answered at 1 s + 50 ms (generous slack for a loaded
  // machine, far below the 5 s deadline).
  EXPECT_LT(latest_wait_binds, absl::Seconds(3)) << latest_wait_binds;
  std::printf("wait binds: last answered after %s; deadline binds: "
              "answered at least %s before the deadline\n",
              absl::FormatDuration(latest_wait_binds).c_str(),
              absl::FormatDuration(latest_before_deadline).c_str());
  // The writer is blocked: nothing more goes up, where a message would go
  // every flush interval (500 ms).
  const int64_t flushes = client_->lease_status("", 0).replicas[0].flushes;
  absl::SleepFor(absl::Milliseconds(1200));
  EXPECT_EQ(client_->lease_status("", 0).replicas[0].flushes, flushes)
      << "the stream's writer was not blocked";
  const absl::Time drop_by = absl::Now() + absl::Seconds(10);
  while (service_->waiting_calls() != 0) {
    ASSERT_LT(absl::Now(), drop_by)
        << service_->waiting_calls() << " calls still counted as waiting";
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace
}  // namespace stagger::agent
