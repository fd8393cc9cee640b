#include "server/security/authz_policy.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "core/config/json_scanner.h"

namespace stagger::security {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

// Collects the first error with its field path; the walk stops there.
class Walk {
 public:
  explicit Walk(absl::string_view source) : source_(source) {}
  bool failed() const { return !error_.empty(); }
  absl::Status status() const {
    return absl::InvalidArgumentError(absl::StrCat(source_, ": ", error_));
  }
  bool Fail(absl::string_view path, absl::string_view what) {
    if (error_.empty()) error_ = absl::StrCat(path, ": ", what);
    return false;
  }

  // Every key of `object` must be one of `known`.
  bool OnlyKnown(const Struct& object, absl::string_view path,
                 std::initializer_list<absl::string_view> known) {
    for (const auto& [key, unused] : object.fields()) {
      bool ok = false;
      for (absl::string_view k : known) ok = ok || key == k;
      if (!ok) {
        return Fail(path.empty() ? "policy" : path,
                    absl::StrCat("unknown field \"", key, "\" (allowed: ",
                                 absl::StrJoin(known, ", "), ")"));
      }
    }
    return true;
  }
  const Struct* Object(const Value& v, absl::string_view path) {
    if (v.kind_case() == Value::kStructValue) return &v.struct_value();
    Fail(path, "must be an object");
    return nullptr;
  }
  const ListValue* List(const Value& v, absl::string_view path) {
    if (v.kind_case() == Value::kListValue) return &v.list_value();
    Fail(path, "must be an array");
    return nullptr;
  }
  bool String(const Value& v, absl::string_view path, std::string* out) {
    if (v.kind_case() != Value::kStringValue) {
      return Fail(path, "must be a string");
    }
    *out = v.string_value();
    return true;
  }
  bool Patterns(const Value& v, absl::string_view path,
                std::vector<AuthzPattern>* out) {
    const ListValue* list = List(v, path);
    if (list == nullptr) return false;
    for (int i = 0; i < list->values_size(); ++i) {
      std::string s;
      if (!String(list->values(i), absl::StrCat(path, "[", i, "]"), &s)) {
        return false;
      }
      out->push_back(AuthzPattern::From(s));
    }
    return true;
  }

 private:
  std::string source_;
  std::string error_;
};

const Value* Field(const Struct& s, absl::string_view key) {
  auto it = s.fields().find(std::string(key));
  return it == s.fields().end() ? nullptr : &it->second;
}

bool ParseHeader(Walk& w, const Value& v, const std::string& path,
                 AuthzHeaderMatch* out) {
  const Struct* h = w.Object(v, path);
  if (h == nullptr || !w.OnlyKnown(*h, path, {"key", "values"})) return false;
  const Value* key = Field(*h, "key");
  if (key == nullptr) return w.Fail(path + ".key", "is required");
  if (!w.String(*key, path + ".key", &out->key)) return false;
  out->key = absl::AsciiStrToLower(out->key);
  if (out->key.empty() || absl::StartsWith(out->key, ":") ||
      absl::StartsWith(out->key, "grpc-") || out->key == "host") {
    return w.Fail(path + ".key",
                  absl::StrCat("unsupported header \"", out->key,
                               "\" (empty, \":*\", \"grpc-*\" and \"host\" "
                               "cannot be matched)"));
  }
  const Value* values = Field(*h, "values");
  if (values == nullptr) return w.Fail(path + ".values", "is required");
  if (!w.Patterns(*values, path + ".values", &out->values)) return false;
  if (out->values.empty()) return w.Fail(path + ".values", "must not be empty");
  return true;
}

bool ParseRequest(Walk& w, const Value& v, const std::string& path,
                  AuthzRule* rule) {
  const Struct* r = w.Object(v, path);
  if (r == nullptr || !w.OnlyKnown(*r, path, {"paths", "headers"})) {
    return false;
  }
  if (const Value* p = Field(*r, "paths");
      p != nullptr && !w.Patterns(*p, path + ".paths", &rule->paths)) {
    return false;
  }
  const Value* headers = Field(*r, "headers");
  if (headers == nullptr) return true;
  const ListValue* list = w.List(*headers, path + ".headers");
  if (list == nullptr) return false;
  for (int i = 0; i < list->values_size(); ++i) {
    AuthzHeaderMatch h;
    if (!ParseHeader(w, list->values(i),
                     absl::StrCat(path, ".headers[", i, "]"), &h)) {
      return false;
    }
    rule->headers.push_back(std::move(h));
  }
  return true;
}

bool ParseRule(Walk& w, const Value& v, const std::string& path,
               AuthzRule* rule) {
  const Struct* r = w.Object(v, path);
  if (r == nullptr || !w.OnlyKnown(*r, path, {"name", "source", "request"})) {
    return false;
  }
  const Value* name = Field(*r, "name");
  if (name == nullptr) return w.Fail(path + ".name", "is required");
  if (!w.String(*name, path + ".name", &rule->name)) return false;
  if (rule->name.empty()) return w.Fail(path + ".name", "must not be empty");
  if (const Value* source = Field(*r, "source"); source != nullptr) {
    const Struct* s = w.Object(*source, path + ".source");
    if (s == nullptr || !w.OnlyKnown(*s, path + ".source", {"principals"})) {
      return false;
    }
    if (const Value* p = Field(*s, "principals");
        p != nullptr &&
        !w.Patterns(*p, path + ".source.principals", &rule->principals)) {
      return false;
    }
  }
  if (const Value* request = Field(*r, "request"); request != nullptr) {
    return ParseRequest(w, *request, path + ".request", rule);
  }
  return true;
}

bool ParseRules(Walk& w, const Struct& policy, absl::string_view key,
                std::vector<AuthzRule>* out) {
  const Value* v = Field(policy, key);
  if (v == nullptr) return true;
  const ListValue* list = w.List(*v, key);
  if (list == nullptr) return false;
  for (int i = 0; i < list->values_size(); ++i) {
    AuthzRule rule;
    if (!ParseRule(w, list->values(i), absl::StrCat(key, "[", i, "]"),
                   &rule)) {
      return false;
    }
    out->push_back(std::move(rule));
  }
  return true;
}

bool AnyMatches(const std::vector<AuthzPattern>& patterns,
                absl::string_view value) {
  for (const AuthzPattern& p : patterns) {
    if (p.Matches(value)) return true;
  }
  return false;
}

// A43's authenticated principal: URI SANs, then DNS SANs, then the subject.
bool PrincipalMatches(const AuthzPattern& p, const AuthzPeer& peer) {
  if (!peer.authenticated) return false;
  for (const std::string& uri : peer.uri_sans) {
    if (p.Matches(uri)) return true;
  }
  for (const std::string& dns : peer.dns_sans) {
    if (p.Matches(dns)) return true;
  }
  return p.Matches(peer.subject);
}

bool RuleMatches(const AuthzRule& rule, const AuthzRequest& req) {
  if (!rule.principals.empty()) {
    bool any = false;
    for (const AuthzPattern& p : rule.principals) {
      any = any || PrincipalMatches(p, req.peer);
    }
    if (!any) return false;
  }
  if (!rule.paths.empty() && !AnyMatches(rule.paths, req.path)) return false;
  for (const AuthzHeaderMatch& h : rule.headers) {
    auto it = req.headers.find(h.key);
    if (it == req.headers.end() || !AnyMatches(h.values, it->second)) {
      return false;
    }
  }
  return true;
}

}  // namespace

AuthzPattern AuthzPattern::From(absl::string_view text) {
  AuthzPattern p;
  p.text_ = std::string(text);
  if (text == "*") {
    p.kind_ = Kind::kAnyNonEmpty;
  } else if (absl::StartsWith(text, "*")) {
    p.kind_ = Kind::kSuffix;
    p.operand_ = std::string(text.substr(1));
  } else if (absl::EndsWith(text, "*")) {
    p.kind_ = Kind::kPrefix;
    p.operand_ = std::string(text.substr(0, text.size() - 1));
  } else {
    p.operand_ = std::string(text);
  }
  return p;
}

bool AuthzPattern::Matches(absl::string_view value) const {
  switch (kind_) {
    case Kind::kExact:
      return value == operand_;
    case Kind::kPrefix:
      return absl::StartsWith(value, operand_);
    case Kind::kSuffix:
      return absl::EndsWith(value, operand_);
    case Kind::kAnyNonEmpty:
      return !value.empty();
  }
  return false;
}

absl::StatusOr<AuthzPolicy> ParseAuthzPolicy(absl::string_view json,
                                             absl::string_view source) {
  if (json.size() > kMaxAuthzPolicyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", json.size(), " bytes, over the limit of ",
                     kMaxAuthzPolicyBytes));
  }
  const config::JsonScan scan = config::ScanJson(json);
  if (scan.error.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ":", scan.error->at.line, ":",
                     scan.error->at.column, ": ", scan.error->message));
  }
  Value root;
  if (auto s = google::protobuf::util::JsonStringToMessage(
          std::string(json), &root);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", std::string(s.message())));
  }
  Walk w(source);
  AuthzPolicy policy;
  const Struct* top = w.Object(root, "policy");
  if (top != nullptr &&
      w.OnlyKnown(*top, "", {"name", "deny_rules", "allow_rules"})) {
    const Value* name = Field(*top, "name");
    if (name == nullptr) {
      w.Fail("name", "is required");
    } else if (w.String(*name, "name", &policy.name) && policy.name.empty()) {
      w.Fail("name", "must not be empty");
    }
    if (!w.failed() && Field(*top, "allow_rules") == nullptr) {
      w.Fail("allow_rules", "is required");
    }
    if (!w.failed() && ParseRules(w, *top, "deny_rules", &policy.deny_rules)) {
      ParseRules(w, *top, "allow_rules", &policy.allow_rules);
    }
  }
  if (w.failed()) return w.status();
  return policy;
}

AuthzVerdict Evaluate(const AuthzPolicy& policy, const AuthzRequest& request) {
  for (const AuthzRule& rule : policy.deny_rules) {
    if (RuleMatches(rule, request)) return {false, "deny_rules:" + rule.name};
  }
  for (const AuthzRule& rule : policy.allow_rules) {
    if (RuleMatches(rule, request)) return {true, "allow_rules:" + rule.name};
  }
  return {false, "no rule matched"};
}

}  // namespace stagger::security
