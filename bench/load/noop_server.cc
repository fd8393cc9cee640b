// stagger-noop-server: the ceiling of staggerd's gRPC stack on this machine.
//
// Implements stagger.v1.RetryCoordinator with the same message shapes and
// the same server set-up as staggerd (service::ConfigureServerBuilder, the
// callback API with every handler finishing inline on the default reactor,
// the default health service and reflection on, and the service's per-call
// message arenas when server/service/arena_allocator.h exists), but decides
// nothing:
//   Admit       -> PROCEED / INITIAL_JITTER, delay 25 ms, attempt as asked
//   Report      -> PROCEED / BACKOFF, delay 200 ms, attempt + 1
//   *Batch      -> the same decision once per item, in order
//   GetEndpoint -> a fixed CLOSED state for the key asked
//   ListEndpoints -> an empty page
// No validation, no engine, no metrics: what staggerd costs on top of this
// is what Stagger itself costs.
//
//   --address  listen address (default 127.0.0.1:0 = a free port)
// Prints "stagger-noop-server: listening on HOST:PORT" on stderr when
// ready (the same form as staggerd's line). SIGTERM/SIGINT: shut down, exit 0.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "core/cli/usage.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/service/server_setup.h"
#include "stagger/v1/coordinator.grpc.pb.h"
// staggerd's per-call message arenas, where the service has them: the
// ceiling must allocate messages the way staggerd does.
#if __has_include("server/service/arena_allocator.h")
#include "server/service/arena_allocator.h"
#define STAGGER_NOOP_ARENAS 1
#endif

ABSL_FLAG(std::string, address, "127.0.0.1:0",
          "listen address host:port (port 0: any free port)");

namespace stagger::bench {
namespace {

constexpr int32_t kAdmitDelayNanos = 25 * 1000 * 1000;    // 25 ms
constexpr int32_t kReportDelayNanos = 200 * 1000 * 1000;  // 200 ms

void FixedAdmit(int32_t attempt, v1::Decision* d) {
  d->set_verdict(v1::PROCEED);
  d->set_reason(v1::INITIAL_JITTER);
  d->mutable_delay()->set_nanos(kAdmitDelayNanos);
  d->set_attempt(attempt);
}

void FixedReport(int32_t attempt, v1::Decision* d) {
  d->set_verdict(v1::PROCEED);
  d->set_reason(v1::BACKOFF);
  d->mutable_delay()->set_nanos(kReportDelayNanos);
  d->set_attempt(attempt + 1);
}

class NoopService final : public v1::RetryCoordinator::CallbackService {
 public:
#ifdef STAGGER_NOOP_ARENAS
  NoopService() {
    SetMessageAllocatorFor_Admit(&admit_alloc_);
    SetMessageAllocatorFor_Report(&report_alloc_);
    SetMessageAllocatorFor_AdmitBatch(&admit_batch_alloc_);
    SetMessageAllocatorFor_ReportBatch(&report_batch_alloc_);
  }
#endif

  grpc::ServerUnaryReactor* Admit(grpc::CallbackServerContext* ctx,
                                  const v1::AdmitRequest* req,
                                  v1::AdmitResponse* resp) override {
    FixedAdmit(req->attempt(), resp->mutable_decision());
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* ctx,
                                   const v1::ReportRequest* req,
                                   v1::ReportResponse* resp) override {
    FixedReport(req->attempt(), resp->mutable_decision());
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* AdmitBatch(grpc::CallbackServerContext* ctx,
                                       const v1::AdmitBatchRequest* req,
                                       v1::AdmitBatchResponse* resp) override {
    resp->mutable_decisions()->Reserve(req->items_size());
    for (const auto& item : req->items()) {
      FixedAdmit(item.attempt(), resp->add_decisions());
    }
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* ReportBatch(
      grpc::CallbackServerContext* ctx, const v1::ReportBatchRequest* req,
      v1::ReportBatchResponse* resp) override {
    resp->mutable_decisions()->Reserve(req->items_size());
    for (const auto& item : req->items()) {
      FixedReport(item.attempt(), resp->add_decisions());
    }
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* GetEndpoint(
      grpc::CallbackServerContext* ctx, const v1::GetEndpointRequest* req,
      v1::GetEndpointResponse* resp) override {
    v1::EndpointState* s = resp->mutable_state();
    s->set_endpoint(req->endpoint());
    s->set_policy("default");
    s->set_breaker_state(v1::CLOSED);
    return Ok(ctx);
  }
  grpc::ServerUnaryReactor* ListEndpoints(
      grpc::CallbackServerContext* ctx, const v1::ListEndpointsRequest*,
      v1::ListEndpointsResponse* resp) override {
    resp->set_total_tracked(0);
    return Ok(ctx);
  }

 private:
  static grpc::ServerUnaryReactor* Ok(grpc::CallbackServerContext* ctx) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

#ifdef STAGGER_NOOP_ARENAS
  service::ArenaMessageAllocator<v1::AdmitRequest, v1::AdmitResponse>
      admit_alloc_;
  service::ArenaMessageAllocator<v1::ReportRequest, v1::ReportResponse>
      report_alloc_;
  service::ArenaMessageAllocator<v1::AdmitBatchRequest, v1::AdmitBatchResponse>
      admit_batch_alloc_;
  service::ArenaMessageAllocator<v1::ReportBatchRequest,
                                 v1::ReportBatchResponse>
      report_batch_alloc_;
#endif
};

int Main() {
  // As staggerd: signals go to sigwait() on this thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  NoopService service;
  int port = 0;
  const std::string address = absl::GetFlag(FLAGS_address);
  absl::StatusOr<std::unique_ptr<grpc::Server>> started =
      service::StartServer(address, &service, &port);
  if (!started.ok()) {
    std::fprintf(stderr, "stagger-noop-server: %s\n",
                 std::string(started.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<grpc::Server> server = *std::move(started);
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  const std::string host = address.substr(0, address.rfind(':'));
  std::fprintf(stderr, "stagger-noop-server: listening on %s:%d\n",
               host.c_str(), port);
  std::fflush(stderr);

  int sig = 0;
  while (sigwait(&signals, &sig) != 0) {
  }
  health->SetServingStatus(false);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server->Wait();
  return 0;
}

}  // namespace
}  // namespace stagger::bench

int main(int argc, char** argv) {
  // --help lists this program's flags (bench/load/).
  stagger::cli::InstallUsage(
      "No-op stagger.v1.RetryCoordinator on staggerd's server set-up: the "
      "load generator's ceiling. Flag: --address.",
      "bench/load");
  absl::ParseCommandLine(argc, argv);
  return stagger::bench::Main();
}
