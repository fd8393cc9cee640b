// AuthzPolicy: a gRPC authorization policy in the JSON format of gRFC A43
// ("gRPC Authorization Policy"), parsed and evaluated without gRPC's policy
// provider library (Debian's gRPC 1.51 declares it but does not ship it).
//
// Format (A43):
//   { "name": "stagger",                       required
//     "deny_rules":  [ RULE, ... ],            optional
//     "allow_rules": [ RULE, ... ] }           required (may be empty)
//   RULE = { "name": "workers",                required
//            "source":  { "principals": [PATTERN, ...] },        optional
//            "request": { "paths": [PATTERN, ...],                optional
//                         "headers": [ { "key": K,
//                                        "values": [PATTERN, ...] } ] } }
// Unknown fields anywhere are refused, as A43 says; so are header keys
// starting with ":" or "grpc-", and "host".
//
// Matching semantics (A43, as gRPC's own translator implements them):
//   * PATTERN: "*" matches any non-empty value; "*suffix" and "prefix*"
//     match by suffix / prefix; anything else matches exactly.
//     Case-sensitive.
//   * A rule matches when its source AND its request match. Absent or empty
//     lists match anything. Within a list: any element (OR). Headers: every
//     header entry (AND), each by any of its values; a header sent several
//     times is matched as its values joined with ",".
//   * principals match only authenticated peers (TLS with a client
//     certificate): a pattern is tried against each URI SAN (e.g. a SPIFFE
//     ID), then each DNS SAN, then the certificate's subject. A rule with
//     no principals matches any peer, authenticated or not.
//   * paths match the call's ":path", "/package.Service/Method".
//   * Decision: a matching deny rule denies; else a matching allow rule
//     allows; else deny. The matched rule is named in the verdict.
//
// Limits: the file is at most kMaxAuthzPolicyBytes; every error names the
// field ("allow_rules[1].request.paths[0]: ...").
//
// Pure; thread-safe (an AuthzPolicy is immutable once parsed).
#ifndef STAGGER_SERVER_SECURITY_AUTHZ_POLICY_H_
#define STAGGER_SERVER_SECURITY_AUTHZ_POLICY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagger::security {

inline constexpr size_t kMaxAuthzPolicyBytes = 1 << 20;

// One A43 string pattern.
class AuthzPattern {
 public:
  static AuthzPattern From(absl::string_view text);
  bool Matches(absl::string_view value) const;
  const std::string& text() const { return text_; }

 private:
  enum class Kind { kExact, kPrefix, kSuffix, kAnyNonEmpty };
  Kind kind_ = Kind::kExact;
  std::string operand_;  // without the '*'
  std::string text_;     // as written
};

struct AuthzHeaderMatch {
  std::string key;  // lower case
  std::vector<AuthzPattern> values;
};

struct AuthzRule {
  std::string name;
  std::vector<AuthzPattern> principals;  // empty: any peer
  std::vector<AuthzPattern> paths;       // empty: any path
  std::vector<AuthzHeaderMatch> headers;  // all must match
};

struct AuthzPolicy {
  std::string name;
  std::vector<AuthzRule> deny_rules;
  std::vector<AuthzRule> allow_rules;
};

// Who is calling: from the TLS handshake.
struct AuthzPeer {
  bool authenticated = false;  // TLS, and a verified client certificate
  std::vector<std::string> uri_sans;
  std::vector<std::string> dns_sans;
  std::string subject;  // RFC 2253, e.g. "CN=reader,O=example"
};

struct AuthzRequest {
  AuthzPeer peer;
  std::string path;  // ":path"
  // Request metadata by lower-case key; repeated headers joined with ",".
  std::map<std::string, std::string> headers;
};

struct AuthzVerdict {
  bool allowed = false;
  // "deny_rules:NAME", "allow_rules:NAME", or "no rule matched".
  std::string why;
};

// InvalidArgument naming the field for anything A43 refuses; `source`
// (a file name) prefixes every message.
absl::StatusOr<AuthzPolicy> ParseAuthzPolicy(absl::string_view json,
                                             absl::string_view source);

AuthzVerdict Evaluate(const AuthzPolicy& policy, const AuthzRequest& request);

}  // namespace stagger::security

#endif  // STAGGER_SERVER_SECURITY_AUTHZ_POLICY_H_
