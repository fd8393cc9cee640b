// Ownership: this replica's view of which endpoint keys it owns when N
// staggerd replicas share the keys by rendezvous hashing over their stable
// names (core/wire/rendezvous.h, the hashing the client library routes
// with). Replicas do not talk to each other: a request for a key this
// replica does not own (a stale or misconfigured client, or the owner was
// skipped as unavailable) is still answered, and counted as misrouted.
//
// The view comes from two flags:
//   --replicas      the members' names, comma-separated
//                   ("stagger-0,stagger-1,stagger-2"); empty: one replica,
//                   every key is owned here (no counting).
//   --replica_name  this replica's name; empty: the HOSTNAME environment
//                   variable (a StatefulSet pod's hostname is its name).
// Immutable; thread-safe.
#ifndef STAGGER_SERVER_SERVICE_OWNERSHIP_H_
#define STAGGER_SERVER_SERVICE_OWNERSHIP_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/wire/rendezvous.h"

namespace stagger::service {

class Ownership {
 public:
  // nullopt when `replicas` is empty. InvalidArgument naming the flag if a
  // name is empty or repeated, or if this replica's name (`replica_name`,
  // else `hostname`) is not one of them.
  static absl::StatusOr<std::optional<Ownership>> FromFlags(
      absl::string_view replicas, absl::string_view replica_name,
      absl::string_view hostname);

  bool Owns(absl::string_view key) const { return members_.Owner(key) == self_; }
  const std::string& self() const { return members_.names()[self_]; }
  const wire::Rendezvous& members() const { return members_; }

 private:
  Ownership(wire::Rendezvous members, size_t self)
      : members_(std::move(members)), self_(self) {}
  wire::Rendezvous members_;
  size_t self_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_OWNERSHIP_H_
