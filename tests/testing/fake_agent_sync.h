// FakeReplica: an in-process coordinator replica on 127.0.0.1:<ephemeral>
// for the client's and the agent's lease-stream tests: a FakeCoordinator
// (stagger.v1.RetryCoordinator, fake_coordinator.h) and a scripted
// stagger.v1.AgentSync.
//
// Every lease stream gets a snapshot (an empty set) and a renewal in
// answer to its hello. Then, by mode:
//   kHoldForever  it reads every message, renews each one and records the
//                 held calls it carries (holds()), never answering them;
//   kNeverRead    it never reads again: the agent's writes fill HTTP/2
//                 flow control and block (a replica that is stuck, or a
//                 partition that has not yet broken the connection).
// Streams end when the client cancels, or at the server's shutdown.
//
// Thread-safe.
#ifndef STAGGER_TESTS_TESTING_FAKE_AGENT_SYNC_H_
#define STAGGER_TESTS_TESTING_FAKE_AGENT_SYNC_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/sync.grpc.pb.h"
#include "tests/testing/fake_coordinator.h"

namespace stagger::testing {

class FakeAgentSync final : public v1::AgentSync::Service {
 public:
  enum class Mode { kHoldForever, kNeverRead };
  explicit FakeAgentSync(Mode mode) : mode_(mode) {}

  int holds() const {
    absl::MutexLock l(&mu_);
    return holds_;
  }
  int streams() const {
    absl::MutexLock l(&mu_);
    return streams_;
  }
  // Ends every stream (before the server shuts down).
  void Stop() {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }

  grpc::Status Sync(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::SyncDown, v1::SyncUp>* stream) override {
    v1::SyncUp up;
    if (!stream->Read(&up) || !up.has_hello()) return grpc::Status::OK;
    {
      absl::MutexLock l(&mu_);
      ++streams_;
      holds_ += up.holds_size();
    }
    v1::SyncDown first = Renewal(up.number());
    first.mutable_snapshot()->set_incarnation(kIncarnation);
    first.mutable_snapshot()->set_version(1);
    if (!stream->Write(first)) return grpc::Status::OK;
    if (mode_ == Mode::kNeverRead) {
      absl::MutexLock l(&mu_);
      while (!stop_ && !ctx->IsCancelled()) {
        mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(10));
      }
      return grpc::Status::OK;
    }
    while (stream->Read(&up)) {
      {
        absl::MutexLock l(&mu_);
        holds_ += up.holds_size();
        if (stop_) break;
      }
      if (!stream->Write(Renewal(up.number()))) break;
    }
    return grpc::Status::OK;
  }

 private:
  static constexpr uint64_t kIncarnation = 9;

  static v1::SyncDown Renewal(uint64_t number) {
    v1::SyncDown d;
    d.set_renewed(number);
    d.mutable_ttl()->set_seconds(2);
    d.set_version(1);
    const absl::Time now = absl::Now();
    d.mutable_replica_time()->set_seconds(absl::ToUnixSeconds(now));
    return d;
  }

  const Mode mode_;
  mutable absl::Mutex mu_;
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  int streams_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

class FakeReplica {
 public:
  explicit FakeReplica(FakeAgentSync::Mode mode) : sync_(mode) {
    grpc::ServerBuilder builder;
    // No BDP probing: a stream's window stays at 64 KiB while it is not
    // read (with it, gRPC widens every window to megabytes).
    builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    builder.RegisterService(&coordinator_);
    builder.RegisterService(&sync_);
    server_ = builder.BuildAndStart();
  }
  ~FakeReplica() {
    sync_.Stop();
    coordinator_.Release();
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  }
  bool ok() const { return server_ != nullptr && port_ > 0; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  FakeCoordinator& coordinator() { return coordinator_; }
  FakeAgentSync& sync() { return sync_; }

 private:
  FakeCoordinator coordinator_;
  FakeAgentSync sync_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_FAKE_AGENT_SYNC_H_
