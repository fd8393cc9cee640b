// PeerHealth: this replica and its peers as the status page shows them.
//
// The members are --replicas' names (service::Ownership); names alone say
// nothing about where a peer listens (they are rendezvous-hashing names,
// e.g. StatefulSet pod names), so where to ask is a separate, optional
// flag: --status_peers "name=host:port,..." (ParseStatusPeers). Each peer
// given an address is asked the gRPC health service's Check("") there, over
// plaintext: point it at the peers' --health_address ports (plaintext by
// design, so this works when the gRPC ports use TLS). A peer without an
// address shows health "UNKNOWN" with a detail saying so; this replica is
// "SERVING" (it is answering the page).
//
// A background thread checks every peer every kInterval, each call with a
// kDeadline; the page only reads the last results (Snapshot), so a slow
// or unreachable peer never slows a page. Health values are the health
// service's names (SERVING, NOT_SERVING, SERVICE_UNKNOWN), "UNREACHABLE"
// (the call failed: the detail has gRPC's code and message) or "UNKNOWN"
// (no address, or not checked yet).
//
// Thread-safety: Snapshot from any thread; Start/Stop from the owner.
#ifndef STAGGER_SERVER_STATUS_PEER_HEALTH_H_
#define STAGGER_SERVER_STATUS_PEER_HEALTH_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace stagger::status {

struct PeerStatus {
  std::string name;
  bool self = false;
  std::string address;  // "" if --status_peers does not give one
  std::string health = "UNKNOWN";
  std::string detail;
  absl::Time checked_at = absl::InfinitePast();  // never checked
};

// "name=host:port,..." -> name -> address. Empty `flag_value`: none.
// InvalidArgument naming --status_peers for a piece without '=', an empty
// name or address, a name given twice, a name not among `members`, or this
// replica's own name (`self`).
absl::StatusOr<std::map<std::string, std::string>> ParseStatusPeers(
    absl::string_view flag_value, const std::vector<std::string>& members,
    absl::string_view self);

class PeerHealth {
 public:
  static constexpr absl::Duration kInterval = absl::Seconds(5);
  static constexpr absl::Duration kDeadline = absl::Seconds(2);

  // `members` in --replicas order (empty: one replica, `self` may be "").
  PeerHealth(std::vector<std::string> members, std::string self,
             std::map<std::string, std::string> addresses);
  ~PeerHealth();  // Stop()
  PeerHealth(const PeerHealth&) = delete;
  PeerHealth& operator=(const PeerHealth&) = delete;

  // The thread: CheckOnce() now, then every kInterval until Stop().
  void Start();
  void Stop();
  // One round of checks, on the calling thread.
  void CheckOnce();

  // Every member in --replicas order (this replica alone without them).
  std::vector<PeerStatus> Snapshot() const;

 private:
  struct Peer;
  std::vector<std::unique_ptr<Peer>> peers_;  // fixed at construction
  mutable absl::Mutex mu_;
  std::vector<PeerStatus> statuses_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace stagger::status

#endif  // STAGGER_SERVER_STATUS_PEER_HEALTH_H_
