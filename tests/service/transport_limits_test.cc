// service::TransportLimits (server_setup.h), each held over real loopback
// connections to the real CoordinatorService started by
// service::StartServer: a client over a limit is refused, and a client
// within the limits, on its own connection, is served meanwhile.
//
// Long-lived calls are the health service's Watch streams (server
// streaming: SERVING at once, then open until cancelled), the only
// streaming method staggerd serves. Each channel gets its own connection
// (GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL). Waits are polls or calls with
// generous deadlines; no assertion is about speed.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "server/service/coordinator_service.h"
#include "server/service/server_setup.h"
#include "stagger/v1/coordinator.grpc.pb.h"
#include "tests/testing/fake_clock.h"

namespace stagger::service {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// A CoordinatorService on 127.0.0.1:<ephemeral> with `limits`.
class LimitedServer {
 public:
  explicit LimitedServer(const TransportLimits& limits)
      : random_(1),
        engine_(engine::EngineConfig{}, &clock_, &random_),
        service_(&engine_, nullptr, &clock_) {
    EXPECT_TRUE(ValidateTransportLimits(limits).ok());
    auto started = StartServer("127.0.0.1:0", &service_, &port_, limits);
    EXPECT_TRUE(started.ok()) << started.status();
    if (started.ok()) server_ = *std::move(started);
  }
  ~LimitedServer() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now());
  }

  // A channel on a connection of its own, with `args` on top.
  std::shared_ptr<grpc::Channel> Connect(grpc::ChannelArguments args = {}) {
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port_),
                                     grpc::InsecureChannelCredentials(), args);
  }

 private:
  testing::FakeClock clock_;
  engine::SeededRandom random_;
  engine::Engine engine_;
  CoordinatorService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

grpc::Status Admit(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = v1::RetryCoordinator::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::AdmitRequest req;
  req.set_endpoint("https://hooks.example/a");
  req.set_attempt(1);
  v1::AdmitResponse resp;
  return stub->Admit(&ctx, req, &resp);
}

// An open health Watch: Open() waits for its first message (or `deadline`).
class WatchStream {
 public:
  explicit WatchStream(const std::shared_ptr<grpc::Channel>& channel)
      : stub_(Health::NewStub(channel)) {}
  ~WatchStream() {
    ctx_.TryCancel();
    if (reader_) reader_->Finish();
  }
  bool Open(absl::Duration deadline) {
    ctx_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    reader_ = stub_->Watch(&ctx_, HealthCheckRequest());
    HealthCheckResponse resp;
    return reader_->Read(&resp) && resp.status() == HealthCheckResponse::SERVING;
  }
  // Blocks until the server ends the stream (or its deadline); the status.
  grpc::Status WaitForEnd() {
    HealthCheckResponse resp;
    while (reader_->Read(&resp)) {
    }
    grpc::Status s = reader_->Finish();
    reader_.reset();
    return s;
  }

 private:
  std::unique_ptr<Health::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> reader_;
};

TEST(TransportLimitsTest, DefaultsAreValidAndBadValuesAreNamed) {
  EXPECT_TRUE(ValidateTransportLimits(TransportLimits()).ok());
  TransportLimits bad;
  bad.max_receive_message_bytes = 100;
  bad.max_concurrent_streams = 0;
  bad.max_connection_age = absl::Milliseconds(10);
  bad.memory_quota_bytes = 1;
  bad.keepalive_time = absl::Milliseconds(500);
  bad.keepalive_timeout = absl::Hours(2);
  const absl::Status s = ValidateTransportLimits(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "--max_receive_message_bytes: must be in [4096, 1073741824], got 100\n"
            "--max_concurrent_streams: must be in [1, 1000000], got 0\n"
            "--keepalive_time: must be in [1s, 24h], got 500ms\n"
            "--keepalive_timeout: must be in [1s, 1h], got 2h\n"
            "--max_connection_age: must be in [1s, 720h], got 10ms\n"
            "--memory_quota_bytes: must be in [65536, 1099511627776], got 1");
}

TEST(TransportLimitsTest, RequestOverMaxReceiveSizeIsRefusedConnectionServesOn) {
  TransportLimits limits;
  limits.max_receive_message_bytes = 64 << 10;
  LimitedServer server(limits);
  auto channel = server.Connect();
  auto stub = v1::RetryCoordinator::NewStub(channel);

  v1::AdmitBatchRequest big;
  for (int i = 0; i < 1000; ++i) {  // ~100 KB
    v1::AdmitRequest* item = big.add_items();
    item->set_endpoint(absl::StrCat("https://hooks.example/", i, "/",
                                    std::string(80, 'x')));
    item->set_attempt(1);
  }
  ASSERT_GT(big.ByteSizeLong(), size_t{64 << 10});
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::AdmitBatchResponse resp;
  const grpc::Status s = stub->AdmitBatch(&ctx, big, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  EXPECT_EQ(resp.decisions_size(), 0);

  // The same connection, and another, are served.
  EXPECT_TRUE(Admit(channel).ok());
  EXPECT_TRUE(Admit(server.Connect()).ok());
}

TEST(TransportLimitsTest, StreamsOverTheConnectionLimitWaitOthersAreServed) {
  TransportLimits limits;
  limits.max_concurrent_streams = 2;
  LimitedServer server(limits);
  auto greedy = server.Connect();

  WatchStream first(greedy), second(greedy);
  ASSERT_TRUE(first.Open(absl::Seconds(60)));
  ASSERT_TRUE(second.Open(absl::Seconds(60)));
  // A third call on the full connection is not started: it waits on the
  // client until its deadline.
  {
    WatchStream third(greedy);
    EXPECT_FALSE(third.Open(absl::Seconds(2)));
    EXPECT_EQ(third.WaitForEnd().error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // Another connection is served meanwhile.
  EXPECT_TRUE(Admit(server.Connect()).ok());
}

// Channel arguments of a client sending keepalive pings every `interval`,
// with or without calls in flight. (One object per client: SetInt appends,
// and gRPC reads the first value of a repeated key.)
grpc::ChannelArguments PingingEvery(absl::Duration interval) {
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(interval));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  args.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, ms);
  return args;
}

TEST(TransportLimitsTest, ClientPingingTooOftenIsCutOffPoliteOneStays) {
  TransportLimits limits;
  limits.min_ping_interval = absl::Seconds(5);
  limits.max_ping_strikes = 2;
  LimitedServer server(limits);

  // Pings as often as gRPC's client lets it (about every second), with or
  // without calls: after 2 strikes, GOAWAY too_many_pings.
  const grpc::ChannelArguments rude = PingingEvery(absl::Milliseconds(100));
  // Pings every 6 s: within the limit (gRPC's own default minimum, 5 min,
  // would cut this one off too).
  const grpc::ChannelArguments polite = PingingEvery(absl::Seconds(6));

  auto polite_channel = server.Connect(polite);
  WatchStream polite_watch(polite_channel);
  ASSERT_TRUE(polite_watch.Open(absl::Seconds(120)));
  const absl::Time polite_since = absl::Now();

  WatchStream rude_watch(server.Connect(rude));
  ASSERT_TRUE(rude_watch.Open(absl::Seconds(60)));
  EXPECT_EQ(rude_watch.WaitForEnd().error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // The polite client has sent two pings by now (at 6 s and 12 s) and its
  // connection is still the one it started with, serving.
  while (absl::Now() < polite_since + absl::Seconds(14)) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(polite_channel->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_TRUE(Admit(polite_channel).ok());
  EXPECT_EQ(polite_channel->GetState(false), GRPC_CHANNEL_READY);
}

TEST(TransportLimitsTest, ConnectionsAreClosedAtMaxAgeClientsReconnect) {
  TransportLimits limits;
  limits.max_connection_age = absl::Seconds(1);
  limits.max_connection_age_grace = absl::Seconds(1);
  LimitedServer server(limits);
  auto channel = server.Connect();

  WatchStream watch(channel);
  ASSERT_TRUE(watch.Open(absl::Seconds(60)));
  // Cut after age + grace (the stream's 60 s deadline is the generous bound).
  EXPECT_EQ(watch.WaitForEnd().error_code(), grpc::StatusCode::UNAVAILABLE);
  // The client reconnects: the same channel is served.
  EXPECT_TRUE(Admit(channel).ok());
}

TEST(TransportLimitsTest, RequestOverTheMemoryQuotaIsRefusedOthersServed) {
  TransportLimits limits;
  limits.max_receive_message_bytes = 8 << 20;
  limits.memory_quota_bytes = 256 << 10;
  LimitedServer server(limits);
  auto hog = server.Connect();
  auto stub = v1::RetryCoordinator::NewStub(hog);
  // ~2 MB: under the message size limit, over the whole quota.
  v1::AdmitBatchRequest big;
  for (int i = 0; i < 1000; ++i) {
    v1::AdmitRequest* item = big.add_items();
    item->set_endpoint(absl::StrCat("https://hooks.example/", i, "/",
                                    std::string(2000, 'x')));
    item->set_attempt(1);
  }
  ASSERT_GT(big.ByteSizeLong(), size_t{1} << 20);
  for (int round = 0; round < 2; ++round) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::AdmitBatchResponse resp;
    const grpc::Status s = stub->AdmitBatch(&ctx, big, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << s.error_message();
    // Small calls, on the hog's connection and on another, are served.
    EXPECT_TRUE(Admit(hog).ok());
    EXPECT_TRUE(Admit(server.Connect()).ok());
  }
}

}  // namespace
}  // namespace stagger::service
