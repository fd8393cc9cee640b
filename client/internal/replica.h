// Replica: one coordinator replica as CoordinatorClient sees it -- its
// channel and stub, and whether calls go to it. Internal to the client
// library (not a public header).
//
// Contract (the health half of coordinator_client.h's):
//   * Up: calls go to it. A call that fails (anything but INVALID_ARGUMENT,
//     which is the caller's bug) marks it down and counts the error.
//   * Down: no call goes to it until recheck_interval (on `clock`) has
//     passed since the last failure; then TryUse lets one call through as
//     the probe. Its first answer marks it up.
//   * A watcher thread waits on the channel, which also polls its
//     connections (with the synchronous API nothing else does between calls,
//     and gRPC 1.51 would notice a reconnect or a GOAWAY only through its
//     5 s backup poller). It asks the channel to reconnect whenever it goes
//     idle; when the channel becomes READY while the replica is down, the
//     next call probes it at once instead of waiting out the interval.
//   * With a health interval (several replicas), the watcher also asks the
//     replica's gRPC health service (grpc.health.v1, service
//     stagger.v1.RetryCoordinator) every interval. NOT_SERVING (a draining
//     replica) makes serving() false until it answers SERVING again; the
//     router then prefers the key's next choice. Health RPC errors change
//     nothing (unreachability shows in the calls themselves, and a server
//     without the health service answers UNIMPLEMENTED).
//   * `on_change` runs (without the replica's lock) after every up/down
//     transition.
//   * With options.sync (leases), the replica keeps a lease stream on its
//     channel (sync_session.h); sync() is null otherwise.
// Thread-safe.
#ifndef STAGGER_CLIENT_INTERNAL_REPLICA_H_
#define STAGGER_CLIENT_INTERNAL_REPLICA_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/internal/client_metrics.h"
#include "client/internal/sync_session.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/channel.h"
#include "core/engine/clock.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::client {

class Replica {
 public:
  struct Options {
    absl::Duration recheck_interval = absl::Seconds(1);
    // Zero: no health checks (serving() stays true).
    absl::Duration health_interval = absl::ZeroDuration();
    const engine::Clock* clock = nullptr;  // must outlive the replica
    ClientMetrics* metrics = nullptr;      // must outlive the replica
    std::function<void()> on_change;
    // Set: keep a lease stream to this replica.
    std::optional<SyncSession::Options> sync;
    // For waiting calls (their own connection); null: `channel`.
    std::shared_ptr<grpc::Channel> waiting_channel;
  };
  Replica(std::string name, std::string target,
          std::shared_ptr<grpc::Channel> channel, Options options);
  ~Replica();  // stops the watcher (at most one watch period)
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  const std::string& name() const { return name_; }
  const std::string& target() const { return target_; }
  v1::RetryCoordinator::Stub* stub() { return stub_.get(); }
  // For waiting calls (Options::waiting_channel).
  v1::RetryCoordinator::Stub* waiting_stub() { return waiting_stub_.get(); }
  // The lease stream; null without leases.
  SyncSession* sync() { return sync_.get(); }

  // Whether a call should go to this replica now: up, or down with the
  // recheck interval over (this call claims the probe).
  bool TryUse();
  void MarkUp();
  void MarkDown(grpc::StatusCode code);
  bool up() const;
  // False while the health service says NOT_SERVING.
  bool serving() const { return serving_.load(std::memory_order_relaxed); }
  // Waits (real time) for the channel to connect.
  bool WaitForConnected(absl::Duration timeout);

 private:
  void Watch();    // the watcher thread's body
  void OnReady();  // channel READY: if down, let the next call probe now
  void CheckHealth();

  const std::string name_;
  const std::string target_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
  const std::unique_ptr<v1::RetryCoordinator::Stub> waiting_stub_;
  const std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  const Options options_;
  std::atomic<bool> serving_{true};

  mutable absl::Mutex mu_;
  bool up_ ABSL_GUARDED_BY(mu_) = true;
  // While !up_: the earliest instant (clock_) at which to probe again.
  absl::Time next_probe_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  absl::Notification stop_;
  std::thread watcher_;
  std::unique_ptr<SyncSession> sync_;  // stopped before the channel goes
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_REPLICA_H_
