// staggerd's lease streams (SyncHub + SyncService) in an in-process gRPC
// server, spoken to with the generated stub as an agent would, on fake
// clocks: the snapshot first; no lease in the learning period, then a
// renewal per message; a trip pushed at once, and a probe held until the
// agent acknowledged it; bad messages and another protocol refused by name;
// a stream that does not read falls behind and ends; the drain ends every
// stream with OK.
#include <chrono>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/lease/time_bounds.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/service/server_setup.h"
#include "server/service/sync_hub.h"
#include "server/service/sync_service.h"
#include "stagger/v1/sync.grpc.pb.h"
#include "tests/testing/fake_clock.h"

namespace stagger::service {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://partner.example/orders";
constexpr absl::Duration kTtl = absl::Seconds(1);

class SyncServiceTest : public ::testing::Test {
 protected:
  explicit SyncServiceTest(size_t backlog = SyncService::kMaxBacklogBytes)
      : random_(3),
        engine_(Config(), &wall_, &random_),
        hub_(&engine_, Options(), nullptr, &mono_),
        service_(&hub_, nullptr, backlog) {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    stub_ = v1::AgentSync::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  }
  ~SyncServiceTest() override {
    hub_.Shutdown();
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
  static engine::EngineConfig Config() {
    engine::EngineConfig c;
    auto& b = c.default_policy.breaker;
    b.consecutive_failures = 2;
    b.open_base = absl::Seconds(5);
    b.open_max = absl::Seconds(5);
    b.half_open_probes = 1;
    b.close_after_successes = 1;
    b.probe_timeout = absl::Milliseconds(500);  // learning: one ttl
    c.default_policy.backoff.initial_jitter = absl::Milliseconds(100);
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
  std::unique_ptr<Stream> Open() {
    auto s = std::make_unique<Stream>();
    s->ctx.set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(20));
    s->rw = stub_->Sync(&s->ctx);
    return s;
  }
  static v1::SyncUp Hello(uint32_t protocol = 2) {
    v1::SyncUp up;
    up.set_number(1);
    v1::AgentHello* h = up.mutable_hello();
    h->set_agent_id("node-1");
    h->set_incarnation(5);
    h->set_protocol(protocol);
    h->add_members("stagger-0");
    h->set_next_count_seq(1);
    return up;
  }
  static v1::SyncUp Renew(uint64_t number, uint64_t acked) {
    v1::SyncUp up;
    up.set_number(number);
    up.set_acked_incarnation(77);
    up.set_acked_version(acked);
    return up;
  }
  // Reads what came before the cut, then expects the stream's end:
  // RESOURCE_EXHAUSTED, or CANCELLED (staggerd cancels a peer that would
  // not read its status).
  static void ExpectCutOff(Stream& s) {
    v1::SyncDown down;
    while (s.rw->Read(&down)) {
    }
    const grpc::Status st = s.rw->Finish();
    EXPECT_TRUE(st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                st.error_code() == grpc::StatusCode::CANCELLED)
        << st.error_message();
  }
  void Advance(absl::Duration d) {
    mono_.Advance(d);
    wall_.Advance(d);
  }
  engine::Decision Report(engine::Outcome o) {
    engine::ReportInput in;
    in.endpoint = kEp;
    in.outcome = o;
    return *engine_.Report(in);
  }
  engine::Decision Admit(int attempt) {
    engine::AdmitInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    return *engine_.Admit(in);
  }

  FakeClock wall_;
  FakeClock mono_{absl::FromUnixSeconds(5000)};
  engine::SeededRandom random_;
  engine::Engine engine_;
  SyncHub hub_;
  SyncService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::AgentSync::Stub> stub_;
};

TEST_F(SyncServiceTest, TheSnapshotComesFirstAndLeasesAfterLearning) {
  std::unique_ptr<Stream> s = Open();
  ASSERT_TRUE(s->rw->Write(Hello()));
  v1::SyncDown down;
  ASSERT_TRUE(s->rw->Read(&down));
  ASSERT_TRUE(down.has_snapshot());
  EXPECT_EQ(down.snapshot().incarnation(), 77u);
  EXPECT_EQ(down.snapshot().entries_size(), 0);
  EXPECT_EQ(down.snapshot().policies().default_initial_jitter().nanos(),
            100000000);
  EXPECT_EQ(down.renewed(), 0u) << "learning: no lease in the first ttl";
  Advance(kTtl);
  ASSERT_TRUE(s->rw->Write(Renew(2, down.snapshot().version())));
  ASSERT_TRUE(s->rw->Read(&down));
  EXPECT_EQ(down.renewed(), 2u);
  EXPECT_EQ(down.ttl().seconds(), 1);
}

TEST_F(SyncServiceTest, ATripIsPushedAndTheProbeWaitsForTheAck) {
  std::unique_ptr<Stream> s = Open();
  ASSERT_TRUE(s->rw->Write(Hello()));
  v1::SyncDown down;
  ASSERT_TRUE(s->rw->Read(&down));
  const uint64_t v0 = down.snapshot().version();
  Advance(lease::Stretch(kTtl) + lease::SendBound(absl::Milliseconds(100)));
  ASSERT_TRUE(s->rw->Write(Renew(2, v0)));
  ASSERT_TRUE(s->rw->Read(&down));
  ASSERT_EQ(down.renewed(), 2u) << "leased";

  Report(engine::Outcome::kRetryableFailure);  // near a trip: in the set
  Advance(lease::ReplicaSync::kCoalesce);      // the push goes out
  ASSERT_TRUE(s->rw->Read(&down));
  ASSERT_TRUE(down.has_delta());
  ASSERT_EQ(down.delta().added_size(), 1);
  EXPECT_EQ(down.delta().added(0).target().target(), kEp);
  EXPECT_EQ(down.delta().added(0).why(), v1::NOT_CLEAR_NEAR_TRIP);

  Report(engine::Outcome::kRetryableFailure);  // the trip
  wall_.Advance(absl::Seconds(6));             // half-open
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenBusy)
      << "the agent has not acknowledged";
  ASSERT_TRUE(s->rw->Write(Renew(3, down.delta().to_version())));
  ASSERT_TRUE(s->rw->Read(&down));
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenBusy)
      << "a local admission may still be in its delay";
  Advance(lease::SendBound(absl::Milliseconds(100)));
  EXPECT_EQ(Admit(2).reason, engine::Reason::kHalfOpenProbe);
}

// A peer that sends but never reads: each of its messages gets a renewal,
// which queues once gRPC's flow-control windows are full. Past
// kMaxQueuedAnswers queued, staggerd cancels the stream instead of keeping
// them without end.
TEST_F(SyncServiceTest, APeerThatSendsButNeverReadsIsCancelled) {
  std::unique_ptr<Stream> s = Open();
  ASSERT_TRUE(s->rw->Write(Hello()));
  Advance(kTtl);  // past learning: every message up is answered
  for (int i = 0; i < 200 && hub_.streams() != 1; ++i) {
    absl::SleepFor(absl::Milliseconds(10));  // the hello reaches the hub
  }
  ASSERT_EQ(hub_.streams(), 1);
  uint64_t sent = 1;
  while (sent < 200000 && hub_.streams() == 1 &&
         s->rw->Write(Renew(sent + 1, 0))) {
    ++sent;
  }
  ASSERT_LT(sent, 200000u) << "never cancelled";
  for (int i = 0; i < 100 && hub_.streams() != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(hub_.streams(), 0);
  EXPECT_GT(sent, SyncService::kMaxQueuedAnswers) << "cut at the bound only";
  ExpectCutOff(*s);
}

TEST_F(SyncServiceTest, BadMessagesAndAnotherProtocolAreRefusedByName) {
  {
    std::unique_ptr<Stream> s = Open();
    ASSERT_TRUE(s->rw->Write(Renew(1, 0)));  // no hello
    s->rw->WritesDone();
    v1::SyncDown down;
    EXPECT_FALSE(s->rw->Read(&down));
    const grpc::Status st = s->rw->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(st.error_message().find("hello:"), std::string::npos)
        << st.error_message();
  }
  {
    std::unique_ptr<Stream> s = Open();
    ASSERT_TRUE(s->rw->Write(Hello(/*protocol=*/1)));
    v1::SyncDown down;
    EXPECT_FALSE(s->rw->Read(&down));
    const grpc::Status st = s->rw->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(st.error_message().find("protocol 2, the agent 1"),
              std::string::npos)
        << st.error_message();
  }
  {
    std::unique_ptr<Stream> s = Open();
    v1::SyncUp up = Hello();
    up.mutable_counts()->set_seq(0);
    ASSERT_TRUE(s->rw->Write(up));
    v1::SyncDown down;
    EXPECT_FALSE(s->rw->Read(&down));
    const grpc::Status st = s->rw->Finish();
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(st.error_message(), "counts.seq: must be >= 1");
  }
}

TEST_F(SyncServiceTest, AMixedFleetServesTheNewAgentAndRefusesTheOld) {
  // A protocol-2 agent and, on the same replica, one of protocol 1 (its
  // hello has no protocol field: 0). The old one is refused by name and
  // goes on through unary calls; the new one is leased as ever.
  std::unique_ptr<Stream> now = Open();
  ASSERT_TRUE(now->rw->Write(Hello()));
  v1::SyncDown down;
  ASSERT_TRUE(now->rw->Read(&down));
  const uint64_t v = down.snapshot().version();
  std::unique_ptr<Stream> old = Open();
  v1::SyncUp hello = Hello(/*protocol=*/0);
  hello.mutable_hello()->set_agent_id("node-old");
  hello.mutable_hello()->clear_members();
  ASSERT_TRUE(old->rw->Write(hello));
  EXPECT_FALSE(old->rw->Read(&down));
  const grpc::Status st = old->rw->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("the agent 0; upgrade the agent"),
            std::string::npos)
      << st.error_message();
  Advance(kTtl);
  ASSERT_TRUE(now->rw->Write(Renew(2, v)));
  ASSERT_TRUE(now->rw->Read(&down));
  EXPECT_EQ(down.renewed(), 2u);
}

TEST_F(SyncServiceTest, TheDrainEndsEveryStreamWithOk) {
  std::unique_ptr<Stream> s = Open();
  ASSERT_TRUE(s->rw->Write(Hello()));
  v1::SyncDown down;
  ASSERT_TRUE(s->rw->Read(&down));
  hub_.Shutdown();
  while (s->rw->Read(&down)) {
  }
  EXPECT_TRUE(s->rw->Finish().ok());
  // A stream opened after the drain began is refused.
  std::unique_ptr<Stream> late = Open();
  ASSERT_TRUE(late->rw->Write(Hello()));
  EXPECT_FALSE(late->rw->Read(&down));
  EXPECT_EQ(late->rw->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

class SmallBacklogTest : public SyncServiceTest {
 protected:
  SmallBacklogTest() : SyncServiceTest(/*backlog=*/16 << 10) {}
  void Trouble(int round, int keys = 1000);
};

// `keys` keys leave clear (each a Retry-After window): one push (1,000
// keys: ~250 KB), made by the pusher once the coalescing window has passed.
void SmallBacklogTest::Trouble(int round, int keys) {
  const std::string path(200, 'p');
  for (int i = 0; i < keys; ++i) {
    engine::ReportInput in;
    const std::string key =
        absl::StrCat("https://tenant-", round, "-", i, ".example/", path);
    in.endpoint = key;
    in.outcome = engine::Outcome::kRateLimited;
    in.retry_after = absl::Minutes(10);
    ASSERT_TRUE(engine_.Report(in).ok());
  }
  Advance(lease::ReplicaSync::kCoalesce);
  absl::SleepFor(absl::Milliseconds(20));  // the pusher's turn
}

// An agent that stops reading for a while falls behind once: its queued
// pushes make way for one snapshot. Once it reads again it gets that
// snapshot (every key in trouble), and the stream goes on. (Here every
// push of 1,000 keys is over the 16 KiB backlog.)
TEST_F(SmallBacklogTest, AStreamThatFallsBehindOnceIsResyncedAndGoesOn) {
  std::unique_ptr<Stream> s = Open();
  ASSERT_TRUE(s->rw->Write(Hello()));
  v1::SyncDown down;
  ASSERT_TRUE(s->rw->Read(&down));
  ASSERT_TRUE(down.has_snapshot());
  int rounds = 0;
  while (hub_.resyncs() == 0 && rounds < 200) Trouble(rounds++);
  ASSERT_EQ(hub_.resyncs(), 1) << "the stream never fell behind";
  ASSERT_EQ(hub_.streams(), 1) << "ended instead of resynced";
  // It reads again: the pushes that went out before, then the snapshot.
  size_t in_snapshot = 0;
  while (in_snapshot == 0 && s->rw->Read(&down)) {
    if (down.has_snapshot()) in_snapshot = down.snapshot().entries_size();
  }
  EXPECT_EQ(in_snapshot, static_cast<size_t>(rounds) * 1000);
  // The stream goes on: later pushes (within the backlog) come.
  ASSERT_TRUE(s->rw->Write(Renew(2, down.snapshot().version())));
  Trouble(rounds, /*keys=*/10);
  bool pushed = false;
  while (!pushed && s->rw->Read(&down)) pushed = down.has_delta();
  EXPECT_TRUE(pushed);
  EXPECT_EQ(hub_.resyncs(), 1);
  EXPECT_EQ(hub_.streams(), 1);
  s->ctx.TryCancel();
}

TEST_F(SmallBacklogTest, AStreamThatNeverReadsFallsBehindAndEnds) {
  std::unique_ptr<Stream> s = Open();
  ASSERT_TRUE(s->rw->Write(Hello()));
  // The agent never reads again. Each round, 1,000 more keys leave clear
  // (each a Retry-After window), which goes out as one push of ~250 KB:
  // once gRPC's flow-control windows are full the stream's queue passes 16
  // KiB, makes way for a snapshot, passes it again and the stream is
  // cancelled.
  const std::string path(200, 'p');
  grpc::StatusCode code = grpc::StatusCode::OK;
  for (int round = 0; round < 200 && code == grpc::StatusCode::OK; ++round) {
    for (int i = 0; i < 1000; ++i) {
      engine::ReportInput in;
      const std::string key = absl::StrCat("https://tenant-", round, "-", i,
                                           ".example/", path);
      in.endpoint = key;
      in.outcome = engine::Outcome::kRateLimited;
      in.retry_after = absl::Minutes(10);
      ASSERT_TRUE(engine_.Report(in).ok());
    }
    Advance(lease::ReplicaSync::kCoalesce);
    absl::SleepFor(absl::Milliseconds(20));  // the pusher's turn
    if (hub_.streams() == 0) code = grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  ASSERT_EQ(code, grpc::StatusCode::RESOURCE_EXHAUSTED)
      << "the stream never fell behind";
  s->ctx.TryCancel();
  ExpectCutOff(*s);
}

}  // namespace
}  // namespace stagger::service
