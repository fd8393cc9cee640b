// DecisionServices: the services staggerd answers on its gRPC port, wired
// to each other: the coordinator (stagger.v1.RetryCoordinator), the
// operator's Admin service, leases (stagger.v1.AgentSync, lease_step.h) and the
// wait room of waiting Admits (service/wait_room.h). Which events of one
// reach the others:
//   * every decision: a key another member owns makes this replica stand
//     in for that member (lease_step.h);
//   * a report: the room looks at the endpoint's waiting calls;
//   * an operator's pause, resume, reset or forced breaker: the room looks
//     at the waiting calls of what it touched;
//   * a config reload: agents get the new policies (OnConfigReloaded);
//   * the drain, before the port closes: every waiting call is answered and
//     every lease stream ends (BeforeClose).
// What leaves clear reaches the agents through the engine's own feed (its
// conditions and pauses: core/lease/replica_sync.h), not through these.
// --max_waiting_calls and --max_agent_held_calls are checked with the
// other flags: 0 (that kind is not held: answered at once) ..
// kMaxWaitingCalls.
// `engine` and the metrics must outlive it.
#ifndef STAGGER_SERVER_DAEMON_DECISION_SERVICES_H_
#define STAGGER_SERVER_DAEMON_DECISION_SERVICES_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"
#include "grpcpp/grpcpp.h"
#include "server/daemon/lease_step.h"
#include "server/metrics/server_metrics.h"
#include "server/security/security_metrics.h"
#include "server/service/admin_service.h"
#include "server/service/coordinator_service.h"
#include "server/service/ownership.h"
#include "server/service/wait_room.h"

namespace stagger::daemon {

inline constexpr int64_t kMaxWaitingCalls = 10000000;
// `flag`: its name, for the error.
absl::Status CheckMaxWaitingCalls(absl::string_view flag, int64_t value);

class DecisionServices {
 public:
  struct Options {
    absl::Duration lease_ttl;
    int64_t max_waiting_calls = 0;
    int64_t max_agent_held_calls = 0;
    const service::Ownership* ownership = nullptr;  // null: one replica
    // Connects the lease set to the engine's feeds (lease_step.h); null: the
    // set takes them itself.
    service::SyncHub::Attach attach_leases;
  };
  DecisionServices(engine::Engine* engine, const Options& options,
                   metrics::ServerMetrics* metrics,
                   security::SecurityMetrics* security_metrics);

  std::vector<grpc::Service*> services();
  service::CoordinatorService& coordinator() { return coordinator_; }
  void OnConfigReloaded() { leases_.OnConfigReloaded(); }
  void BeforeClose();

 private:
  service::CoordinatorService coordinator_;
  service::AdminService admin_;
  Leases leases_;
  std::unique_ptr<service::WaitRoom> waits_;  // null: no waiting admission
};

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_DECISION_SERVICES_H_
