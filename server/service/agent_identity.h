// AgentIdentity: the name staggerd knows a lease stream's agent by. Under
// mutual TLS it is the hello's agent_id bound to the peer's identity, so
// that no certificate can act as another's agent: take over its count
// sequence, its stream records or its share of held calls.
//
//   BoundAgentId(peer, agent_id):
//     * an authenticated peer (TLS with a verified client certificate):
//       "<principal>|<name>", where the principal is the one staggerd logs
//       (security::PrincipalOf: the first URI SAN, else DNS SAN, else
//       subject) with '\' and '|' escaped ("\\", "\|"). The first '|' that
//       is not escaped ends it, so two different (principal, name) pairs
//       never give the same id. DaemonSet agents that share one
//       certificate identity keep apart by their names (node names).
//       The agent_id is either the name alone (no '|'), or already
//       qualified, "<principal>|<name>" with the peer's own principal.
//       An agent_id that holds a '|' but does not start with the peer's
//       principal names another identity: PermissionDenied naming both.
//     * otherwise (plaintext, or TLS without client certificates): the
//       agent_id as sent. Anyone who reaches the port can then claim any
//       id (docs/SECURITY.md).
// Example: peer spiffe://example.org/ns/stagger/sa/stagger-agent, agent_id
// node-7 (or "spiffe://example.org/ns/stagger/sa/stagger-agent|node-7") ->
// "spiffe://example.org/ns/stagger/sa/stagger-agent|node-7"; agent_id
// "spiffe://example.org/ns/stagger/sa/other|node-7" -> PermissionDenied.
// Pure; thread-safe.
#ifndef STAGGER_SERVER_SERVICE_AGENT_IDENTITY_H_
#define STAGGER_SERVER_SERVICE_AGENT_IDENTITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/security/authz_policy.h"

namespace stagger::service {

absl::StatusOr<std::string> BoundAgentId(const security::AuthzPeer& peer,
                                         absl::string_view agent_id);

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_AGENT_IDENTITY_H_
