// ServiceHarness: the real CoordinatorService in an in-process grpc::Server
// on 127.0.0.1:<ephemeral>, with the server settings staggerd uses
// (service::ConfigureServerBuilder), over an Engine driven by a FakeClock
// and a SeededRandom, and a generated stub connected to it. Optionally a
// real prometheus::Registry + ServerMetrics are passed to the service.
//
// Every call goes over the loopback socket: protobuf serialisation, the
// callback reactor, status mapping, exactly as a worker sees them. The
// client deadline (10 s of real time) only bounds a hung server; no test
// waits on it. Not thread-safe: one test thread drives one harness (the
// SeededRandom it injects is single-threaded; calls are sequential, so the
// server's handler threads never draw concurrently).
#ifndef STAGGER_TESTS_SERVICE_SERVICE_HARNESS_H_
#define STAGGER_TESTS_SERVICE_SERVICE_HARNESS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "server/metrics/server_metrics.h"
#include "server/service/coordinator_service.h"
#include "server/service/server_setup.h"
#include "server/service/wait_room.h"
#include "stagger/v1/coordinator.grpc.pb.h"
#include "stagger/v1/sync.pb.h"
#include "tests/testing/fake_clock.h"

namespace stagger::testing {

// The waiting tests' endpoint: the breaker opens on the third consecutive
// failure for 10 s, then half-opens with one probe whose success closes it.
// An agent's held call `id`: attempt 2 of `endpoint`, waiting `wait`.
inline v1::HeldAdmit HeldAdmitTo(absl::string_view endpoint, uint64_t id,
                                 absl::Duration wait) {
  v1::HeldAdmit h;
  h.set_id(id);
  h.mutable_request()->set_endpoint(std::string(endpoint));
  h.mutable_request()->set_attempt(2);
  h.mutable_request()->mutable_wait()->set_seconds(absl::ToInt64Seconds(wait));
  return h;
}

inline void SetOneProbeBreaker(engine::EngineConfig& config) {
  auto& b = config.default_policy.breaker;
  b.consecutive_failures = 3;
  b.open_base = absl::Seconds(10);
  b.open_max = absl::Seconds(10);
  b.half_open_probes = 1;
  b.close_after_successes = 1;
}

class ServiceHarness {
 public:
  struct Options {
    engine::EngineConfig config;  // defaults: the embedded defaults
    bool with_metrics = false;    // a real registry + ServerMetrics
    uint64_t seed = 1;
    // > 0: a WaitRoom holding at most this many waiting Admits (room());
    // 0: none, a waiting Admit is answered at once.
    size_t max_waiting = 0;
    size_t max_agent_held = 100000;  // with a room: agents' calls
  };

  ServiceHarness() : ServiceHarness(Options{}) {}
  explicit ServiceHarness(Options options)
      : random_(options.seed),
        engine_(options.config, &clock_, &random_) {
    if (options.with_metrics) {
      registry_ = std::make_unique<prometheus::Registry>();
      metrics_ = std::make_unique<metrics::ServerMetrics>(
          *registry_, metrics::ServerMetrics::MaxAttemptLabelFor(options.config));
      metrics_->AttachEngine(&engine_);
    }
    service_ = std::make_unique<service::CoordinatorService>(
        &engine_, metrics_.get(), &clock_);
    if (options.max_waiting > 0) {
      room_ = std::make_unique<service::WaitRoom>(
          &engine_, &clock_,
          service::WaitRoom::Options{options.max_waiting,
                                     options.max_agent_held},
          nullptr, metrics_.get());
      service_->set_wait_room(room_.get());
    }
    grpc::ServerBuilder builder;
    service::ConfigureServerBuilder(builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    // ASSERT_* cannot be used in a constructor; a null server fails every
    // call below, and this names why.
    EXPECT_NE(server_, nullptr) << "in-process server did not start";
    EXPECT_NE(port_, 0) << "no port bound on 127.0.0.1";
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::RetryCoordinator::NewStub(channel_);
  }

  ~ServiceHarness() {
    stub_.reset();
    channel_.reset();
    if (server_ != nullptr) {
      server_->Shutdown(std::chrono::system_clock::now());
      server_->Wait();
    }
    if (metrics_ != nullptr) metrics_->AttachEngine(nullptr);
  }

  ServiceHarness(const ServiceHarness&) = delete;
  ServiceHarness& operator=(const ServiceHarness&) = delete;

  FakeClock& clock() { return clock_; }
  engine::Engine& engine() { return engine_; }
  prometheus::Registry* registry() { return registry_.get(); }
  metrics::ServerMetrics* metrics() { return metrics_.get(); }
  v1::RetryCoordinator::Stub& stub() { return *stub_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  service::CoordinatorService& service() { return *service_; }
  service::WaitRoom* room() { return room_.get(); }  // null: none

  // The text exposition of the registry (what /metrics would serve), after
  // refreshing the engine gauges. Empty without metrics.
  std::string Scrape() {
    if (registry_ == nullptr) return "";
    metrics_->RefreshEngineStats();
    return prometheus::TextSerializer().Serialize(registry_->Collect());
  }

  // One RPC each, over the socket.
  grpc::Status Admit(const v1::AdmitRequest& req, v1::AdmitResponse* resp) {
    grpc::ClientContext ctx;
    Bound(ctx);
    return stub_->Admit(&ctx, req, resp);
  }
  grpc::Status Report(const v1::ReportRequest& req, v1::ReportResponse* resp) {
    grpc::ClientContext ctx;
    Bound(ctx);
    return stub_->Report(&ctx, req, resp);
  }
  grpc::Status AdmitBatch(const v1::AdmitBatchRequest& req,
                          v1::AdmitBatchResponse* resp) {
    grpc::ClientContext ctx;
    Bound(ctx);
    return stub_->AdmitBatch(&ctx, req, resp);
  }
  grpc::Status ReportBatch(const v1::ReportBatchRequest& req,
                           v1::ReportBatchResponse* resp) {
    grpc::ClientContext ctx;
    Bound(ctx);
    return stub_->ReportBatch(&ctx, req, resp);
  }
  grpc::Status GetEndpoint(const v1::GetEndpointRequest& req,
                           v1::GetEndpointResponse* resp) {
    grpc::ClientContext ctx;
    Bound(ctx);
    return stub_->GetEndpoint(&ctx, req, resp);
  }
  grpc::Status ListEndpoints(const v1::ListEndpointsRequest& req,
                             v1::ListEndpointsResponse* resp) {
    grpc::ClientContext ctx;
    Bound(ctx);
    return stub_->ListEndpoints(&ctx, req, resp);
  }

  // Shorthands that discard the response.
  grpc::Status Admit(const v1::AdmitRequest& req) {
    v1::AdmitResponse resp;
    return Admit(req, &resp);
  }
  grpc::Status Report(const v1::ReportRequest& req) {
    v1::ReportResponse resp;
    return Report(req, &resp);
  }
  grpc::Status AdmitBatch(const v1::AdmitBatchRequest& req) {
    v1::AdmitBatchResponse resp;
    return AdmitBatch(req, &resp);
  }
  grpc::Status ReportBatch(const v1::ReportBatchRequest& req) {
    v1::ReportBatchResponse resp;
    return ReportBatch(req, &resp);
  }
  grpc::Status ListEndpoints(const v1::ListEndpointsRequest& req) {
    v1::ListEndpointsResponse resp;
    return ListEndpoints(req, &resp);
  }
  // GetEndpoint by key.
  grpc::Status Get(absl::string_view endpoint, v1::EndpointState* out = nullptr) {
    v1::GetEndpointRequest req;
    req.set_endpoint(std::string(endpoint));
    v1::GetEndpointResponse resp;
    grpc::Status s = GetEndpoint(req, &resp);
    if (out != nullptr) *out = resp.state();
    return s;
  }

 private:
  static void Bound(grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }

  FakeClock clock_;
  engine::SeededRandom random_;
  engine::Engine engine_;
  std::unique_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::ServerMetrics> metrics_;
  std::unique_ptr<service::CoordinatorService> service_;
  std::unique_ptr<service::WaitRoom> room_;  // after service_: gone first
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
};

// Request builders.
inline v1::AdmitRequest AdmitReq(absl::string_view endpoint, int attempt = 1) {
  v1::AdmitRequest r;
  r.set_endpoint(std::string(endpoint));
  r.set_attempt(attempt);
  return r;
}
inline v1::ReportRequest ReportReq(absl::string_view endpoint, int attempt,
                                   v1::Outcome outcome) {
  v1::ReportRequest r;
  r.set_endpoint(std::string(endpoint));
  r.set_attempt(attempt);
  r.set_outcome(outcome);
  return r;
}

// Wire time values.
inline absl::Duration FromWire(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}
inline absl::Time FromWire(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}
inline google::protobuf::Timestamp ToWire(absl::Time t) {
  google::protobuf::Timestamp out;
  const int64_t s = absl::ToUnixSeconds(t);
  out.set_seconds(s);
  out.set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(s))));
  return out;
}
inline google::protobuf::Duration ToWire(absl::Duration d) {
  google::protobuf::Duration out;
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  out.set_seconds(ns / 1000000000);
  out.set_nanos(static_cast<int32_t>(ns % 1000000000));
  return out;
}
inline google::protobuf::Duration RawDuration(int64_t seconds, int32_t nanos) {
  google::protobuf::Duration out;
  out.set_seconds(seconds);
  out.set_nanos(nanos);
  return out;
}
inline google::protobuf::Timestamp RawTimestamp(int64_t seconds, int32_t nanos) {
  google::protobuf::Timestamp out;
  out.set_seconds(seconds);
  out.set_nanos(nanos);
  return out;
}

// "CODE: message", for assertion output.
inline std::string Describe(const grpc::Status& s) {
  return absl::StrCat(static_cast<int>(s.error_code()), ": ", s.error_message());
}

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_SERVICE_SERVICE_HARNESS_H_
