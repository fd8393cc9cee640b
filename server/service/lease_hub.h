// LeaseHub: staggerd's side of leases (proto/stagger/v1/sync.proto): the
// ledger of what it granted (core/lease/lease_ledger.h), the live sync
// streams by agent, and revocation.
//
//   * Handle(agent, up): one message from an agent's stream, applied in
//     order: acknowledgements, counts (each seq once, each endpoint key
//     checked as in Admit; the counts learned by the engine at their
//     times), asks (a grant for each endpoint the engine says is clear and
//     whose key it accepts; ownership from --replicas decides failover's
//     learning wait). Returns
//     the answer to send (applied_seq and grants), or INVALID_ARGUMENT
//     naming the bad field (the stream then ends).
//   * OnEndpointChanged(key): after a failure report, a reset or a forced
//     breaker: if the endpoint has holders and is no longer clear, its
//     epoch rises and every holder's stream gets a revoke at once.
//     RevokeIf(match): an operator's (prefix) pause, or every endpoint
//     after a config reload.
//   * ProbeHeld(key, now): the engine's probe hold (a holder of an older
//     epoch may still admit locally).
//   * Streams attach with their agent's key when their hello arrives and
//     detach when they end; a revoke for an agent without a stream waits
//     for its next hello (PendingRevokes) or its lease's end.
//   * Shutdown(): ends every stream (OK) and refuses new ones: drain.
// Thread-safe. Never calls the engine while holding its own lock.
#ifndef STAGGER_SERVER_SERVICE_LEASE_HUB_H_
#define STAGGER_SERVER_SERVICE_LEASE_HUB_H_

#include <atomic>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "core/lease/lease_ledger.h"
#include "server/metrics/server_metrics.h"
#include "server/service/ownership.h"
#include "stagger/v1/sync.pb.h"

namespace stagger::service {

// What a stream offers the hub: pushes of revokes and an end. The hub
// takes a reference (Ref) under its lock before it lets go of the lock to
// call a peer, and drops it (Unref) after; a peer detaches (under the
// lock) before it drops its own reference, so it is never used once gone.
class SyncPeer {
 public:
  virtual void PushRevokes(std::vector<lease::LeaseRevoke> revokes) = 0;
  virtual void End() = 0;
  virtual void Ref() = 0;
  virtual void Unref() = 0;

 protected:
  ~SyncPeer() = default;
};

class LeaseHub {
 public:
  // `engine`, `clock`, `ownership` (null: one replica, owns every key) and
  // `metrics` (null: none) must outlive the hub. A ttl of 0 grants nothing.
  LeaseHub(engine::Engine* engine, lease::LeaseLedger::Options options,
           const Ownership* ownership, const engine::Clock* clock,
           metrics::ServerMetrics* metrics);

  absl::StatusOr<v1::SyncDown> Handle(const lease::AgentKey& agent,
                                      const v1::SyncUp& up);
  void OnEndpointChanged(absl::string_view endpoint);
  void RevokeIf(const std::function<bool(absl::string_view)>& match);
  bool ProbeHeld(absl::string_view endpoint, absl::Time now);

  // False after Shutdown(): the stream must end at once.
  bool Attach(const lease::AgentKey& agent, SyncPeer* peer);
  void Detach(const lease::AgentKey& agent, SyncPeer* peer);
  std::vector<lease::LeaseRevoke> PendingRevokes(const lease::AgentKey& agent);
  void Shutdown();

  // Called with an endpoint whose counts carried successes (waiting calls
  // may go). Set before the hub is used.
  void set_on_successes(std::function<void(absl::string_view)> fn) {
    on_successes_ = std::move(fn);
  }

  // Forgets run-out leases; returns the leases still recorded.
  size_t Sweep() { return ledger_.Sweep(clock_->Now()); }
  int64_t streams() const;

 private:
  absl::Status ApplyCounts(const lease::AgentKey& agent,
                           const v1::CountReport& counts, v1::SyncDown* down);
  void Notify(std::vector<lease::LeaseLedger::Notice> notices);
  // The peers of `agents` (every peer if null), each with a reference.
  std::vector<SyncPeer*> RefPeers(const std::vector<lease::AgentKey>* agents);

  engine::Engine* const engine_;
  const Ownership* const ownership_;
  const engine::Clock* const clock_;
  metrics::ServerMetrics* const metrics_;
  const bool granting_;
  std::function<void(absl::string_view)> on_successes_;
  lease::LeaseLedger ledger_;
  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<lease::AgentKey, SyncPeer*> peers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_LEASE_HUB_H_
