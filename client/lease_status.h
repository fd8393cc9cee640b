// LeaseStatus: what a CoordinatorClient with leases on (stagger-agent)
// holds and how its lease streams are doing, as one read-only snapshot for
// an operator's page (CoordinatorClient::lease_status; stagger-agent's
// status page, docs/STATUS_PAGE.md). Plain values; nothing here is live.
#ifndef STAGGER_CLIENT_LEASE_STATUS_H_
#define STAGGER_CLIENT_LEASE_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace stagger::client {

// One coordinator replica as the client sees it.
struct ReplicaStatus {
  std::string name;    // its stable name (client/members.h)
  std::string target;  // its channel's gRPC target
  bool up = true;        // calls go to it (not considered down)
  bool serving = true;   // its health service does not say NOT_SERVING
  bool stream = false;   // a lease stream is kept to it (leases on)
  bool stream_connected = false;  // that stream is open now
  uint64_t incarnation = 0;       // the stream's incarnation (0: no stream)
  int64_t leases_held = 0;        // live leases from this replica now
  int64_t flushes = 0;     // messages sent up the stream so far
  int64_t reconnects = 0;  // streams reopened so far
  // Waiting Admits held here, their entries in this replica's line
  // (sync_session.h, Hold).
  int64_t held_calls = 0;
};

// One live lease: this client may answer first attempts and successes on
// `endpoint` itself until `expires` (or a revoke), `left` more first
// attempts of the `allowance` granted.
struct HeldLease {
  std::string endpoint;
  std::string replica;  // the granting replica's name
  uint64_t epoch = 0;
  absl::Time expires;
  uint32_t allowance = 0;
  uint32_t left = 0;
};

struct LeaseStatus {
  // The name the coordinators know this client by (lease_holder_id, or the
  // host name it defaulted to); empty without leases.
  std::string holder_id;
  std::vector<ReplicaStatus> replicas;  // the current members
  // Live leases on endpoints after the `after` asked for, in endpoint
  // order, at most the `max` asked for ...
  std::vector<HeldLease> leases;
  // ... of this many live leases after `after` in all.
  int64_t leases_matched = 0;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_LEASE_STATUS_H_
