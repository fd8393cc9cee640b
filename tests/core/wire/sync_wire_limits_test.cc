// The lease stream's per-message limits (core/wire/sync_wire.h,
// core/lease/messages.h; docs/OPERATING.md, "Limits"), each at the limit
// (read) and one beyond (INVALID_ARGUMENT naming the field, the limit and
// what came): a count report's endpoints and an endpoint's buckets; a
// message's holds, drops and returns; a hello's members.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/lease/messages.h"
#include "core/wire/sync_wire.h"
#include "gtest/gtest.h"
#include "stagger/v1/sync.pb.h"

namespace stagger::wire {
namespace {

// A message up whose count report has `endpoints` endpoints of `buckets`
// buckets each.
v1::SyncUp Counts(int endpoints, int buckets) {
  v1::SyncUp up;
  up.set_number(1);
  v1::CountReport* r = up.mutable_counts();
  r->set_seq(1);
  for (int e = 0; e < endpoints; ++e) {
    v1::EndpointCounts* c = r->add_endpoints();
    c->set_endpoint(absl::StrCat("https://e", e, ".example/"));
    for (int b = 0; b < buckets; ++b) {
      v1::CountBucket* bucket = c->add_buckets();
      bucket->mutable_start()->set_seconds(1700000000);
      bucket->set_first_attempts(1);
    }
  }
  return up;
}

// The error's message, or "ok".
std::string Read(const v1::SyncUp& up) {
  absl::StatusOr<lease::Up> in = FromProto(up);
  if (in.ok()) return "ok";
  EXPECT_EQ(in.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(in.status().message());
}

TEST(SyncWireLimitsTest, ACountReportCarriesAtMost10000EndpointsOf64Buckets) {
  EXPECT_EQ(lease::kMaxItemsPerMessage, 10000u);
  EXPECT_EQ(lease::kMaxBucketsPerEndpoint, 64u);
  EXPECT_EQ(Read(Counts(10000, 1)), "ok");
  EXPECT_EQ(Read(Counts(10001, 1)), "counts.endpoints: at most 10000, got 10001");
  EXPECT_EQ(Read(Counts(1, 64)), "ok");
  EXPECT_EQ(Read(Counts(2, 65)),
            "counts.endpoints[0].buckets: at most 64, got 65");
}

TEST(SyncWireLimitsTest, AMessageCarriesAtMost10000OfEachHeldCallList) {
  for (const char* list : {"holds", "drops", "returns"}) {
    for (int n : {10000, 10001}) {
      v1::SyncUp up;
      up.set_number(1);
      for (int i = 0; i < n; ++i) {
        if (std::string(list) == "holds") up.add_holds()->set_id(i + 1);
        if (std::string(list) == "drops") up.add_drops(i + 1);
        if (std::string(list) == "returns") up.add_returns();
      }
      EXPECT_EQ(Read(up), n == 10000 ? std::string("ok")
                                     : absl::StrCat(list, ": at most 10000, "
                                                          "got 10001"));
    }
  }
}

TEST(SyncWireLimitsTest, AHelloNamesAtMost1000Members) {
  for (int n : {1000, 1001}) {
    v1::SyncUp up;
    up.set_number(1);
    v1::AgentHello* h = up.mutable_hello();
    h->set_agent_id("node-1");
    h->set_incarnation(1);
    h->set_protocol(2);
    for (int i = 0; i < n; ++i) h->add_members(absl::StrCat("stagger-", i));
    EXPECT_EQ(Read(up), n == 1000 ? std::string("ok")
                                  : "hello.members: at most 1000, got 1001");
  }
}

}  // namespace
}  // namespace stagger::wire
