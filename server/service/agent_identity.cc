#include "server/service/agent_identity.h"

#include "absl/strings/str_cat.h"

namespace stagger::service {
namespace {

// As security::PrincipalOf names an authenticated peer.
absl::string_view Principal(const security::AuthzPeer& peer) {
  if (!peer.uri_sans.empty()) return peer.uri_sans[0];
  if (!peer.dns_sans.empty()) return peer.dns_sans[0];
  return peer.subject;
}

}  // namespace

std::string BoundAgentId(const security::AuthzPeer& peer,
                         absl::string_view agent_id) {
  if (!peer.authenticated) return std::string(agent_id);
  std::string out;
  for (char c : Principal(peer)) {
    if (c == '\\' || c == '|') out.push_back('\\');
    out.push_back(c);
  }
  absl::StrAppend(&out, "|", agent_id);
  return out;
}

}  // namespace stagger::service
