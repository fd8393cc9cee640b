// Answers to an agent's held calls at a lease stream's end (SyncService
// with AgentHeldCalls and a WaitRoom, over gRPC, on fake clocks):
//   * the drain writes every answer before the stream's OK status;
//   * a probe released to a held call whose answer the stream never wrote
//     (the agent stopped reading, then went away) goes back to the engine
//     when the stream ends: the next Admit gets the probe at once, not
//     after the breaker's probe_timeout (10 minutes here).
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/service/agent_held_calls.h"
#include "server/service/server_setup.h"
#include "server/service/sync_hub.h"
#include "server/service/sync_service.h"
#include "server/service/wait_room.h"
#include "stagger/v1/sync.grpc.pb.h"
#include "tests/testing/fake_clock.h"

namespace stagger::service {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://down.example/hook";
constexpr absl::Duration kTtl = absl::Seconds(1);

class SyncHeldAnswersTest : public ::testing::Test {
 protected:
  SyncHeldAnswersTest()
      // The engine draws on this thread and on gRPC's: a generator per
      // thread (a SeededRandom is one generator, not thread-safe).
      : engine_(Config(), &wall_, engine::PerThreadRandom::Instance()),
        room_(&engine_, &wall_, WaitRoom::Options{10, 10}, nullptr),
        hub_(&engine_, Options(), nullptr, &mono_),
        service_(&hub_, nullptr) {
    service_.set_held_calls(
        [this](AgentHeldCalls::Send send, const std::string& agent) {
          return AgentHeldCalls::Make(&engine_, &room_, &wall_, nullptr,
                                      std::move(send), agent);
        });
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    // No BDP probing: the stream's window stays at 64 KiB while the agent
    // does not read, so the server's writes stall soon.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    stub_ = v1::AgentSync::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(),
        args));
  }
  ~SyncHeldAnswersTest() override {
    room_.Shutdown();
    hub_.Shutdown();
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
  // Opens on the second failure for 5 s; one probe; a probe not reported
  // frees its slot only after 10 minutes.
  static engine::EngineConfig Config() {
    engine::EngineConfig c;
    auto& b = c.default_policy.breaker;
    b.consecutive_failures = 2;
    b.open_base = absl::Seconds(5);
    b.open_max = absl::Seconds(5);
    b.half_open_probes = 1;
    b.close_after_successes = 1;
    b.probe_timeout = absl::Minutes(10);
    return c;
  }
  static lease::ReplicaSync::Options Options() {
    lease::ReplicaSync::Options o;
    o.ttl = kTtl;
    o.incarnation = 77;
    return o;
  }
  struct Stream {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>> rw;
  };
  // A stream whose hello holds a waiting Admit (id 1) on kEp.
  std::unique_ptr<Stream> OpenHolding() {
    auto s = std::make_unique<Stream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(60));
    s->rw = stub_->Sync(&s->ctx);
    v1::SyncUp up;
    up.set_number(1);
    v1::AgentHello* h = up.mutable_hello();
    h->set_agent_id("node-1");
    h->set_incarnation(5);
    h->set_protocol(2);
    h->add_members("stagger-0");
    h->set_next_count_seq(1);
    v1::HeldAdmit* held = up.add_holds();
    held->set_id(1);
    held->mutable_request()->set_endpoint(kEp);
    held->mutable_request()->set_attempt(2);
    held->mutable_request()->mutable_wait()->set_seconds(60);
    EXPECT_TRUE(s->rw->Write(up));
    return s;
  }
  void Trip() {
    for (int i = 0; i < 2; ++i) {
      engine::ReportInput in;
      in.endpoint = kEp;
      in.outcome = engine::Outcome::kRetryableFailure;
      ASSERT_TRUE(engine_.Report(in).ok());
    }
  }
  engine::Reason AdmitRetry() {
    engine::AdmitInput in;
    in.endpoint = kEp;
    in.attempt = 2;
    return engine_.Admit(in)->reason;
  }
  // The breaker half-opens; the room looks at the line (as a report would
  // make it), and its one waiter gets the probe.
  void HalfOpen() {
    mono_.Advance(2 * kTtl + absl::Seconds(1));  // past the restart hold
    wall_.Advance(absl::Seconds(6));
    room_.Wake(kEp);
  }
  void WaitFor(const std::function<bool()>& done, const char* what) {
    const absl::Time until = absl::Now() + absl::Seconds(20);
    while (!done()) {
      ASSERT_LT(absl::Now(), until) << "timed out waiting for " << what;
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  FakeClock wall_;
  FakeClock mono_{absl::FromUnixSeconds(5000)};
  engine::Engine engine_;
  WaitRoom room_;
  SyncHub hub_;
  SyncService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::AgentSync::Stub> stub_;
};

TEST_F(SyncHeldAnswersTest, TheDrainWritesEveryAnswerBeforeTheOkEnd) {
  Trip();
  std::unique_ptr<Stream> s = OpenHolding();
  WaitFor([&] { return room_.held_for_agents() == 1; }, "the entry");
  // staggerd's drain (DecisionServices::BeforeClose): the room answers
  // every call, then the hub ends every stream.
  room_.Shutdown();
  hub_.Shutdown();
  v1::SyncDown down;
  int answers = 0;
  while (s->rw->Read(&down)) {
    for (const v1::HeldAnswer& a : down.answers()) {
      EXPECT_EQ(a.id(), 1u);
      EXPECT_EQ(a.code(), 0);
      EXPECT_EQ(a.response().decision().verdict(), v1::DEFER);
      ++answers;
    }
  }
  EXPECT_TRUE(s->rw->Finish().ok());
  EXPECT_EQ(answers, 1) << "the held call's answer came before the OK end";
}

TEST_F(SyncHeldAnswersTest, AProbeTheStreamNeverWroteGoesBackAtItsEnd) {
  Trip();
  std::unique_ptr<Stream> s = OpenHolding();
  v1::SyncDown down;
  ASSERT_TRUE(s->rw->Read(&down));  // the snapshot; then it stops reading
  ASSERT_TRUE(down.has_snapshot());
  WaitFor([&] { return room_.held_for_agents() == 1; }, "the entry");
  // Keys leaving clear fill the stream: ~2 MB of pushes against a 64 KiB
  // window the agent never opens. The server's write in progress stalls.
  const std::string path(200, 'p');
  for (int round = 0; round < 8; ++round) {
    for (int i = 0; i < 1000; ++i) {
      const std::string key =
          absl::StrCat("https://tenant-", round, "-", i, ".example/", path);
      engine::ReportInput in;
      in.endpoint = key;
      in.outcome = engine::Outcome::kRateLimited;
      in.retry_after = absl::Minutes(10);
      const absl::StatusOr<engine::Decision> d = engine_.Report(in);
      ASSERT_TRUE(d.ok()) << d.status();
    }
    mono_.Advance(lease::ReplicaSync::kCoalesce);
    absl::SleepFor(absl::Milliseconds(20));  // the pusher's turn
  }
  ASSERT_EQ(hub_.streams(), 1) << "the stream must still be open";
  HalfOpen();
  // The probe went to the held call: its answer waits behind the stalled
  // write, and the endpoint has no probe left.
  WaitFor([&] { return room_.held_for_agents() == 0; }, "the release");
  EXPECT_EQ(AdmitRetry(), engine::Reason::kHalfOpenBusy);
  // The agent goes away. Its unsent answer gives the probe back at once.
  s->ctx.TryCancel();
  WaitFor([&] { return hub_.streams() == 0; }, "the stream's end");
  EXPECT_EQ(AdmitRetry(), engine::Reason::kHalfOpenProbe)
      << "the probe came back without waiting for probe_timeout";
}

}  // namespace
}  // namespace stagger::service
