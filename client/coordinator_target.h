// Members: which coordinator replicas a client talks to, and by what stable
// name each is known -- from ClientOptions::target (the example worker's
// --coordinator, stagger-load's --target, stagger-agent's --coordinator).
// This header has the target forms, the Member value and the hook for
// another membership source; parsing lives in client/internal/target_parser.h. The names are what keys
// are hashed over (core/wire/rendezvous.h), so a client and staggerd's
// --replicas must agree on them.
//
// Target forms:
//   host:port                    one replica (as before sharding).
//   a:port,b:port,...            a static list; each entry's name is
//   name=host:port,...             - the explicit `name=`, else
//                                  - the first label of a DNS host name
//                                    ("stagger-0.stagger-headless.ns.svc:
//                                    50051" is "stagger-0", the pod's own
//                                    hostname, which staggerd uses by
//                                    default), else
//                                  - the whole entry, for an IP literal or
//                                    localhost (no stable name exists).
//                                Names must be distinct.
//   dns:///host:port             the members are what `host` resolves to
//                                (A and AAAA), re-resolved periodically.
//                                Each address's name is the first label of
//                                its reverse (PTR) name: for a StatefulSet
//                                behind a headless Service, Kubernetes DNS
//                                answers the pod's stable name
//                                (stagger-0.stagger-headless.ns.svc...),
//                                and that name:port is then the channel's
//                                target, so a rescheduled pod's new IP is
//                                followed by name. An address without a
//                                PTR name is named by the address itself
//                                (not stable across reschedules).
// Stateless apart from DNS lookups; thread-safe.
#ifndef STAGGER_CLIENT_COORDINATOR_TARGET_H_
#define STAGGER_CLIENT_COORDINATOR_TARGET_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagger::client {

struct Member {
  std::string name;    // stable; what keys are hashed over
  std::string target;  // gRPC target of its channel
  bool operator==(const Member& o) const {
    return name == o.name && target == o.target;
  }
};

// The members `host` resolves to now (sorted by name, one per name).
// Unavailable if the lookup fails or finds nothing.
absl::StatusOr<std::vector<Member>> ResolveDnsMembers(absl::string_view host,
                                                      absl::string_view port);

// Where a dns:/// target's members come from: (host, port) -> members.
// ResolveDnsMembers by default; another membership source (a service
// registry, a test's script) may stand in (ClientOptions::resolve_members).
// An error keeps the members last seen.
using MemberResolver = std::function<absl::StatusOr<std::vector<Member>>(
    absl::string_view host, absl::string_view port)>;

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_COORDINATOR_TARGET_H_
