// Checks the TSan build's gRPC annotations (tests/sanitizers/grpc_tsan_annotations.cc)
// both ways; built and registered only with STAGGER_SANITIZE=thread. An
// in-process RetryCoordinator server whose Admit answers at once (the same
// callback-API unary path as staggerd's) on 127.0.0.1:0, and callback Admit
// calls to it (the client library's path):
//   tsan_grpc_self_test clean   two closed loops of calls, each call started
//                               from the previous one's callback on a gRPC
//                               thread and carrying data its own callback
//                               reads: TSan must report nothing.
//   tsan_grpc_self_test race    data written while the call is in flight is
//                               read in its callback: TSan must still report
//                               it (ctest checks the report names it).
//   tsan_grpc_self_test unknown_method
//                               calls to a method the server does not have,
//                               answered UNIMPLEMENTED by gRPC's own generic
//                               service: TSan must report nothing (the one
//                               entry in tsan.supp; see there).
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "absl/synchronization/notification.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace {

constexpr int kCalls = 100;

class InstantCoordinator : public stagger::v1::RetryCoordinator::CallbackService {
  grpc::ServerUnaryReactor* Admit(grpc::CallbackServerContext* context,
                                  const stagger::v1::AdmitRequest*,
                                  stagger::v1::AdmitResponse*) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// Race mode: written by the main thread while a call is in flight, read in
// the call's callback.
int in_flight = 0;

void RacyWrite() { in_flight += 1; }
int RacyRead() { return in_flight; }

// A closed loop of calls, each started from the previous call's callback
// (on a gRPC thread) - the hand-offs that only libgrpc orders. Every call
// carries data written before it starts, and its callback checks it.
class Chain {
 public:
  Chain(stagger::v1::RetryCoordinator::Stub* stub, int calls)
      : stub_(stub), left_(calls) {}
  void Start() { Issue(); }
  bool Wait() {
    done_.WaitForNotification();
    return ok_;
  }

 private:
  struct Call {
    grpc::ClientContext context;
    stagger::v1::AdmitRequest request;
    stagger::v1::AdmitResponse response;
    int number = 0;  // written before the call starts, read in its callback
  };
  void Issue() {
    call_ = std::make_unique<Call>();
    call_->number = left_;
    call_->request.set_endpoint("https://example.com/hook");
    call_->request.set_attempt(1);
    stub_->async()->Admit(&call_->context, &call_->request, &call_->response,
                          [this](grpc::Status s) { OnDone(s); });
  }
  void OnDone(const grpc::Status& status) {
    if (!status.ok() || call_->number != left_) {
      std::fprintf(stderr, "call %d: %s\n", left_,
                   status.error_message().c_str());
      ok_ = false;
      done_.Notify();
      return;
    }
    if (--left_ == 0) {
      done_.Notify();
      return;
    }
    Issue();
  }

  stagger::v1::RetryCoordinator::Stub* const stub_;
  int left_;
  std::unique_ptr<Call> call_;
  bool ok_ = true;
  absl::Notification done_;
};

bool RunClean(stagger::v1::RetryCoordinator::Stub& stub) {
  Chain a(&stub, kCalls), b(&stub, kCalls);
  a.Start();
  b.Start();
  const bool a_ok = a.Wait();
  const bool b_ok = b.Wait();
  return a_ok && b_ok;
}

// Data written while the call is in flight, read in its callback.
bool RunRace(stagger::v1::RetryCoordinator::Stub& stub) {
  int seen = 0;  // written by each callback, read after its Notification
  for (int i = 1; i <= kCalls; ++i) {
    grpc::ClientContext context;
    stagger::v1::AdmitRequest request;
    request.set_endpoint("https://example.com/hook");
    request.set_attempt(1);
    stagger::v1::AdmitResponse response;
    absl::Notification done;
    stub.async()->Admit(&context, &request, &response, [&](grpc::Status) {
      seen = RacyRead();
      done.Notify();
    });
    RacyWrite();
    done.WaitForNotification();
  }
  return seen > 0;
}

// Calls to a method no service registers, from two threads at once: each
// is answered by the server's default CallbackGenericService, whose per-call
// objects libgrpc++ creates and destroys.
bool RunUnknownMethod(const std::shared_ptr<grpc::Channel>& channel) {
  auto calls = [&channel](bool* ok) {
    grpc::GenericStub stub(channel);
    for (int i = 0; i < 2 * kCalls; ++i) {
      grpc::ClientContext context;
      grpc::Slice bytes("x", 1);
      grpc::ByteBuffer request(&bytes, 1), response;
      absl::Notification done;
      grpc::Status status;
      stub.UnaryCall(&context, "/stagger.selftest.Nothing/Call",
                     grpc::StubOptions(), &request, &response,
                     [&](grpc::Status s) {
                       status = std::move(s);
                       done.Notify();
                     });
      done.WaitForNotification();
      if (status.error_code() != grpc::StatusCode::UNIMPLEMENTED) *ok = false;
    }
  };
  bool a_ok = true, b_ok = true;
  std::thread a(calls, &a_ok);
  calls(&b_ok);
  a.join();
  return a_ok && b_ok;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  if (mode != "clean" && mode != "race" && mode != "unknown_method") {
    std::fprintf(stderr, "usage: tsan_grpc_self_test clean|race|unknown_method\n");
    return 2;
  }
  InstantCoordinator service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "could not start the server\n");
    return 1;
  }
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto stub = stagger::v1::RetryCoordinator::NewStub(channel);
  const bool ok = mode == "race"    ? RunRace(*stub)
                  : mode == "clean" ? RunClean(*stub)
                                    : RunUnknownMethod(channel);
  server->Shutdown();
  std::printf("%s: %s\n", mode.c_str(), ok ? "done" : "FAILED");
  return ok ? 0 : 1;
}
