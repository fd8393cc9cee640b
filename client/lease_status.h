// LeaseStatus: what a CoordinatorClient with leases on (stagger-agent)
// holds and how its lease streams are doing, as one read-only snapshot for
// an operator's page (CoordinatorClient::lease_status; stagger-agent's
// status page, docs/STATUS_PAGE.md). Plain values; nothing here is live.
//
// Under lease protocol 2 (proto/stagger/v1/sync.proto) a client holds one
// lease per replica stream, and a copy of each replica's not-clear set:
// every key of that replica the set does not cover is answered locally
// while the lease lives.
#ifndef STAGGER_CLIENT_LEASE_STATUS_H_
#define STAGGER_CLIENT_LEASE_STATUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace stagger::client {

// One coordinator replica as the client sees it.
struct ReplicaStatus {
  std::string name;    // its stable name (client/coordinator_target.h)
  std::string target;  // its channel's gRPC target
  bool up = true;        // calls go to it (not considered down)
  bool serving = true;   // its health service does not say NOT_SERVING
  bool stream = false;   // a lease stream is kept to it (leases on)
  bool stream_connected = false;  // that stream is open now
  uint64_t incarnation = 0;       // this client's, on the stream (0: none)
  bool leased = false;            // its stream lease lives now
  absl::Duration lease_left;      // how long it lives on, if leased
  bool in_sync = false;           // the copy of its set is current
  uint64_t set_version = 0;       // the copy's version
  int64_t not_clear = 0;          // entries in the copy
  std::string refusal;  // why the replica grants this stream no lease
  int64_t flushes = 0;     // messages sent up the stream so far
  int64_t reconnects = 0;  // streams reopened so far
  // Waiting Admits held here, their entries in this replica's line
  // (sync_session.h, Hold).
  int64_t held_calls = 0;
};

// One entry of a replica's not-clear set, as this client's copy has it:
// keys it covers are decided by the coordinator.
struct NotClearEntry {
  std::string target;   // an endpoint key, a key prefix, or a member
  std::string scope;    // "endpoint", "prefix" or "member"
  std::string why;      // "NEAR_TRIP", "BREAKER", ... (sync.proto)
  std::string replica;  // whose set
  absl::Time until = absl::InfinitePast();  // PAUSED, RETRY_AFTER
};

struct LeaseStatus {
  // The name the coordinators know this client by (lease_holder_id, or the
  // host name it defaulted to); empty without leases.
  std::string holder_id;
  std::vector<ReplicaStatus> replicas;  // the current members
  // Entries after the `after` asked for, in target order, at most the
  // `max` asked for ...
  std::vector<NotClearEntry> not_clear;
  // ... of this many after `after` in all.
  int64_t not_clear_matched = 0;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_LEASE_STATUS_H_
