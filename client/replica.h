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
//   * `on_change` runs (without the replica's lock) after every up/down
//     transition.
// Thread-safe.
#ifndef STAGGER_CLIENT_REPLICA_H_
#define STAGGER_CLIENT_REPLICA_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/client_metrics.h"
#include "grpcpp/channel.h"
#include "server/engine/clock.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::client {

class Replica {
 public:
  // `clock` and `metrics` must outlive the replica.
  Replica(std::string name, std::shared_ptr<grpc::Channel> channel,
          absl::Duration recheck_interval, const engine::Clock* clock,
          ClientMetrics* metrics, std::function<void()> on_change);
  ~Replica();  // stops the watcher (at most one watch period)
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  const std::string& name() const { return name_; }
  v1::RetryCoordinator::Stub* stub() { return stub_.get(); }

  // Whether a call should go to this replica now: up, or down with the
  // recheck interval over (this call claims the probe).
  bool TryUse();
  void MarkUp();
  void MarkDown(grpc::StatusCode code);
  bool up() const;
  // Waits (real time) for the channel to connect.
  bool WaitForConnected(absl::Duration timeout);

 private:
  void Watch();    // the watcher thread's body
  void OnReady();  // channel READY: if down, let the next call probe now

  const std::string name_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
  const absl::Duration recheck_interval_;
  const engine::Clock* clock_;
  ClientMetrics* metrics_;
  const std::function<void()> on_change_;

  mutable absl::Mutex mu_;
  bool up_ ABSL_GUARDED_BY(mu_) = true;
  // While !up_: the earliest instant (clock_) at which to probe again.
  absl::Time next_probe_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();

  absl::Notification stop_;
  std::thread watcher_;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_REPLICA_H_
