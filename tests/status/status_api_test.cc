// server/status/status_api: the status page's JSON. Rows are
// ListEndpointsResponse / GetEndpointResponse JSON (parsed back into those
// messages), pages are capped and say what they left out, and every bad
// query is a 400 with a message, an untracked key a 404.
#include "server/status/status_api.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/status/decision_ring.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/status/peer_health.h"
#include "stagger/v1/coordinator.pb.h"
#include "tests/testing/fake_clock.h"

namespace stagger::status {
namespace {

using ::stagger::testing::FakeClock;

template <typename Message>
Message Parse(const HttpResponse& r) {
  Message m;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;  // the page's additions
  const auto s = google::protobuf::util::JsonStringToMessage(r.body, &m, opts);
  EXPECT_TRUE(s.ok()) << s.ToString() << " in " << r.body.substr(0, 300);
  return m;
}

double Number(const HttpResponse& r, const std::string& field) {
  google::protobuf::Struct s = Parse<google::protobuf::Struct>(r);
  return s.fields().at(field).number_value();
}

class StatusApiTest : public ::testing::Test {
 protected:
  StatusApiTest()
      : engine_(engine::EngineConfig{}, &clock_, &random_),
        peers_({"s0", "s1"}, "s0", {}),
        ring_(&clock_),
        api_(&engine_, &peers_, &ring_, &clock_) {}

  void Track(const std::string& key) {
    engine::AdmitInput in;
    in.endpoint = key;
    ASSERT_TRUE(engine_.Admit(in).ok());
  }
  void Open(const std::string& key) {
    Track(key);
    ASSERT_TRUE(engine_.ForceBreaker(key, engine::BreakerState::kOpen,
                                     absl::Minutes(5)).ok());
  }
  void ExpectRefused(const HttpResponse& r, int status, absl::string_view want) {
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    google::protobuf::Struct s = Parse<google::protobuf::Struct>(r);
    ASSERT_TRUE(s.fields().contains("error")) << r.body;
    EXPECT_TRUE(absl::StrContains(s.fields().at("error").string_value(), want))
        << r.body;
  }

  FakeClock clock_;
  engine::SeededRandom random_{3};
  engine::Engine engine_;
  PeerHealth peers_;
  DecisionRing ring_;
  StatusApi api_;
};

TEST_F(StatusApiTest, NotClearRowsAreListEndpointsJsonWithTheScanCounts) {
  for (int i = 0; i < 10; ++i) Track("ok/" + std::to_string(i));
  Open("bad/<b>\"x\"&'");
  const HttpResponse r = api_.Endpoints("");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto page = Parse<v1::ListEndpointsResponse>(r);
  ASSERT_EQ(page.endpoints_size(), 1);
  EXPECT_EQ(page.endpoints(0).endpoint(), "bad/<b>\"x\"&'");  // as stored
  EXPECT_EQ(page.endpoints(0).breaker_state(), v1::OPEN);
  EXPECT_TRUE(page.endpoints(0).has_open_until());
  EXPECT_EQ(page.total_tracked(), 11);
  EXPECT_EQ(Number(r, "scanned"), 11);
  EXPECT_EQ(Number(r, "matched"), 1);
  EXPECT_EQ(Number(r, "left_out"), 0);
  EXPECT_EQ(Number(r, "page_size"), 100);
  EXPECT_TRUE(absl::StrContains(r.body, "\"breaker_state\":\"OPEN\""));
}

TEST_F(StatusApiTest, PagesAreCappedAndSayHowManyWereLeftOut) {
  for (int i = 0; i < 1200; ++i) Open(absl::StrCat("k/", 10000 + i));
  HttpResponse r = api_.Endpoints("");
  EXPECT_EQ(Parse<v1::ListEndpointsResponse>(r).endpoints_size(), 100);
  EXPECT_EQ(Number(r, "left_out"), 1100);
  r = api_.Endpoints("page_size=1000");
  const auto first = Parse<v1::ListEndpointsResponse>(r);
  EXPECT_EQ(first.endpoints_size(), 1000);
  EXPECT_EQ(Number(r, "left_out"), 200);
  ASSERT_FALSE(first.next_page_token().empty());
  r = api_.Endpoints("page_size=1000&page_token=" + first.next_page_token());
  const auto second = Parse<v1::ListEndpointsResponse>(r);
  EXPECT_EQ(second.endpoints_size(), 200);
  EXPECT_EQ(second.endpoints(0).endpoint(), "k/11000");
  EXPECT_TRUE(second.next_page_token().empty());
  EXPECT_EQ(Number(r, "left_out"), 0);
  ExpectRefused(api_.Endpoints("page_size=1001"), 400,
                "page_size: want an integer in [1, 1000], got \"1001\"");
}

TEST_F(StatusApiTest, FilterAllListsEveryEndpoint) {
  Track("a");
  Open("b");
  const HttpResponse r = api_.Endpoints("filter=all&page_size=1");
  const auto page = Parse<v1::ListEndpointsResponse>(r);
  ASSERT_EQ(page.endpoints_size(), 1);
  EXPECT_EQ(page.endpoints(0).endpoint(), "a");
  EXPECT_EQ(Number(r, "matched"), 2);
  EXPECT_EQ(Number(r, "left_out"), 1);
}

TEST_F(StatusApiTest, HostileQueriesAreRefusedWithAMessage) {
  ExpectRefused(api_.Endpoints("filter=open"), 400,
                "filter: want not_clear or all, got \"open\"");
  ExpectRefused(api_.Endpoints("page_token=zz"), 400,
                "page_token: not a token from a previous response");
  ExpectRefused(api_.Endpoints("page_token=a"), 400, "page_token");
  ExpectRefused(api_.Endpoints("x=1"), 400, "unknown parameter \"x\"");
  ExpectRefused(api_.Endpoints("page_size=%"), 400, "two hex digits");
  ExpectRefused(api_.Endpoints(std::string(20000, '&')), 400, "bytes; at most");
  ExpectRefused(api_.Summary("a=b"), 400, "this page takes none");
  ExpectRefused(api_.Decisions("a=b"), 400, "this page takes none");
}

TEST_F(StatusApiTest, EndpointIsGetEndpointsJson) {
  Open("orders/<script>");
  const HttpResponse r = api_.Endpoint("key=orders%2F%3Cscript%3E");
  ASSERT_EQ(r.status, 200) << r.body;
  const auto got = Parse<v1::GetEndpointResponse>(r);
  EXPECT_EQ(got.state().endpoint(), "orders/<script>");
  EXPECT_EQ(got.state().breaker_state(), v1::OPEN);
  ExpectRefused(api_.Endpoint("key=nobody"), 404, "not tracked");
  ExpectRefused(api_.Endpoint(""), 400, "key: missing");
  ExpectRefused(api_.Endpoint("key="), 400, "endpoint");
  ExpectRefused(api_.Endpoint("key=" + std::string(5000, 'a')), 400,
                "endpoint");
  ExpectRefused(api_.Endpoint("key=%01"), 400, "control character");
}

TEST_F(StatusApiTest, DecisionsAreTheRingsCountsByVerdict) {
  ring_.Record(engine::Verdict::kDefer);
  ring_.Record(engine::Verdict::kDefer);
  const HttpResponse r = api_.Decisions("");
  ASSERT_EQ(r.status, 200);
  google::protobuf::Struct s = Parse<google::protobuf::Struct>(r);
  EXPECT_EQ(s.fields().at("seconds").number_value(), 600);
  EXPECT_EQ(s.fields().at("last_second").number_value(),
            absl::ToUnixSeconds(clock_.Now()));
  const auto& verdicts = s.fields().at("verdicts").struct_value().fields();
  for (const char* v : {"PROCEED", "DEFER", "GIVE_UP", "DONE"}) {
    ASSERT_EQ(verdicts.at(v).list_value().values_size(), 600) << v;
  }
  EXPECT_EQ(verdicts.at("DEFER").list_value().values(599).number_value(), 2);
  EXPECT_EQ(verdicts.at("PROCEED").list_value().values(599).number_value(), 0);
}

TEST_F(StatusApiTest, SummaryHasTheReplicasAndTheBreakerCounts) {
  Track("a");
  Open("b");
  const HttpResponse r = api_.Summary("");
  ASSERT_EQ(r.status, 200);
  google::protobuf::Struct s = Parse<google::protobuf::Struct>(r);
  EXPECT_EQ(s.fields().at("replica").string_value(), "s0");
  EXPECT_EQ(s.fields().at("total_tracked").number_value(), 2);
  const auto& breakers = s.fields().at("breakers").struct_value().fields();
  EXPECT_EQ(breakers.at("OPEN").number_value(), 1);
  EXPECT_EQ(breakers.at("CLOSED").number_value(), 1);
  const auto& replicas = s.fields().at("replicas").list_value();
  ASSERT_EQ(replicas.values_size(), 2);
  const auto& peer = replicas.values(1).struct_value().fields();
  EXPECT_EQ(peer.at("name").string_value(), "s1");
  EXPECT_EQ(peer.at("health").string_value(), "UNKNOWN");
  EXPECT_TRUE(absl::StrContains(peer.at("detail").string_value(),
                                "--status_peers"));
  EXPECT_EQ(replicas.values(0).struct_value().fields().at("health").string_value(),
            "SERVING");
}

}  // namespace
}  // namespace stagger::status
