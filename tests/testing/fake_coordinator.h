// FakeCoordinator: an in-process stagger.v1.RetryCoordinator service on
// 127.0.0.1:<ephemeral port> whose answers the test controls, for the client
// library's unit tests (no staggerd needed).
//
// Each unary method calls a handler the test sets (default: answers PROCEED
// ADMITTED / DONE for a success report). Hold(d) makes every call wait up to
// `d` before its handler runs -- a slow coordinator -- and Release() ends
// every hold at once (the destructor releases, so shutdown never waits for
// a hold). Calls and the last request of each method are recorded.
//
// Thread-safe: gRPC calls the service from its own threads while the test
// reconfigures it.
#ifndef STAGGER_TESTS_TESTING_FAKE_COORDINATOR_H_
#define STAGGER_TESTS_TESTING_FAKE_COORDINATOR_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::testing {

inline v1::Decision MakeDecision(v1::Verdict verdict, v1::Reason reason,
                                 int attempt,
                                 absl::Duration delay = absl::ZeroDuration()) {
  v1::Decision d;
  d.set_verdict(verdict);
  d.set_reason(reason);
  d.set_attempt(attempt);
  if (verdict == v1::PROCEED) {
    d.mutable_delay()->set_seconds(absl::ToInt64Seconds(delay));
    d.mutable_delay()->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(
        delay - absl::Seconds(absl::ToInt64Seconds(delay)))));
  }
  return d;
}

class FakeCoordinator final : public v1::RetryCoordinator::Service {
 public:
  using AdmitHandler =
      std::function<grpc::Status(const v1::AdmitRequest&, v1::AdmitResponse*)>;
  using ReportHandler = std::function<grpc::Status(const v1::ReportRequest&,
                                                   v1::ReportResponse*)>;
  using AdmitBatchHandler = std::function<grpc::Status(
      const v1::AdmitBatchRequest&, v1::AdmitBatchResponse*)>;

  FakeCoordinator() {
    admit_ = [](const v1::AdmitRequest& req, v1::AdmitResponse* resp) {
      *resp->mutable_decision() =
          MakeDecision(v1::PROCEED, v1::ADMITTED, req.attempt());
      return grpc::Status::OK;
    };
    report_ = [](const v1::ReportRequest& req, v1::ReportResponse* resp) {
      *resp->mutable_decision() =
          req.outcome() == v1::SUCCESS
              ? MakeDecision(v1::DONE, v1::SUCCEEDED, req.attempt())
              : MakeDecision(v1::PROCEED, v1::BACKOFF, req.attempt() + 1,
                             absl::Milliseconds(200));
      return grpc::Status::OK;
    };
    admit_batch_ = [](const v1::AdmitBatchRequest& req,
                      v1::AdmitBatchResponse* resp) {
      for (const auto& item : req.items()) {
        *resp->add_decisions() =
            MakeDecision(v1::PROCEED, v1::ADMITTED, item.attempt());
      }
      return grpc::Status::OK;
    };
  }

  void SetAdmit(AdmitHandler h) {
    absl::MutexLock l(&mu_);
    admit_ = std::move(h);
  }
  void SetReport(ReportHandler h) {
    absl::MutexLock l(&mu_);
    report_ = std::move(h);
  }
  void SetAdmitBatch(AdmitBatchHandler h) {
    absl::MutexLock l(&mu_);
    admit_batch_ = std::move(h);
  }
  // Every method answers `status` (e.g. UNAVAILABLE) until changed.
  void FailEverything(grpc::Status status) {
    SetAdmit([status](const v1::AdmitRequest&, v1::AdmitResponse*) {
      return status;
    });
    SetReport([status](const v1::ReportRequest&, v1::ReportResponse*) {
      return status;
    });
    SetAdmitBatch(
        [status](const v1::AdmitBatchRequest&, v1::AdmitBatchResponse*) {
          return status;
        });
  }
  // Calls wait up to `d` (real time) before answering; zero: no wait.
  void Hold(absl::Duration d) {
    absl::MutexLock l(&mu_);
    hold_ = d;
    released_ = false;
  }
  // Ends every hold now (and makes later holds no-ops until Hold()).
  void Release() {
    absl::MutexLock l(&mu_);
    released_ = true;
  }

  int admit_calls() const {
    absl::MutexLock l(&mu_);
    return admit_calls_;
  }
  int report_calls() const {
    absl::MutexLock l(&mu_);
    return report_calls_;
  }
  int calls() const {
    absl::MutexLock l(&mu_);
    return admit_calls_ + report_calls_ + batch_calls_;
  }
  v1::AdmitRequest last_admit() const {
    absl::MutexLock l(&mu_);
    return last_admit_;
  }
  v1::ReportRequest last_report() const {
    absl::MutexLock l(&mu_);
    return last_report_;
  }

  grpc::Status Admit(grpc::ServerContext*, const v1::AdmitRequest* req,
                     v1::AdmitResponse* resp) override {
    AdmitHandler h;
    {
      absl::MutexLock l(&mu_);
      ++admit_calls_;
      last_admit_ = *req;
      HoldLocked();
      h = admit_;
    }
    return h(*req, resp);
  }
  grpc::Status Report(grpc::ServerContext*, const v1::ReportRequest* req,
                      v1::ReportResponse* resp) override {
    ReportHandler h;
    {
      absl::MutexLock l(&mu_);
      ++report_calls_;
      last_report_ = *req;
      HoldLocked();
      h = report_;
    }
    return h(*req, resp);
  }
  grpc::Status AdmitBatch(grpc::ServerContext*,
                          const v1::AdmitBatchRequest* req,
                          v1::AdmitBatchResponse* resp) override {
    AdmitBatchHandler h;
    {
      absl::MutexLock l(&mu_);
      ++batch_calls_;
      HoldLocked();
      h = admit_batch_;
    }
    return h(*req, resp);
  }

 private:
  void HoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (hold_ <= absl::ZeroDuration()) return;
    // Blocks on the condition, not a sleep: Release() ends it at once.
    mu_.AwaitWithTimeout(absl::Condition(&released_), hold_);
  }

  mutable absl::Mutex mu_;
  AdmitHandler admit_ ABSL_GUARDED_BY(mu_);
  ReportHandler report_ ABSL_GUARDED_BY(mu_);
  AdmitBatchHandler admit_batch_ ABSL_GUARDED_BY(mu_);
  absl::Duration hold_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  int admit_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int report_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int batch_calls_ ABSL_GUARDED_BY(mu_) = 0;
  v1::AdmitRequest last_admit_ ABSL_GUARDED_BY(mu_);
  v1::ReportRequest last_report_ ABSL_GUARDED_BY(mu_);
};

// A gRPC server on 127.0.0.1 (ephemeral port) serving a FakeCoordinator.
class FakeCoordinatorServer {
 public:
  FakeCoordinatorServer() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~FakeCoordinatorServer() {
    service_.Release();
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  }
  bool ok() const { return server_ != nullptr && port_ > 0; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeCoordinator& service() { return service_; }

 private:
  FakeCoordinator service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_FAKE_COORDINATOR_H_
