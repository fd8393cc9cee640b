// server/status/status_api: the status page's JSON. Rows are
// ListEndpointsResponse / GetEndpointResponse JSON (parsed back into those
// messages), pages are capped and say what they left out, every pause and
// disabled endpoint is listed, the watch's events come by sequence number,
// and every bad query is a 400 with a message, an untracked key a 404.
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
#include "server/service/watch_feed.h"
#include "server/service/watch_log.h"
#include "server/status/peer_health.h"
#include "stagger/v1/admin.pb.h"
#include "stagger/v1/coordinator.pb.h"
#include "tests/testing/fake_clock.h"

namespace stagger::status {

using http::HttpResponse;

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

// A pause set ahead of traffic on an untracked key and a prefix pause are
// rows of their own; a disabled endpoint is listed with its disable and
// among the rows that are not clear.
TEST_F(StatusApiTest, PausesAndDisabledEndpointsAreListedWhole) {
  ASSERT_TRUE(engine_.pauses()
                  .Set("ahead/<b>x</b>", false, absl::Minutes(10), "maint",
                       "ops", clock_.Now(), "op-1")
                  .ok());
  ASSERT_TRUE(engine_.pauses()
                  .Set("partner/", true, absl::Minutes(10), "migration", "ops",
                       clock_.Now())
                  .ok());
  engine::Disable d;
  d.reason = "gone";
  d.by = "ops";
  ASSERT_TRUE(engine_.Disable("gone/x", d).ok());
  const v1::ListPausesResponse p =
      Parse<v1::ListPausesResponse>(api_.Pauses(""));
  ASSERT_EQ(p.pauses_size(), 2);
  EXPECT_EQ(p.pauses(0).target().endpoint(), "ahead/<b>x</b>");
  EXPECT_EQ(p.pauses(0).pause_id(), "op-1");
  EXPECT_EQ(p.pauses(1).target().prefix(), "partner/");
  const v1::ListDisabledResponse dis =
      Parse<v1::ListDisabledResponse>(api_.Disabled(""));
  ASSERT_EQ(dis.endpoints_size(), 1);
  EXPECT_EQ(dis.endpoints(0).endpoint(), "gone/x");
  EXPECT_EQ(dis.endpoints(0).disabled().trigger(), v1::DISABLE_TRIGGER_OPERATOR);
  const v1::ListEndpointsResponse rows =
      Parse<v1::ListEndpointsResponse>(api_.Endpoints(""));
  ASSERT_EQ(rows.endpoints_size(), 1);
  EXPECT_EQ(rows.endpoints(0).disabled().reason(), "gone");
  ExpectRefused(api_.Pauses("x=1"), 400, "query: ");
}

TEST_F(StatusApiTest, EventsComeBySequenceNumberAndSayWhatWasMissed) {
  ExpectRefused(api_.Events(""), 404, "no watch log");
  service::WatchLog log({"s0", 42, 100, absl::Hours(1)}, &clock_);
  service::WatchFeed feed(&log);
  engine_.set_condition_sink(&feed);
  StatusApi api(&engine_, &peers_, &ring_, &clock_, &log);
  for (int i = 0; i < 150; ++i) {
    engine::Disable d;
    d.reason = "r";
    const std::string key = absl::StrCat("k/", i);
    ASSERT_TRUE(engine_.Disable(key, d).ok());
  }
  // 150 disables, 100 held: 51..150.
  HttpResponse r = api.Events("after=120&limit=5");
  ASSERT_EQ(r.status, 200) << r.body;
  google::protobuf::Struct s = Parse<google::protobuf::Struct>(r);
  EXPECT_EQ(s.fields().at("replica").string_value(), "s0");
  EXPECT_EQ(s.fields().at("incarnation").string_value(), "42");
  EXPECT_EQ(s.fields().at("oldest").number_value(), 51);
  EXPECT_EQ(s.fields().at("next").number_value(), 125);
  EXPECT_EQ(s.fields().at("missed_to").number_value(), 0);
  const auto& events = s.fields().at("events").list_value().values();
  ASSERT_EQ(events.size(), 5);
  EXPECT_EQ(events[0].struct_value().fields().at("sequence").string_value(),
            "121");
  EXPECT_EQ(events[0].struct_value().fields().at("kind").string_value(),
            "EVENT_DISABLED");
  // Polling from before the history: told what was missed.
  s = Parse<google::protobuf::Struct>(api.Events("after=10&limit=1"));
  EXPECT_EQ(s.fields().at("missed_from").number_value(), 11);
  EXPECT_EQ(s.fields().at("missed_to").number_value(), 50);
  // Another incarnation: from the oldest held, restarted.
  s = Parse<google::protobuf::Struct>(api.Events("after=149&incarnation=7"));
  EXPECT_TRUE(s.fields().at("restarted").bool_value());
  EXPECT_EQ(s.fields().at("events").list_value().values_size(), 100);
  ExpectRefused(api.Events("after=-1"), 400, "query: after: want a decimal");
  ExpectRefused(api.Events("limit=5000"), 400, "query: limit:");
  ExpectRefused(api.Events("since=1"), 400, "query: ");
  engine_.set_condition_sink(nullptr);
}

}  // namespace
}  // namespace stagger::status
