#include "server/service/agent_identity.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stagger::service {
namespace {

// As security::PrincipalOf names an authenticated peer.
absl::string_view Principal(const security::AuthzPeer& peer) {
  if (!peer.uri_sans.empty()) return peer.uri_sans[0];
  if (!peer.dns_sans.empty()) return peer.dns_sans[0];
  return peer.subject;
}

// The principal with '\' and '|' escaped, then the separator '|'.
std::string Prefix(absl::string_view principal) {
  std::string out;
  for (char c : principal) {
    if (c == '\\' || c == '|') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('|');
  return out;
}

}  // namespace

absl::StatusOr<std::string> BoundAgentId(const security::AuthzPeer& peer,
                                         absl::string_view agent_id) {
  if (!peer.authenticated) return std::string(agent_id);
  const std::string prefix = Prefix(Principal(peer));
  if (absl::StartsWith(agent_id, prefix)) return std::string(agent_id);
  if (absl::StrContains(agent_id, '|')) {
    return absl::PermissionDeniedError(absl::StrCat(
        "hello.agent_id: \"", agent_id,
        "\" names another identity than the peer's certificate (",
        Principal(peer), "): send the name alone, or \"", prefix,
        "<name>\""));
  }
  return absl::StrCat(prefix, agent_id);
}

}  // namespace stagger::service
