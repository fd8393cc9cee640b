// The A43 policy evaluator and parser, table-tested against the format's
// semantics (server/security/authz_policy.h): patterns, principal matching
// (URI SANs, DNS SANs, subject; authenticated peers only), paths, headers,
// deny before allow, default deny, and every refusal naming its field.
#include "server/security/authz_policy.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"

namespace stagger::security {
namespace {

using ::testing::HasSubstr;

struct PatternCase {
  const char* pattern;
  const char* value;
  bool matches;
};

TEST(AuthzPatternTest, ExactPrefixSuffixAndStar) {
  const std::vector<PatternCase> cases = {
      {"/a.B/C", "/a.B/C", true},
      {"/a.B/C", "/a.B/Cx", false},
      {"/a.B/C", "/a.b/C", false},  // case-sensitive
      {"/a.B/*", "/a.B/C", true},
      {"/a.B/*", "/a.B/", true},
      {"/a.B/*", "/a.C/D", false},
      {"*/C", "/a.B/C", true},
      {"*/C", "/a.B/D", false},
      {"*", "anything", true},
      {"*", "", false},  // "*" is any non-empty value
      {"a*b", "a*b", true},  // '*' inside is literal (exact match)
      {"a*b", "axb", false},
      {"", "", true},
      {"", "x", false},
  };
  for (const PatternCase& c : cases) {
    EXPECT_EQ(AuthzPattern::From(c.pattern).Matches(c.value), c.matches)
        << "pattern \"" << c.pattern << "\" value \"" << c.value << "\"";
  }
}

AuthzPolicy MustParse(const std::string& json) {
  absl::StatusOr<AuthzPolicy> p = ParseAuthzPolicy(json, "policy.json");
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : AuthzPolicy{};
}

AuthzPeer Cert(std::vector<std::string> uris, std::vector<std::string> dns,
               std::string subject = "CN=x,O=y") {
  AuthzPeer p;
  p.authenticated = true;
  p.uri_sans = std::move(uris);
  p.dns_sans = std::move(dns);
  p.subject = std::move(subject);
  return p;
}

constexpr char kPolicy[] = R"json({
  "name": "t",
  "deny_rules": [
    {"name": "no-rogue", "source": {"principals": ["spiffe://t/rogue"]}},
    {"name": "no-debug-header",
     "request": {"headers": [{"key": "X-Debug", "values": ["1", "yes"]}]}}
  ],
  "allow_rules": [
    {"name": "health", "request": {"paths": ["/grpc.health.v1.Health/*"]}},
    {"name": "workers", "source": {"principals": ["spiffe://t/worker*"]},
     "request": {"paths": ["/s.C/Admit", "/s.C/Report"]}},
    {"name": "readers", "source": {"principals": ["*.readers.t"]},
     "request": {"paths": ["/s.C/Get*"]}},
    {"name": "by-subject", "source": {"principals": ["CN=ops,O=t"]},
     "request": {"paths": ["/s.Admin/*"]}},
    {"name": "any-authenticated-list", "source": {"principals": ["*"]},
     "request": {"paths": ["/s.C/List"]}}
  ]
})json";

struct EvalCase {
  const char* what;
  AuthzPeer peer;
  const char* path;
  std::map<std::string, std::string> headers;
  bool allowed;
  const char* why;
};

TEST(AuthzEvaluateTest, TableOfRequests) {
  const AuthzPolicy policy = MustParse(kPolicy);
  const AuthzPeer anonymous;  // plaintext or no client certificate
  const std::vector<EvalCase> cases = {
      {"rule with no principals matches an anonymous peer", anonymous,
       "/grpc.health.v1.Health/Check", {}, true, "allow_rules:health"},
      {"worker by URI SAN prefix", Cert({"spiffe://t/worker-7"}, {}),
       "/s.C/Admit", {}, true, "allow_rules:workers"},
      {"worker: path not in its rule", Cert({"spiffe://t/worker"}, {}),
       "/s.C/GetEndpoint", {}, false, "no rule matched"},
      {"reader by DNS SAN suffix", Cert({}, {"a.readers.t"}),
       "/s.C/GetEndpoint", {}, true, "allow_rules:readers"},
      {"URI SAN tried, then DNS SAN", Cert({"spiffe://t/x"}, {"b.readers.t"}),
       "/s.C/GetEndpoint", {}, true, "allow_rules:readers"},
      {"subject matched when no SAN does", Cert({}, {}, "CN=ops,O=t"),
       "/s.Admin/Pause", {}, true, "allow_rules:by-subject"},
      {"subject must match exactly", Cert({}, {}, "CN=ops,O=t2"),
       "/s.Admin/Pause", {}, false, "no rule matched"},
      {"\"*\" principal: any authenticated peer", Cert({}, {}, "CN=z"),
       "/s.C/List", {}, true, "allow_rules:any-authenticated-list"},
      {"\"*\" principal never matches an anonymous peer", anonymous,
       "/s.C/List", {}, false, "no rule matched"},
      {"principals need authentication even if names would match",
       AuthzPeer{false, {"spiffe://t/worker"}, {}, ""}, "/s.C/Admit", {},
       false, "no rule matched"},
      {"deny wins over allow", Cert({"spiffe://t/rogue"}, {}),
       "/grpc.health.v1.Health/Check", {}, false, "deny_rules:no-rogue"},
      {"deny by header value (any of its values)", Cert({"spiffe://t/worker"}, {}),
       "/s.C/Admit", {{"x-debug", "yes"}}, false,
       "deny_rules:no-debug-header"},
      {"header with another value: not denied", Cert({"spiffe://t/worker"}, {}),
       "/s.C/Admit", {{"x-debug", "no"}}, true, "allow_rules:workers"},
      {"nothing matches: default deny", Cert({"spiffe://t/other"}, {}),
       "/s.C/Admit", {}, false, "no rule matched"},
      {"paths are exact unless a pattern says otherwise",
       Cert({"spiffe://t/worker"}, {}), "/s.C/AdmitBatch", {}, false,
       "no rule matched"},
  };
  for (const EvalCase& c : cases) {
    AuthzRequest r;
    r.peer = c.peer;
    r.path = c.path;
    r.headers = c.headers;
    const AuthzVerdict v = Evaluate(policy, r);
    EXPECT_EQ(v.allowed, c.allowed) << c.what;
    EXPECT_EQ(v.why, c.why) << c.what;
  }
}

TEST(AuthzEvaluateTest, HeadersAreAndedWithinARule) {
  const AuthzPolicy policy = MustParse(R"({"name": "h", "allow_rules": [
    {"name": "both", "request": {"headers": [
      {"key": "a", "values": ["1"]}, {"key": "b", "values": ["2*"]}]}}]})");
  AuthzRequest r;
  r.path = "/s.C/M";
  r.headers = {{"a", "1"}};
  EXPECT_FALSE(Evaluate(policy, r).allowed);
  r.headers = {{"a", "1"}, {"b", "22"}};
  EXPECT_TRUE(Evaluate(policy, r).allowed);
}

TEST(AuthzEvaluateTest, EmptyAllowRulesDenyEverything) {
  const AuthzPolicy policy = MustParse(R"({"name": "none", "allow_rules": []})");
  AuthzRequest r;
  r.peer = Cert({"spiffe://t/admin"}, {});
  r.path = "/s.C/Admit";
  EXPECT_FALSE(Evaluate(policy, r).allowed);
}

TEST(AuthzEvaluateTest, EmptyListsMatchAnything) {
  const AuthzPolicy policy = MustParse(R"({"name": "e", "allow_rules": [
    {"name": "all", "source": {"principals": []}, "request": {"paths": []}}]})");
  AuthzRequest r;
  r.path = "/s.C/Admit";
  EXPECT_TRUE(Evaluate(policy, r).allowed);
}

struct BadCase {
  const char* json;
  const char* error;
};

TEST(AuthzParseTest, RefusalsNameTheField) {
  const std::vector<BadCase> cases = {
      {R"({"allow_rules": []})", "policy.json: name: is required"},
      {R"({"name": "", "allow_rules": []})", "name: must not be empty"},
      {R"({"name": 3, "allow_rules": []})", "name: must be a string"},
      {R"({"name": "x"})", "allow_rules: is required"},
      {R"({"name": "x", "allow_rules": {}})", "allow_rules: must be an array"},
      {R"({"name": "x", "allow_rules": [], "extra": 1})",
       "policy: unknown field \"extra\""},
      {R"({"name": "x", "allowRules": []})", "unknown field \"allowRules\""},
      {R"({"name": "x", "allow_rules": [{}]})", "allow_rules[0].name: is required"},
      {R"({"name": "x", "allow_rules": [{"name": "a", "who": 1}]})",
       "allow_rules[0]: unknown field \"who\""},
      {R"({"name": "x", "deny_rules": [{"name": "a", "source": {"principal": []}}], "allow_rules": []})",
       "deny_rules[0].source: unknown field \"principal\""},
      {R"({"name": "x", "allow_rules": [{"name": "a", "source": {"principals": ["ok", 7]}}]})",
       "allow_rules[0].source.principals[1]: must be a string"},
      {R"({"name": "x", "allow_rules": [{"name": "a", "request": {"paths": "/s.C/M"}}]})",
       "allow_rules[0].request.paths: must be an array"},
      {R"({"name": "x", "allow_rules": [{"name": "a", "request": {"methods": []}}]})",
       "allow_rules[0].request: unknown field \"methods\""},
      {R"({"name": "x", "allow_rules": [{"name": "a", "request": {"headers": [{"key": ":path", "values": ["x"]}]}}]})",
       "allow_rules[0].request.headers[0].key: unsupported header \":path\""},
      {R"({"name": "x", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "grpc-timeout", "values": ["x"]}]}}]})",
       "unsupported header \"grpc-timeout\""},
      {R"({"name": "x", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "Host", "values": ["x"]}]}}]})",
       "unsupported header \"host\""},
      {R"({"name": "x", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "k", "values": []}]}}]})",
       "headers[0].values: must not be empty"},
      {R"({"name": "x", "allow_rules": [{"name": "a", "request": {"headers": [{"key": "k"}]}}]})",
       "headers[0].values: is required"},
      {R"([])", "policy: must be an object"},
      {"{\"name\": \"x\",\n \"allow_rules\": [],}", "policy.json:2:"},  // syntax
      {R"({"name": "x", "name": "y", "allow_rules": []})", "policy.json:1:"},
  };
  for (const BadCase& c : cases) {
    absl::StatusOr<AuthzPolicy> p = ParseAuthzPolicy(c.json, "policy.json");
    ASSERT_FALSE(p.ok()) << c.json;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(c.error)) << c.json;
  }
}

TEST(AuthzParseTest, SizeLimit) {
  std::string big = R"({"name": "x", "allow_rules": [], "pad": ")";
  big.append(kMaxAuthzPolicyBytes, 'a');
  big += "\"}";
  absl::StatusOr<AuthzPolicy> p = ParseAuthzPolicy(big, "big.json");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("over the limit"));
}

TEST(AuthzParseTest, HeaderKeysAreLowerCased) {
  const AuthzPolicy p = MustParse(R"({"name": "x", "allow_rules": [
    {"name": "a", "request": {"headers": [{"key": "X-Team", "values": ["a"]}]}}]})");
  ASSERT_EQ(p.allow_rules.size(), 1u);
  EXPECT_EQ(p.allow_rules[0].headers[0].key, "x-team");
}

// Every policy the project ships parses, and gives each role what
// docs/SECURITY.md says it gets.
TEST(AuthzParseTest, ShippedExamplePolicy) {
  const std::string text = stagger::testing::ReadFile(SHIPPED_POLICY);
  ASSERT_FALSE(text.empty()) << SHIPPED_POLICY << ": unreadable or empty";
  const AuthzPolicy policy = MustParse(text);
  auto allowed = [&](AuthzPeer peer, const char* path) {
    AuthzRequest r;
    r.peer = std::move(peer);
    r.path = path;
    return Evaluate(policy, r).allowed;
  };
  const AuthzPeer worker = Cert({"spiffe://stagger.example/ns/deliveries/sa/worker"}, {});
  const AuthzPeer reader = Cert({"spiffe://stagger.example/ns/ops/sa/reader"}, {});
  const AuthzPeer admin = Cert({}, {"admin.stagger.example"});
  const AuthzPeer notifier =
      Cert({"spiffe://stagger.example/ns/ops/sa/notifier"}, {});
  EXPECT_TRUE(allowed(worker, "/stagger.v1.RetryCoordinator/Admit"));
  EXPECT_TRUE(allowed(worker, "/stagger.v1.RetryCoordinator/ReportBatch"));
  EXPECT_FALSE(allowed(worker, "/stagger.v1.RetryCoordinator/ListEndpoints"));
  EXPECT_FALSE(allowed(worker, "/stagger.v1.Admin/Pause"));
  EXPECT_TRUE(allowed(reader, "/stagger.v1.RetryCoordinator/GetEndpoint"));
  EXPECT_TRUE(allowed(reader, "/stagger.v1.RetryCoordinator/ListEndpoints"));
  EXPECT_FALSE(allowed(reader, "/stagger.v1.RetryCoordinator/Admit"));
  EXPECT_FALSE(allowed(reader, "/stagger.v1.Admin/Pause"));
  EXPECT_TRUE(allowed(admin, "/stagger.v1.Admin/Pause"));
  EXPECT_TRUE(allowed(admin, "/stagger.v1.RetryCoordinator/ListEndpoints"));
  EXPECT_FALSE(allowed(admin, "/stagger.v1.RetryCoordinator/Admit"));
  // The observer role: the watch, nothing else.
  EXPECT_TRUE(allowed(notifier, "/stagger.v1.EndpointWatch/Watch"));
  EXPECT_TRUE(allowed(reader, "/stagger.v1.EndpointWatch/Watch"));
  EXPECT_TRUE(allowed(admin, "/stagger.v1.EndpointWatch/Watch"));
  EXPECT_FALSE(allowed(worker, "/stagger.v1.EndpointWatch/Watch"));
  EXPECT_FALSE(allowed(notifier, "/stagger.v1.Admin/Disable"));
  EXPECT_FALSE(allowed(notifier, "/stagger.v1.RetryCoordinator/Admit"));
  EXPECT_FALSE(allowed(reader, "/stagger.v1.Admin/Disable"));
  EXPECT_TRUE(allowed(admin, "/stagger.v1.Admin/Disable"));
  EXPECT_TRUE(allowed(admin, "/stagger.v1.Admin/Enable"));
  EXPECT_TRUE(allowed(AuthzPeer{}, "/grpc.health.v1.Health/Check"));
  EXPECT_FALSE(allowed(AuthzPeer{}, "/stagger.v1.RetryCoordinator/Admit"));
}

}  // namespace
}  // namespace stagger::security
