// Leases: staggerd's lease step (proto/stagger/v1/sync.proto, protocol 2).
// Builds the SyncHub (the replica's side of the lease protocol: its
// not-clear set pushed to agents, their stream leases, the probe hold) and
// the AgentSync service that serves the streams.
//
// --lease_ttl is checked with the other flags: 0 (no lease is granted;
// agents decide everything through the coordinator) or [1s, 10m]
// (InvalidArgument naming the flag; staggerd exits kExitBadConfig).
// The caller wires config reloads (OnConfigReloaded), the coordinator's
// decisions on keys another member owns (StandIn) and the drain (Shutdown,
// before the port closes). `engine`, `ownership` (nullable) and `metrics`
// (nullable) must outlive it.
#ifndef STAGGER_SERVER_DAEMON_LEASE_STEP_H_
#define STAGGER_SERVER_DAEMON_LEASE_STEP_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"
#include "server/metrics/server_metrics.h"
#include "server/service/ownership.h"
#include "server/service/sync_hub.h"
#include "server/service/sync_service.h"

namespace stagger::daemon {

inline constexpr absl::Duration kMinLeaseTtl = absl::Seconds(1);
inline constexpr absl::Duration kMaxLeaseTtl = absl::Minutes(10);
absl::Status CheckLeaseTtl(absl::Duration ttl);

class Leases {
 public:
  // `attach` connects the lease set to the engine's feeds (staggerd: the
  // watch's fan-outs); null: it takes them itself.
  Leases(engine::Engine* engine, absl::Duration ttl,
         const service::Ownership* ownership, metrics::ServerMetrics* metrics,
         service::SyncHub::Attach attach = nullptr);
  service::SyncHub& hub() { return hub_; }
  service::SyncService& sync() { return sync_; }
  // A reload: agents get the policies' new initial jitters.
  void OnConfigReloaded();
  // The coordinator is deciding `key`, which another member may own.
  void StandIn(absl::string_view key);

 private:
  engine::Engine* const engine_;
  const service::Ownership* const ownership_;
  service::SyncHub hub_;
  service::SyncService sync_;
};

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_LEASE_STEP_H_
