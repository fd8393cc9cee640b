// MemberSpec: a ClientOptions::target parsed into its members (the forms
// are client/coordinator_target.h's), and the order the client compares and hashes
// them in. Internal to the client library.
#ifndef STAGGER_CLIENT_INTERNAL_TARGET_PARSER_H_
#define STAGGER_CLIENT_INTERNAL_TARGET_PARSER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/coordinator_target.h"

namespace stagger::client {

struct MemberSpec {
  // Static list (dns_host empty) ...
  std::vector<Member> members;
  // ... or DNS: resolve dns_host, members listen on dns_port.
  std::string dns_host;
  std::string dns_port;
};

// InvalidArgument naming the entry for an empty entry, a missing port, an
// empty name or a repeated one.
absl::StatusOr<MemberSpec> ParseMembers(absl::string_view target);

// `members` sorted by name, keeping the first of each name (the form the
// client compares and hashes over).
std::vector<Member> SortedByName(std::vector<Member> members);

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_TARGET_PARSER_H_
