// client/internal/target_parser: the replica list forms of
// ClientOptions::target and the stable names they give.
#include "client/internal/target_parser.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stagger::client {
namespace {

using ::testing::HasSubstr;

TEST(ParseMembers, OneTargetIsOneReplicaAsBefore) {
  absl::StatusOr<MemberSpec> s = ParseMembers("127.0.0.1:50051");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->members.size(), 1u);
  EXPECT_EQ(s->members[0].target, "127.0.0.1:50051");
  EXPECT_TRUE(s->dns_host.empty());
}

TEST(ParseMembers, AListNamesEachReplica) {
  absl::StatusOr<MemberSpec> s = ParseMembers(
      "stagger-0.stagger-headless.ns.svc:50051, "
      "stagger-1.stagger-headless.ns.svc:50051,"
      "odd=10.0.0.7:50051,10.0.0.8:50051,[::1]:50051");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->members.size(), 5u);
  // A DNS host: its first label, the pod's own hostname.
  EXPECT_EQ(s->members[0].name, "stagger-0");
  EXPECT_EQ(s->members[0].target, "stagger-0.stagger-headless.ns.svc:50051");
  EXPECT_EQ(s->members[1].name, "stagger-1");
  // Explicit.
  EXPECT_EQ(s->members[2].name, "odd");
  EXPECT_EQ(s->members[2].target, "10.0.0.7:50051");
  // Address literals have no stable name: the whole entry.
  EXPECT_EQ(s->members[3].name, "10.0.0.8:50051");
  EXPECT_EQ(s->members[4].name, "[::1]:50051");
}

TEST(ParseMembers, BadListsSayWhichEntry) {
  EXPECT_EQ(ParseMembers("").status().message(), "target: must not be empty");
  EXPECT_EQ(ParseMembers("a:1,,b:2").status().message(),
            "target: entry 2 is empty");
  EXPECT_THAT(std::string(ParseMembers("a:1,b").status().message()),
              HasSubstr("entry 2 (\"b\"): expected host:port"));
  EXPECT_THAT(std::string(ParseMembers("a:1,=b:2").status().message()),
              HasSubstr("empty name before '='"));
  // Two replicas on one host need names.
  EXPECT_THAT(
      std::string(ParseMembers("s-0.x:1,s-0.y:2").status().message()),
      HasSubstr("the name \"s-0\" is taken by another entry; name it"));
  EXPECT_TRUE(ParseMembers("127.0.0.1:1,127.0.0.1:2").ok());
}

TEST(ParseMembers, DnsTakesOneHostAndPort) {
  absl::StatusOr<MemberSpec> s =
      ParseMembers("dns:///stagger-headless.ns.svc.cluster.local:50051");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->dns_host, "stagger-headless.ns.svc.cluster.local");
  EXPECT_EQ(s->dns_port, "50051");
  EXPECT_FALSE(ParseMembers("dns:///a:1,b:2").ok());
  EXPECT_FALSE(ParseMembers("dns:///nohostport").ok());
}

TEST(ResolveDnsMembers, LocalhostResolvesToNamedMembers) {
  absl::StatusOr<std::vector<Member>> m = ResolveDnsMembers("localhost", "7");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_FALSE(m->empty());
  for (const Member& x : *m) {
    EXPECT_FALSE(x.name.empty());
    EXPECT_THAT(x.target, ::testing::EndsWith(":7"));
  }
  EXPECT_EQ(ResolveDnsMembers("no-such-host.invalid", "7").status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(SortedByName, SortsAndKeepsTheFirstOfEachName) {
  const std::vector<Member> got = SortedByName(
      {{"b", "10.0.0.2:1"}, {"a", "10.0.0.1:1"}, {"b", "10.0.0.9:1"}});
  EXPECT_EQ(got, (std::vector<Member>{{"a", "10.0.0.1:1"}, {"b", "10.0.0.2:1"}}));
}

}  // namespace
}  // namespace stagger::client
