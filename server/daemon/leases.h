// Leases: staggerd's lease step (proto/stagger/v1/sync.proto). Builds the
// LeaseHub (what this replica granted, the agents' streams, revocation) and
// the AgentSync service that serves those streams, and gives the engine its
// probe hold (a half-open probe waits while a holder of an older epoch may
// still admit locally).
//
// --lease_ttl is checked with the other flags: 0 (no leases are granted;
// agents decide everything through the coordinator) or [1s, 10m]
// (InvalidArgument naming the flag; staggerd exits kExitBadConfig).
// The caller wires the hub to the services whose decisions end leases
// (CoordinatorService, AdminService), to config reloads (RevokeAll), to the
// eviction loop (Sweep) and to the drain (Shutdown, before the port closes).
// `engine`, `ownership` (nullable) and `metrics` (nullable) must outlive it.
#ifndef STAGGER_SERVER_DAEMON_LEASES_H_
#define STAGGER_SERVER_DAEMON_LEASES_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"
#include "server/metrics/server_metrics.h"
#include "server/service/lease_hub.h"
#include "server/service/ownership.h"
#include "server/service/sync_service.h"

namespace stagger::daemon {

inline constexpr absl::Duration kMinLeaseTtl = absl::Seconds(1);
inline constexpr absl::Duration kMaxLeaseTtl = absl::Minutes(10);
absl::Status CheckLeaseTtl(absl::Duration ttl);

class Leases {
 public:
  Leases(engine::Engine* engine, absl::Duration ttl,
         const service::Ownership* ownership,
         metrics::ServerMetrics* metrics);
  service::LeaseHub& hub() { return hub_; }
  service::SyncService& sync() { return sync_; }
  // Revokes every lease (after a config reload: a policy may have changed).
  void RevokeAll();
  // Forgets leases that ran out and sets stagger_leases (each eviction
  // round).
  void Sweep();

 private:
  metrics::ServerMetrics* const metrics_;
  service::LeaseHub hub_;
  service::SyncService sync_;
};

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_LEASES_H_
