// ScriptedCoordinator: the conformance scenarios' coordinator
// (tests/conformance/README.md, "coordinator"): a real gRPC server of
// stagger.v1.RetryCoordinator on 127.0.0.1 that answers each call with the
// next scripted answer, moving the scenario's fake clock ("after", a
// timeout's deadline) and firing the delivery's canceller ("cancel") as
// the answer says. "dead" answers every call UNAVAILABLE.
//
//   ScriptedCoordinator coordinator;           // starts serving
//   coordinator.Load(scenario_struct, &clock); // per scenario
//   coordinator.set_canceller(&canceller);     // per delivery
//   ... run ...; coordinator.problems()        // calls beyond the script,
//                                              // answers left over
// Thread-safe: gRPC calls it from its threads while the test reads it.
#ifndef STAGGER_TESTS_CONFORMANCE_CPP_SCRIPTED_COORDINATOR_H_
#define STAGGER_TESTS_CONFORMANCE_CPP_SCRIPTED_COORDINATOR_H_

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/wait.h"
#include "google/protobuf/struct.pb.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "stagger/v1/coordinator.grpc.pb.h"
#include "tests/testing/fake_clock.h"

namespace stagger::conformance {

using google::protobuf::Struct;
using google::protobuf::Value;

inline void SetSeconds(double s, google::protobuf::Duration* out) {
  const int64_t ns = static_cast<int64_t>(s * 1e9 + (s < 0 ? -0.5 : 0.5));
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

// A scripted decision (the file's names) as the proto's.
inline v1::Decision ToDecision(const Struct& d, int attempt) {
  const auto& f = d.fields();
  v1::Decision out;
  v1::Verdict verdict = v1::VERDICT_UNSPECIFIED;
  v1::Reason reason = v1::REASON_UNSPECIFIED;
  v1::Verdict_Parse(f.at("verdict").string_value(), &verdict);
  v1::Reason_Parse(f.at("reason").string_value(), &reason);
  out.set_verdict(verdict);
  out.set_reason(reason);
  out.set_attempt(attempt);
  if (f.contains("admission")) {
    out.set_admission(static_cast<uint64_t>(f.at("admission").number_value()));
  }
  if (f.contains("wait_supported")) {
    out.set_wait_supported(f.at("wait_supported").bool_value());
  }
  if (f.contains("delay")) {
    SetSeconds(f.at("delay").number_value(), out.mutable_delay());
  }
  if (f.contains("defer_for")) {
    SetSeconds(f.at("defer_for").number_value(), out.mutable_defer_for());
  }
  return out;
}

class ScriptedCoordinator final : public v1::RetryCoordinator::Service {
 public:
  ScriptedCoordinator() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                       &port_);
    b.RegisterService(this);
    server_ = b.BuildAndStart();
  }
  ~ScriptedCoordinator() override {
    server_->Shutdown(std::chrono::system_clock::now());
  }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }

  // The scenario's "coordinator" and the clock its answers move.
  void Load(const Value& coordinator, testing::FakeClock* clock) {
    absl::MutexLock l(&mu_);
    clock_ = clock;
    answers_.clear();
    problems_.clear();
    dead_ = coordinator.has_string_value();
    if (dead_) return;
    for (const Value& a : coordinator.list_value().values()) {
      answers_.push_back(a.struct_value());
    }
  }
  void set_canceller(client::Canceller* c) {
    absl::MutexLock l(&mu_);
    canceller_ = c;
  }
  // Calls beyond the script, and answers the scenario left unused.
  std::vector<std::string> problems() const {
    absl::MutexLock l(&mu_);
    std::vector<std::string> out = problems_;
    if (!answers_.empty()) {
      out.push_back(absl::StrCat(answers_.size(), " scripted answers unused"));
    }
    return out;
  }

  // Answered outside the script: a client's call to make sure its channel
  // is up (and seen up) before a scenario starts.
  static constexpr char kWarmUp[] = "conformance.warm-up";

  grpc::Status Admit(grpc::ServerContext* ctx, const v1::AdmitRequest* req,
                     v1::AdmitResponse* resp) override {
    if (req->endpoint() == kWarmUp) {
      resp->mutable_decision()->set_verdict(v1::PROCEED);
      resp->mutable_decision()->set_reason(v1::INITIAL_JITTER);
      return grpc::Status::OK;
    }
    const double wait =
        req->has_wait() ? req->wait().seconds() + req->wait().nanos() / 1e9 : 0;
    return Answer(ctx, req->attempt(), wait, false, resp->mutable_decision());
  }
  grpc::Status Report(grpc::ServerContext* ctx, const v1::ReportRequest* req,
                      v1::ReportResponse* resp) override {
    const bool failure =
        req->outcome() != v1::SUCCESS && req->outcome() != v1::PERMANENT_FAILURE;
    return Answer(ctx, req->attempt(), 0, failure, resp->mutable_decision());
  }

 private:
  grpc::Status Answer(grpc::ServerContext* ctx, int attempt, double wait,
                      bool report_failure, v1::Decision* out) {
    Struct a;
    client::Canceller* canceller;
    {
      absl::MutexLock l(&mu_);
      if (dead_) return {grpc::StatusCode::UNAVAILABLE, "scripted: dead"};
      if (answers_.empty()) {
        problems_.push_back(absl::StrCat("a call beyond the script (attempt ",
                                         attempt, ")"));
        return {grpc::StatusCode::UNAVAILABLE, "scripted: beyond the script"};
      }
      a = answers_.front();
      answers_.pop_front();
      canceller = canceller_;
    }
    const auto& f = a.fields();
    if (f.contains("after")) {
      clock_->Advance(absl::Seconds(f.at("after").number_value()));
    }
    if (f.contains("cancel") && f.at("cancel").bool_value()) {
      canceller->Cancel();
      if (wait > 0) {  // cut short: the client gives the call up
        const absl::Time until = absl::Now() + absl::Seconds(10);
        while (!ctx->IsCancelled() && absl::Now() < until) {
          absl::SleepFor(absl::Milliseconds(1));
        }
        return {grpc::StatusCode::CANCELLED, "scripted: cancelled"};
      }
    }
    if (f.contains("timeout")) {
      clock_->Advance(absl::Seconds(wait > 0 ? wait + 1 : 0.05));
      return {grpc::StatusCode::DEADLINE_EXCEEDED, "scripted: timeout"};
    }
    if (f.contains("error")) {
      grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
      const std::string& name = f.at("error").string_value();
      if (name == "UNAVAILABLE") code = grpc::StatusCode::UNAVAILABLE;
      if (name == "INVALID_ARGUMENT") code = grpc::StatusCode::INVALID_ARGUMENT;
      const std::string message =
          f.contains("message") ? f.at("message").string_value() : "scripted";
      return {code, message};
    }
    const Struct& d = f.at("decision").struct_value();
    const std::string& verdict = d.fields().at("verdict").string_value();
    const bool bump = report_failure && verdict != "DONE";
    *out = ToDecision(d, attempt + (bump ? 1 : 0));
    return grpc::Status::OK;
  }

  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  mutable absl::Mutex mu_;
  std::deque<Struct> answers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> problems_ ABSL_GUARDED_BY(mu_);
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  testing::FakeClock* clock_ = nullptr;
  client::Canceller* canceller_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace stagger::conformance

#endif  // STAGGER_TESTS_CONFORMANCE_CPP_SCRIPTED_COORDINATOR_H_
