// What staggerd lets one lease-stream agent do, below gRPC:
//   * BoundAgentId (server/service/agent_identity.h): under mutual TLS an
//     agent is known by its certificate's principal and its agent_id, so
//     no certificate can act as another's agent (an agent_id naming
//     another principal is refused); without a client certificate, by the
//     agent_id as sent.
//   * CountGuard (server/service/count_guard.h): each count bucket carries
//     at most 100,000 answers of each kind (cut beyond), and each agent
//     applies at most 200,000 buckets a second with a burst of 1,000,000
//     (endpoints beyond are dropped); both counted. Tested at and beyond
//     each cap on a fake clock.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/service/agent_identity.h"
#include "server/service/count_guard.h"
#include "tests/testing/fake_clock.h"

namespace stagger::service {
namespace {

using ::stagger::testing::FakeClock;

security::AuthzPeer Cert(std::vector<std::string> uris,
                         std::vector<std::string> dns = {},
                         std::string subject = "CN=agent") {
  security::AuthzPeer p;
  p.authenticated = true;
  p.uri_sans = std::move(uris);
  p.dns_sans = std::move(dns);
  p.subject = std::move(subject);
  return p;
}

// The bound id of `agent_id` sent by `peer`; the error's message if refused.
std::string Bound(const security::AuthzPeer& peer, absl::string_view agent_id) {
  absl::StatusOr<std::string> id = BoundAgentId(peer, agent_id);
  return id.ok() ? *id : std::string(id.status().message());
}

TEST(BoundAgentIdTest, AnAuthenticatedPeersIdIsPrefixedByItsPrincipal) {
  EXPECT_EQ(Bound(Cert({"spiffe://t/ns/stagger/sa/stagger-agent"}), "node-7"),
            "spiffe://t/ns/stagger/sa/stagger-agent|node-7");
  EXPECT_EQ(Bound(Cert({}, {"agent.example"}), "node-7"),
            "agent.example|node-7");
  EXPECT_EQ(Bound(Cert({}, {}, "CN=a,O=b"), "node-7"), "CN=a,O=b|node-7");
}

// An id already qualified by the peer's own principal is the same agent as
// the name alone.
TEST(BoundAgentIdTest, AnIdQualifiedByThePeersOwnPrincipalIsTakenAsIs) {
  const security::AuthzPeer a = Cert({"spiffe://t/a"});
  EXPECT_EQ(Bound(a, "spiffe://t/a|node-1"), "spiffe://t/a|node-1");
  EXPECT_EQ(Bound(a, "spiffe://t/a|node-1"), Bound(a, "node-1"));
}

// An agent_id that names another certificate's identity is refused
// (PERMISSION_DENIED), naming the id and the peer's principal.
TEST(BoundAgentIdTest, AnIdNamingAnotherPrincipalIsRefused) {
  const security::AuthzPeer a = Cert({"spiffe://t/a"});
  const absl::StatusOr<std::string> other =
      BoundAgentId(a, "spiffe://t/b|node-1");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(other.status().message(),
            "hello.agent_id: \"spiffe://t/b|node-1\" names another identity "
            "than the peer's certificate (spiffe://t/a): send the name alone, "
            "or \"spiffe://t/a|<name>\"");
  // A prefix of the principal is not the principal.
  EXPECT_FALSE(BoundAgentId(a, "spiffe://t/|node-1").ok());
  EXPECT_FALSE(BoundAgentId(Cert({"spiffe://t/ab"}), "spiffe://t/a|n").ok());
}

TEST(BoundAgentIdTest, WithoutAClientCertificateTheIdIsAsSent) {
  EXPECT_EQ(Bound(security::AuthzPeer{}, "node-7"), "node-7");
  EXPECT_EQ(Bound(security::AuthzPeer{}, "spiffe://t/x|node-7"),
            "spiffe://t/x|node-7");
}

// The same agent_id under two certificates is two agents; one certificate
// (a DaemonSet's shared service account) keeps its agents apart by id.
TEST(BoundAgentIdTest, NoTwoPrincipalAndIdPairsShareAName) {
  const security::AuthzPeer a = Cert({"spiffe://t/a"});
  const security::AuthzPeer b = Cert({"spiffe://t/b"});
  EXPECT_NE(Bound(a, "node-1"), Bound(b, "node-1"));
  EXPECT_NE(Bound(a, "node-1"), Bound(a, "node-2"));
  // A '|' in the principal is escaped: it cannot pose as the separator.
  const security::AuthzPeer tricky = Cert({}, {}, "CN=x|y");
  const security::AuthzPeer plain = Cert({}, {}, "CN=x");
  EXPECT_EQ(Bound(tricky, "z"), "CN=x\\|y|z");
  EXPECT_EQ(Bound(tricky, "CN=x\\|y|z"), "CN=x\\|y|z");
  EXPECT_FALSE(BoundAgentId(plain, "y|z").ok()) << "names principal y";
  EXPECT_TRUE(BoundAgentId(plain, "CN=x|y|z").ok());
  EXPECT_NE(Bound(tricky, "z"), Bound(plain, "CN=x|y|z"));
  EXPECT_NE(Bound(Cert({}, {}, "CN=x\\"), "z"), Bound(Cert({}, {}, "CN=x"), "z"));
}

class CountGuardTest : public ::testing::Test {
 protected:
  CountGuardTest()
      : guard_(&clock_, [this](CountGuard::Cause c, int64_t n) {
          (c == CountGuard::Cause::kBucketCap ? cut_ : dropped_) += n;
        }) {}

  // A report of `endpoints` endpoints, each with `buckets` buckets of
  // `answers` first attempts and successes.
  static lease::CountReport Report(int endpoints, int buckets,
                                   uint32_t answers = 1) {
    lease::CountReport r;
    r.seq = 1;
    for (int e = 0; e < endpoints; ++e) {
      lease::EndpointCounts c;
      c.endpoint = absl::StrCat("https://e", e, ".example");
      c.buckets.assign(buckets, lease::CountBucket{absl::UnixEpoch(), answers,
                                                   answers});
      r.endpoints.push_back(std::move(c));
    }
    return r;
  }
  size_t Trim(const std::string& agent, lease::CountReport* r) {
    guard_.Trim({agent, 1}, r);
    return r->endpoints.size();
  }

  FakeClock clock_;
  int64_t cut_ = 0;
  int64_t dropped_ = 0;
  CountGuard guard_;
};

TEST_F(CountGuardTest, ABucketCarriesAtMostItsCapOfEachKind) {
  lease::CountReport at = Report(2, 3, CountGuard::kMaxAnswersPerBucket);
  EXPECT_EQ(Trim("a", &at), 2u);
  EXPECT_EQ(at.endpoints[1].buckets[2].successes,
            CountGuard::kMaxAnswersPerBucket);
  EXPECT_EQ(cut_, 0) << "at the cap: nothing cut";

  lease::CountReport beyond = Report(2, 3, CountGuard::kMaxAnswersPerBucket);
  beyond.endpoints[0].buckets[1].successes = 4000000000u;
  beyond.endpoints[1].buckets[0].first_attempts =
      CountGuard::kMaxAnswersPerBucket + 1;
  EXPECT_EQ(Trim("a", &beyond), 2u);
  EXPECT_EQ(beyond.endpoints[0].buckets[1].successes,
            CountGuard::kMaxAnswersPerBucket);
  EXPECT_EQ(beyond.endpoints[1].buckets[0].first_attempts,
            CountGuard::kMaxAnswersPerBucket);
  EXPECT_EQ(cut_, 2) << "one per endpoint entry cut";
  EXPECT_EQ(dropped_, 0);
}

TEST_F(CountGuardTest, AnAgentAppliesItsBurstThenItsRate) {
  // The burst: 1,000,000 buckets (10,000 endpoints x 64 buckets, the
  // largest message, then 5,625 more endpoints of 64).
  lease::CountReport full = Report(10000, 64);
  EXPECT_EQ(Trim("a", &full), 10000u);
  lease::CountReport second = Report(10000, 64);
  EXPECT_EQ(Trim("a", &second), 5625u) << "360,000 buckets left";
  EXPECT_EQ(dropped_, 10000 - 5625);
  // Empty now: nothing goes until time refills it, at 200,000 a second.
  lease::CountReport third = Report(10, 1);
  EXPECT_EQ(Trim("a", &third), 0u);
  clock_.Advance(absl::Milliseconds(500));
  lease::CountReport later = Report(2000, 64);  // 128,000 buckets
  EXPECT_EQ(Trim("a", &later), 1562u) << "100,000 buckets refilled";
  // Another agent has its own allowance.
  lease::CountReport other = Report(10000, 64);
  EXPECT_EQ(Trim("b", &other), 10000u);
  EXPECT_EQ(cut_, 0);
}

TEST_F(CountGuardTest, AnAllowanceRefillsOnlyToTheBurst) {
  lease::CountReport full = Report(10000, 64);
  EXPECT_EQ(Trim("a", &full), 10000u);
  clock_.Advance(absl::Hours(1));  // long idle: full again, not more
  lease::CountReport big = Report(15625, 64);  // 1,000,000 buckets
  EXPECT_EQ(Trim("a", &big), 15625u);
  lease::CountReport one = Report(1, 1);
  EXPECT_EQ(Trim("a", &one), 0u);
  EXPECT_EQ(dropped_, 1);
}

}  // namespace
}  // namespace stagger::service
