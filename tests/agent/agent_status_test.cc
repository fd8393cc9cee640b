// stagger-agent's status page below the browser: the lease book's pages
// (LeaseBook::ListLeases), the decision tally, the JSON of /api/agent and
// /api/decisions (parsed back, on a fake clock and a scripted lease
// source), the refusals of bad queries, CoordinatorClient::lease_status of
// a real client, and the page served over loopback HTTP.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/status/agent_status_api.h"
#include "agent/status/agent_status_page.h"
#include "agent/status/decision_tally.h"
#include "client/coordinator_client.h"
#include "core/lease/lease_book.h"
#include "core/status/json.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/http_get.h"

namespace stagger::agent {
namespace {

using client::ClientDecision;
using client::DecisionSource;
using engine::Verdict;
using google::protobuf::Struct;
using google::protobuf::Value;
using ::stagger::testing::FakeClock;

Struct ParseJson(const std::string& body) {
  Struct s;
  const auto st = google::protobuf::util::JsonStringToMessage(body, &s);
  EXPECT_TRUE(st.ok()) << st.ToString() << " in " << body.substr(0, 400);
  return s;
}

const Value& Field(const Struct& s, const std::string& name) {
  static const Value kMissing;
  auto it = s.fields().find(name);
  EXPECT_NE(it, s.fields().end()) << "no field " << name;
  return it == s.fields().end() ? kMissing : it->second;
}

// ---- LeaseBook::ListLeases --------------------------------------------------

class ListLeasesTest : public ::testing::Test {
 protected:
  void Grant(const std::string& key, uint64_t epoch,
             absl::Duration ttl = absl::Seconds(10)) {
    book_.OnGrant({key, epoch, ttl, 100, absl::Milliseconds(200)},
                  clock_.Now());
  }
  std::vector<std::string> Keys(const lease::LeaseBook::LeasePage& p) {
    std::vector<std::string> keys;
    for (const auto& l : p.leases) keys.push_back(l.endpoint);
    return keys;
  }
  FakeClock clock_;
  lease::LeaseBook book_;
};

TEST_F(ListLeasesTest, PagesLiveLeasesInKeyOrderAndCountsTheRest) {
  for (const char* k : {"e", "c", "a", "d", "b"}) Grant(k, 1);
  lease::LeaseBook::LeasePage p = book_.ListLeases("", 2, clock_.Now());
  EXPECT_EQ(Keys(p), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.matched, 5);
  p = book_.ListLeases("b", 2, clock_.Now());
  EXPECT_EQ(Keys(p), (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(p.matched, 3);
  p = book_.ListLeases("d", 2, clock_.Now());
  EXPECT_EQ(Keys(p), (std::vector<std::string>{"e"}));
  EXPECT_EQ(p.matched, 1);
  p = book_.ListLeases("", 0, clock_.Now());  // a count alone
  EXPECT_TRUE(p.leases.empty());
  EXPECT_EQ(p.matched, 5);
}

TEST_F(ListLeasesTest, ExpiredRevokedAndNeverGrantedAreNotListed) {
  Grant("short", 1, absl::Seconds(1));
  Grant("long", 4, absl::Seconds(60));
  Grant("revoked", 2);
  book_.OnRevoke({"revoked", 2});
  engine::AdmitInput in;
  in.endpoint = "asked-only";  // wanted, never granted
  in.attempt = 1;
  std::mt19937_64 gen(1);
  EXPECT_FALSE(book_.Admit(in, clock_.Now(), gen).has_value());
  clock_.Advance(absl::Seconds(2));
  const lease::LeaseBook::LeasePage p = book_.ListLeases("", 10, clock_.Now());
  ASSERT_EQ(Keys(p), std::vector<std::string>{"long"});
  EXPECT_EQ(p.matched, 1);
  EXPECT_EQ(p.leases[0].epoch, 4u);
  EXPECT_EQ(p.leases[0].expires,
            clock_.Now() - absl::Seconds(2) + absl::Seconds(60));
}

TEST_F(ListLeasesTest, AllowanceLeftFollowsLocalAnswers) {
  Grant("k", 3);
  engine::AdmitInput in;
  in.endpoint = "k";
  in.attempt = 1;
  std::mt19937_64 gen(1);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(book_.Admit(in, clock_.Now(), gen));
  const lease::LeaseBook::LeasePage p = book_.ListLeases("", 10, clock_.Now());
  ASSERT_EQ(p.leases.size(), 1u);
  EXPECT_EQ(p.leases[0].allowance, 100u);
  EXPECT_EQ(p.leases[0].left, 93u);
}

// ---- DecisionTally ----------------------------------------------------------

ClientDecision Decided(DecisionSource source, Verdict verdict) {
  ClientDecision d;
  d.source = source;
  d.verdict = verdict;
  return d;
}

TEST(DecisionTallyTest, CountsBySourceAndVerdictAndFeedsTheRing) {
  FakeClock clock;
  DecisionTally tally(&clock);
  tally.Record(Decided(DecisionSource::kLease, Verdict::kProceed));
  tally.Record(Decided(DecisionSource::kLease, Verdict::kProceed));
  tally.Record(Decided(DecisionSource::kLease, Verdict::kDone));
  tally.Record(Decided(DecisionSource::kCoordinator, Verdict::kDefer));
  tally.Record(Decided(DecisionSource::kLocalFallback, Verdict::kGiveUp));
  tally.Record(Decided(DecisionSource::kLease, static_cast<Verdict>(0)));
  tally.Record(Decided(static_cast<DecisionSource>(9), Verdict::kProceed));
  const DecisionTally::Counts c = tally.Read();
  EXPECT_EQ(c[2][0], 2);  // lease PROCEED
  EXPECT_EQ(c[2][3], 1);  // lease DONE
  EXPECT_EQ(c[0][1], 1);  // coordinator DEFER
  EXPECT_EQ(c[1][2], 1);  // fallback GIVE_UP
  int64_t total = 0;
  for (const auto& row : c) for (int64_t n : row) total += n;
  EXPECT_EQ(total, 5);  // the two unknown ones are not counted
  const status::DecisionRing::Window w = tally.ring().Read();
  constexpr int kLast = status::DecisionRing::kSeconds - 1;
  EXPECT_EQ(w.counts[0][kLast], 2);
  EXPECT_EQ(w.counts[1][kLast], 1);
  EXPECT_EQ(w.counts[2][kLast], 1);
  EXPECT_EQ(w.counts[3][kLast], 1);
}

// ---- AgentStatusApi ---------------------------------------------------------

// A lease source with `total` leases "ep-000".."ep-NNN" from two replicas,
// paged as CoordinatorClient::lease_status pages them; remembers what it
// was asked.
class ScriptedLeases {
 public:
  explicit ScriptedLeases(int total, absl::Time now) : now_(now) {
    for (int i = 0; i < total; ++i) {
      keys_.push_back(
          absl::StrCat("ep-", i < 100 ? "0" : "", i < 10 ? "0" : "", i));
    }
  }
  client::LeaseStatus operator()(absl::string_view after, size_t max) {
    asked_after = std::string(after);
    asked_max = max;
    client::LeaseStatus s;
    s.holder_id = "node-7";
    client::ReplicaStatus a{"stagger-0", "10.0.0.1:50051", true, true};
    a.stream = true;
    a.stream_connected = true;
    a.incarnation = 18446744073709551557u;  // beyond a double's exact range
    a.leases_held = static_cast<int64_t>(keys_.size());
    a.flushes = 40;
    a.reconnects = 1;
    a.held_calls = 7;
    client::ReplicaStatus b{"stagger-1", "10.0.0.2:50051", false, false};
    b.stream = true;
    b.incarnation = 5;
    b.flushes = 2;
    b.reconnects = 3;
    b.held_calls = 2;
    s.replicas = {a, b};
    for (const std::string& k : keys_) {
      if (k <= after) continue;
      ++s.leases_matched;
      if (s.leases.size() < max) {
        s.leases.push_back({k, "stagger-0", 9007199254740993u,
                            now_ + absl::Seconds(30), 200, 150});
      }
    }
    return s;
  }
  std::string asked_after;
  size_t asked_max = 0;

 private:
  absl::Time now_;
  std::vector<std::string> keys_;
};

class AgentStatusApiTest : public ::testing::Test {
 protected:
  AgentStatusApiTest()
      : leases_(std::make_shared<ScriptedLeases>(250, clock_.Now())),
        tally_(&clock_),
        api_({"stagger-0=10.0.0.1:50051,stagger-1=10.0.0.2:50051",
              "fail_open", true},
             [l = leases_](absl::string_view after, size_t max) {
               return (*l)(after, max);
             },
             &tally_, &clock_) {}

  Struct Agent(const std::string& query) {
    const status::HttpResponse r = api_.Agent(query);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    return ParseJson(r.body);
  }

  FakeClock clock_;
  std::shared_ptr<ScriptedLeases> leases_;
  DecisionTally tally_;
  AgentStatusApi api_;
};

TEST_F(AgentStatusApiTest, TheAgentItsReplicasAndStreams) {
  const Struct s = Agent("");
  EXPECT_EQ(Field(s, "agent_id").string_value(), "node-7");
  EXPECT_EQ(Field(s, "coordinator").string_value(),
            "stagger-0=10.0.0.1:50051,stagger-1=10.0.0.2:50051");
  EXPECT_EQ(Field(s, "fallback").string_value(), "fail_open");
  EXPECT_TRUE(Field(s, "leases_on").bool_value());
  EXPECT_TRUE(Field(s, "coordinator_up").bool_value());
  EXPECT_EQ(Field(s, "now").string_value(), "2026-01-01T00:00:00+00:00");
  const auto& replicas = Field(s, "replicas").list_value().values();
  ASSERT_EQ(replicas.size(), 2);
  const Struct& a = replicas[0].struct_value();
  EXPECT_EQ(Field(a, "name").string_value(), "stagger-0");
  EXPECT_EQ(Field(a, "target").string_value(), "10.0.0.1:50051");
  EXPECT_TRUE(Field(a, "up").bool_value());
  EXPECT_EQ(Field(a, "stream").string_value(), "UP");
  EXPECT_EQ(Field(a, "incarnation").string_value(), "18446744073709551557");
  EXPECT_EQ(Field(a, "leases_held").number_value(), 250);
  const Struct& b = replicas[1].struct_value();
  EXPECT_FALSE(Field(b, "up").bool_value());
  EXPECT_FALSE(Field(b, "serving").bool_value());
  EXPECT_EQ(Field(b, "stream").string_value(), "DOWN");
  EXPECT_EQ(Field(s, "flushes").number_value(), 42);
  EXPECT_EQ(Field(s, "reconnects").number_value(), 4);
  EXPECT_EQ(Field(a, "held_calls").number_value(), 7);
  EXPECT_EQ(Field(s, "held_calls").number_value(), 9);
}

TEST_F(AgentStatusApiTest, DecisionCountsBySource) {
  tally_.Record(Decided(DecisionSource::kLease, Verdict::kProceed));
  tally_.Record(Decided(DecisionSource::kLease, Verdict::kDone));
  tally_.Record(Decided(DecisionSource::kLease, Verdict::kDone));
  tally_.Record(Decided(DecisionSource::kLocalFallback, Verdict::kDefer));
  const Struct d = Field(Agent(""), "decisions").struct_value();
  const Struct& lease = Field(d, "lease").struct_value();
  EXPECT_EQ(Field(lease, "PROCEED").number_value(), 1);
  EXPECT_EQ(Field(lease, "DONE").number_value(), 2);
  EXPECT_EQ(Field(lease, "GIVE_UP").number_value(), 0);
  const Struct& fallback = Field(d, "fallback").struct_value();
  const Struct& coordinator = Field(d, "coordinator").struct_value();
  EXPECT_EQ(Field(fallback, "DEFER").number_value(), 1);
  EXPECT_EQ(Field(coordinator, "PROCEED").number_value(), 0);
}

TEST_F(AgentStatusApiTest, LeasesArePagedAndSayWhatTheyLeftOut) {
  Struct s = Agent("");
  EXPECT_EQ(leases_->asked_max, 100u);  // kDefaultPageSize
  auto leases = Field(s, "leases").list_value().values();
  ASSERT_EQ(leases.size(), 100);
  const Struct& first = leases[0].struct_value();
  EXPECT_EQ(Field(first, "endpoint").string_value(), "ep-000");
  EXPECT_EQ(Field(first, "replica").string_value(), "stagger-0");
  EXPECT_EQ(Field(first, "epoch").string_value(), "9007199254740993");
  EXPECT_EQ(Field(first, "expires").string_value(),
            "2026-01-01T00:00:30+00:00");
  EXPECT_EQ(Field(first, "allowance").number_value(), 200);
  EXPECT_EQ(Field(first, "left").number_value(), 150);
  EXPECT_EQ(Field(s, "leases_matched").number_value(), 250);
  EXPECT_EQ(Field(s, "left_out").number_value(), 150);
  EXPECT_EQ(Field(s, "next_after").string_value(), "ep-099");

  s = Agent("page_size=120&after=ep-099");
  EXPECT_EQ(leases_->asked_after, "ep-099");
  EXPECT_EQ(leases_->asked_max, 120u);
  EXPECT_EQ(Field(s, "leases").list_value().values_size(), 120);
  EXPECT_EQ(Field(s, "after").string_value(), "ep-099");
  EXPECT_EQ(Field(s, "left_out").number_value(), 30);
  EXPECT_EQ(Field(s, "next_after").string_value(), "ep-219");

  s = Agent("page_size=1000&after=ep-219");  // the last page
  EXPECT_EQ(Field(s, "leases").list_value().values_size(), 30);
  EXPECT_EQ(Field(s, "left_out").number_value(), 0);
  EXPECT_EQ(Field(s, "next_after").string_value(), "");
}

TEST_F(AgentStatusApiTest, HostileQueriesAreRefusedWithTheirReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"page_size=0", "page_size"},
      {"page_size=1001", "page_size"},
      {"page_size=ten", "page_size"},
      {"filter=all", "filter"},
      {"after=a&after=b", "after"},
      {"after=%ZZ", "%"},
      {"after=%00", "after"},
      {"after=%FF", "after"},
      {std::string(9000, 'a'), "bytes"},
      {"<script>=1", "script"},
  };
  for (const auto& [query, named] : cases) {
    const status::HttpResponse r = api_.Agent(query);
    EXPECT_EQ(r.status, 400) << query;
    const std::string error = Field(ParseJson(r.body), "error").string_value();
    EXPECT_TRUE(absl::StartsWith(error, "query: ")) << error;
    EXPECT_TRUE(absl::StrContains(error, named)) << query << " -> " << error;
  }
  EXPECT_EQ(api_.Decisions("page_size=1").status, 400);
}

TEST_F(AgentStatusApiTest, TheChartIsTheRingsLastTenMinutes) {
  tally_.Record(Decided(DecisionSource::kLease, Verdict::kProceed));
  clock_.Advance(absl::Seconds(3));
  tally_.Record(Decided(DecisionSource::kCoordinator, Verdict::kGiveUp));
  tally_.Record(Decided(DecisionSource::kCoordinator, Verdict::kGiveUp));
  const status::HttpResponse r = api_.Decisions("");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body, status::DecisionsJson(tally_.ring().Read()));
  const Struct s = ParseJson(r.body);
  EXPECT_EQ(Field(s, "last_second").number_value(),
            absl::ToUnixSeconds(clock_.Now()));
  EXPECT_EQ(Field(s, "seconds").number_value(), 600);
  const Struct& v = Field(s, "verdicts").struct_value();
  ASSERT_EQ(v.fields_size(), 4);
  const auto& proceed = Field(v, "PROCEED").list_value().values();
  const auto& give_up = Field(v, "GIVE_UP").list_value().values();
  ASSERT_EQ(proceed.size(), 600);
  ASSERT_EQ(give_up.size(), 600);
  EXPECT_EQ(proceed[596].number_value(), 1);
  EXPECT_EQ(give_up[599].number_value(), 2);
  EXPECT_EQ(Field(v, "DONE").list_value().values(599).number_value(), 0);
}

TEST(AgentStatusJsonTest, KeysAreEscapedNotInterpreted) {
  FakeClock clock;
  DecisionTally tally(&clock);
  const std::string key = "orders/<b>\"x\"</b>\\\x01";
  AgentStatusApi api({"127.0.0.1:50051", "fail_closed", false},
                     [&](absl::string_view, size_t) {
                       client::LeaseStatus s;
                       s.leases.push_back(
                           {key, "r\"0", 1, absl::InfinitePast(), 1, 1});
                       s.leases_matched = 1;
                       return s;
                     },
                     &tally, &clock);
  const status::HttpResponse r = api.Agent("");
  ASSERT_EQ(r.status, 200);
  const Struct s = ParseJson(r.body);
  const Struct& lease =
      Field(s, "leases").list_value().values(0).struct_value();
  EXPECT_EQ(Field(lease, "endpoint").string_value(), key);
  EXPECT_EQ(Field(lease, "replica").string_value(), "r\"0");
  EXPECT_EQ(Field(lease, "expires").kind_case(), Value::kNullValue);
  EXPECT_FALSE(Field(s, "coordinator_up").bool_value());  // no replicas
  EXPECT_FALSE(Field(s, "leases_on").bool_value());
  EXPECT_EQ(Field(s, "fallback").string_value(), "fail_closed");
}

// ---- a real client's lease_status -------------------------------------------

// A real client with leases on, its coordinator away (a loopback port
// nothing listens on): one replica, its stream kept but not up, no leases.
TEST(LeaseStatusTest, ARealClientReportsItsReplicaAndStream) {
  client::ClientOptions o;
  o.target = "127.0.0.1:1";
  o.leases = true;
  o.lease_holder_id = "agent-under-test";
  auto c = client::CoordinatorClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const client::LeaseStatus s = (*c)->lease_status("", 10);
  EXPECT_EQ(s.holder_id, "agent-under-test");
  ASSERT_EQ(s.replicas.size(), 1u);
  EXPECT_EQ(s.replicas[0].target, "127.0.0.1:1");
  EXPECT_TRUE(s.replicas[0].stream);
  EXPECT_FALSE(s.replicas[0].stream_connected);
  EXPECT_NE(s.replicas[0].incarnation, 0u);
  EXPECT_TRUE(s.leases.empty());
  EXPECT_EQ(s.leases_matched, 0);

  client::ClientOptions off;
  off.target = "127.0.0.1:1";
  auto plain = client::CoordinatorClient::Create(off);
  ASSERT_TRUE(plain.ok());
  const client::LeaseStatus p = (*plain)->lease_status("", 10);
  EXPECT_EQ(p.holder_id, "");
  ASSERT_EQ(p.replicas.size(), 1u);
  EXPECT_FALSE(p.replicas[0].stream);
  EXPECT_EQ(p.replicas[0].incarnation, 0u);
}

// ---- the page over HTTP -----------------------------------------------------

TEST(AgentStatusPageTest, ServesThePageItsAssetsAndTheJsonOnLoopback) {
  FakeClock clock;
  DecisionTally tally(&clock);
  auto page = AgentStatusPage::Start(
      "127.0.0.1:0", {"127.0.0.1:50051", "fail_open", true},
      ScriptedLeases(3, clock.Now()), &tally, &clock);
  ASSERT_TRUE(page.ok()) << page.status();
  const int port = (*page)->port();
  ASSERT_GT(port, 0);
  auto index = ::stagger::testing::HttpGet(port, "/");
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->status, 200);
  EXPECT_TRUE(
      absl::StrContains(index->body, "<title>stagger-agent status</title>"));
  for (const char* asset : {"/agent_status.js", "/agent_status.css",
                            "/favicon.svg", "/index.html"}) {
    auto r = ::stagger::testing::HttpGet(port, asset);
    ASSERT_TRUE(r.ok()) << asset;
    EXPECT_EQ(r->status, 200) << asset;
    EXPECT_FALSE(r->body.empty()) << asset;
  }
  auto agent = ::stagger::testing::HttpGet(port, "/api/agent?page_size=2");
  ASSERT_TRUE(agent.ok());
  EXPECT_EQ(agent->status, 200);
  EXPECT_EQ(Field(ParseJson(agent->body), "left_out").number_value(), 1);
  auto refused = ::stagger::testing::HttpGet(port, "/api/agent?page_size=5000");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 400);
  auto missing = ::stagger::testing::HttpGet(port, "/api/summary");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);  // staggerd's, not the agent's

  auto bad = AgentStatusPage::Start(
      "no-port", {}, ScriptedLeases(0, clock.Now()), &tally, &clock);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "status_address"));
}

}  // namespace
}  // namespace stagger::agent
