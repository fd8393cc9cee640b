// server/service/ownership: the replica's view from its flags, and the
// requests for keys it does not own counted (and still answered).
#include "server/service/ownership.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/wire/rendezvous.h"
#include "tests/service/service_harness.h"
#include "tests/testing/blackbox_util.h"

namespace stagger::service {
namespace {

using ::testing::HasSubstr;

TEST(OwnershipFromFlags, NoReplicasMeansOneThatOwnsEverything) {
  absl::StatusOr<std::optional<Ownership>> o =
      Ownership::FromFlags("", "", "stagger-0");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_FALSE(o->has_value());
}

TEST(OwnershipFromFlags, TheNameComesFromTheFlagElseTheHostname) {
  absl::StatusOr<std::optional<Ownership>> o =
      Ownership::FromFlags("stagger-0, stagger-1,stagger-2", "", "stagger-1");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_TRUE(o->has_value());
  EXPECT_EQ((*o)->self(), "stagger-1");
  o = Ownership::FromFlags("stagger-0,stagger-1", "stagger-0", "stagger-1");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ((*o)->self(), "stagger-0");
}

TEST(OwnershipFromFlags, BadFlagsAreNamed) {
  EXPECT_THAT(std::string(
                  Ownership::FromFlags("a,b", "", "c").status().message()),
              HasSubstr("--replica_name: \"c\" is not one of --replicas"));
  EXPECT_THAT(
      std::string(Ownership::FromFlags("a,b", "", "").status().message()),
      HasSubstr("HOSTNAME is not set"));
  EXPECT_EQ(Ownership::FromFlags("a,,b", "a", "").status().message(),
            "--replicas[1]: the name is empty");
  EXPECT_EQ(Ownership::FromFlags("a,a", "a", "").status().message(),
            "--replicas[1]: the name \"a\" is given twice");
}

TEST(Misrouted, RequestsForAnotherReplicasKeysAreAnsweredAndCounted) {
  stagger::testing::ServiceHarness::Options options;
  options.with_metrics = true;
  stagger::testing::ServiceHarness h(options);
  const Ownership own =
      **Ownership::FromFlags("stagger-0,stagger-1", "stagger-0", "");
  h.service().set_ownership(&own);
  // Keys this replica owns and keys the other one does.
  std::vector<std::string> mine, theirs;
  for (int k = 0; mine.size() < 2 || theirs.size() < 3; ++k) {
    const std::string key = absl::StrCat("https://t", k, ".example/");
    (own.Owns(key) ? mine : theirs).push_back(key);
  }
  v1::AdmitRequest req;
  req.set_attempt(1);
  v1::AdmitResponse resp;
  req.set_endpoint(mine[0]);
  ASSERT_TRUE(h.Admit(req, &resp).ok());
  req.set_endpoint(theirs[0]);
  ASSERT_TRUE(h.Admit(req, &resp).ok());
  EXPECT_TRUE(resp.has_decision());  // answered all the same
  v1::AdmitBatchRequest batch;
  for (const std::string& k : {mine[1], theirs[1], theirs[2]}) {
    v1::AdmitRequest* item = batch.add_items();
    item->set_endpoint(k);
    item->set_attempt(1);
  }
  v1::AdmitBatchResponse batch_resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(h.stub().AdmitBatch(&ctx, batch, &batch_resp).ok());
  EXPECT_EQ(batch_resp.decisions_size(), 3);
  EXPECT_EQ(stagger::testing::MetricValue(h.Scrape(),
                                 "stagger_misrouted_requests_total"),
            3);
}

}  // namespace
}  // namespace stagger::service
