// stagger-agent's status page below the browser: the decision tally, each
// replica's lease state (LeaseState), the JSON of /api/agent and
// /api/decisions (parsed back, on a fake clock and a scripted lease source
// shaped as CoordinatorClient::lease_status shapes its answers: two
// replicas' not-clear sets, paged by target), the refusals of bad queries,
// a real client's lease_status and the JSON made from it, and the page
// served over loopback HTTP.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "agent/status/agent_status_api.h"
#include "agent/status/agent_status_page.h"
#include "agent/status/decision_tally.h"
#include "client/coordinator_client.h"
#include "core/http/json.h"
#include "core/status/decisions_json.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/http_get.h"

namespace stagger::agent {
namespace {

using client::ClientDecision;
using client::DecisionSource;
using client::NotClearEntry;
using client::ReplicaStatus;
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

// ---- LeaseState ------------------------------------------------------------

ReplicaStatus Replica(std::string name, std::string target, bool up) {
  ReplicaStatus r;
  r.name = std::move(name);
  r.target = std::move(target);
  r.up = up;
  r.serving = up;
  return r;
}

// A replica whose stream is up, its copy current, and leased.
ReplicaStatus Leased() {
  ReplicaStatus r = Replica("stagger-0", "10.0.0.1:50051", true);
  r.stream = true;
  r.stream_connected = true;
  r.leased = true;
  r.lease_left = absl::Milliseconds(1500);
  r.in_sync = true;
  return r;
}

TEST(LeaseStateTest, SaysWhetherTheLeaseLivesAndElseWhyNot) {
  struct Case {
    const char* name;
    void (*change)(ReplicaStatus&);
    const char* want;
  };
  const Case cases[] = {
      {"leased and current", [](ReplicaStatus&) {}, "LIVE"},
      {"the stream broke, the lease runs on",
       [](ReplicaStatus& r) { r.stream_connected = false; }, "LIVE"},
      {"leases off", [](ReplicaStatus& r) { r.stream = false; }, "OFF"},
      {"refused",
       [](ReplicaStatus& r) {
         r.leased = false;
         r.refusal = "no lease: members differ";
       },
       "REFUSED"},
      {"a gap in the copy under a live lease",
       [](ReplicaStatus& r) { r.in_sync = false; }, "OUT_OF_DATE"},
      {"no snapshot yet on a new stream",
       [](ReplicaStatus& r) {
         r.leased = false;
         r.in_sync = false;
       },
       "OUT_OF_DATE"},
      {"stream down, lease over",
       [](ReplicaStatus& r) {
         r.stream_connected = false;
         r.leased = false;
       },
       "STREAM_DOWN"},
      {"never connected",
       [](ReplicaStatus& r) {
         r.stream_connected = false;
         r.leased = false;
         r.in_sync = false;
       },
       "STREAM_DOWN"},
      {"up and current, no renewal (learning period)",
       [](ReplicaStatus& r) { r.leased = false; }, "NOT_GRANTED"},
  };
  for (const Case& c : cases) {
    ReplicaStatus r = Leased();
    c.change(r);
    EXPECT_STREQ(LeaseState(r), c.want) << c.name;
  }
}

// ---- AgentStatusApi ---------------------------------------------------------

// A lease source as CoordinatorClient::lease_status answers: two replicas
// and the union of their sets' entries after `after`, in (target,
// replica) order, cut at `max`, with how many there are after `after`.
// Remembers what it was asked.
class ScriptedSets {
 public:
  // `total` endpoint entries "ep-000".."ep-NNN" in stagger-0's set.
  ScriptedSets(int total, absl::Time now) {
    for (int i = 0; i < total; ++i) {
      const std::string key =
          absl::StrCat("ep-", i < 100 ? "0" : "", i < 10 ? "0" : "", i);
      Add({key, "endpoint", i % 2 == 0 ? "BREAKER" : "RETRY_AFTER",
           "stagger-0",
           i % 2 == 0 ? absl::InfinitePast() : now + absl::Seconds(30)});
    }
  }
  void Add(NotClearEntry e) { entries_.push_back(std::move(e)); }

  client::LeaseStatus operator()(absl::string_view after, size_t max) {
    asked.emplace_back(std::string(after), max);
    client::LeaseStatus s;
    s.holder_id = "node-7";
    ReplicaStatus a = Leased();
    a.incarnation = 18446744073709551557u;  // beyond a double's exact range
    a.set_version = 9007199254740993u;
    a.not_clear = 250;
    a.flushes = 40;
    a.reconnects = 1;
    a.held_calls = 7;
    ReplicaStatus b = Replica("stagger-1", "10.0.0.2:50051", false);
    b.stream = true;
    b.incarnation = 5;
    b.set_version = 3;
    b.refusal = "no lease: members \"differ\"";
    b.flushes = 2;
    b.reconnects = 3;
    b.held_calls = 2;
    s.replicas = {a, b};
    std::vector<NotClearEntry> sorted = entries_;
    std::sort(sorted.begin(), sorted.end(),
              [](const NotClearEntry& x, const NotClearEntry& y) {
                return std::tie(x.target, x.replica) <
                       std::tie(y.target, y.replica);
              });
    for (const NotClearEntry& e : sorted) {
      if (e.target <= after) continue;
      ++s.not_clear_matched;
      if (s.not_clear.size() < max) s.not_clear.push_back(e);
    }
    return s;
  }
  std::vector<std::pair<std::string, size_t>> asked;

 private:
  std::vector<NotClearEntry> entries_;
};

class AgentStatusApiTest : public ::testing::Test {
 protected:
  AgentStatusApiTest()
      : sets_(std::make_shared<ScriptedSets>(250, clock_.Now())),
        tally_(&clock_),
        api_({"stagger-0=10.0.0.1:50051,stagger-1=10.0.0.2:50051",
              "fail_open", true},
             [l = sets_](absl::string_view after, size_t max) {
               return (*l)(after, max);
             },
             &tally_, &clock_) {}

  Struct Agent(const std::string& query) {
    const http::HttpResponse r = api_.Agent(query);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.content_type, "application/json");
    return ParseJson(r.body);
  }
  // The targets of a page, in order.
  static std::vector<std::string> Targets(const Struct& s) {
    std::vector<std::string> out;
    for (const Value& e : Field(s, "not_clear").list_value().values()) {
      out.push_back(Field(e.struct_value(), "target").string_value() + "@" +
                    Field(e.struct_value(), "replica").string_value());
    }
    return out;
  }

  FakeClock clock_;
  std::shared_ptr<ScriptedSets> sets_;
  DecisionTally tally_;
  AgentStatusApi api_;
};

TEST_F(AgentStatusApiTest, TheAgentItsReplicasTheirLeasesAndSets) {
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
  EXPECT_EQ(Field(a, "lease_state").string_value(), "LIVE");
  EXPECT_TRUE(Field(a, "leased").bool_value());
  EXPECT_EQ(Field(a, "lease_left_ms").number_value(), 1500);
  EXPECT_TRUE(Field(a, "in_sync").bool_value());
  EXPECT_EQ(Field(a, "set_version").string_value(), "9007199254740993");
  EXPECT_EQ(Field(a, "not_clear").number_value(), 250);
  EXPECT_EQ(Field(a, "refusal").string_value(), "");
  EXPECT_EQ(Field(a, "held_calls").number_value(), 7);
  const Struct& b = replicas[1].struct_value();
  EXPECT_FALSE(Field(b, "up").bool_value());
  EXPECT_FALSE(Field(b, "serving").bool_value());
  EXPECT_EQ(Field(b, "stream").string_value(), "DOWN");
  EXPECT_EQ(Field(b, "lease_state").string_value(), "REFUSED");
  EXPECT_FALSE(Field(b, "leased").bool_value());
  EXPECT_EQ(Field(b, "lease_left_ms").number_value(), 0);
  EXPECT_FALSE(Field(b, "in_sync").bool_value());
  EXPECT_EQ(Field(b, "set_version").string_value(), "3");
  EXPECT_EQ(Field(b, "refusal").string_value(), "no lease: members \"differ\"");
  EXPECT_EQ(Field(s, "flushes").number_value(), 42);
  EXPECT_EQ(Field(s, "reconnects").number_value(), 4);
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

TEST_F(AgentStatusApiTest, EntriesArePagedAndSayWhatTheyLeftOut) {
  Struct s = Agent("");
  // One more than the page, to see whether the page splits a target.
  EXPECT_EQ(sets_->asked.back(), std::make_pair(std::string(), size_t{101}));
  auto entries = Field(s, "not_clear").list_value().values();
  ASSERT_EQ(entries.size(), 100);
  const Struct& first = entries[0].struct_value();
  EXPECT_EQ(Field(first, "target").string_value(), "ep-000");
  EXPECT_EQ(Field(first, "scope").string_value(), "endpoint");
  EXPECT_EQ(Field(first, "why").string_value(), "BREAKER");
  EXPECT_EQ(Field(first, "replica").string_value(), "stagger-0");
  EXPECT_EQ(Field(first, "until").kind_case(), Value::kNullValue);
  const Struct& second = entries[1].struct_value();
  EXPECT_EQ(Field(second, "why").string_value(), "RETRY_AFTER");
  EXPECT_EQ(Field(second, "until").string_value(), "2026-01-01T00:00:30+00:00");
  EXPECT_EQ(Field(s, "not_clear_matched").number_value(), 250);
  EXPECT_EQ(Field(s, "left_out").number_value(), 150);
  EXPECT_EQ(Field(s, "next_after").string_value(), "ep-099");

  s = Agent("page_size=120&after=ep-099");
  EXPECT_EQ(sets_->asked.back(), std::make_pair(std::string("ep-099"),
                                                size_t{121}));
  EXPECT_EQ(Field(s, "not_clear").list_value().values_size(), 120);
  EXPECT_EQ(Field(s, "after").string_value(), "ep-099");
  EXPECT_EQ(Field(s, "page_size").number_value(), 120);
  EXPECT_EQ(Field(s, "left_out").number_value(), 30);
  EXPECT_EQ(Field(s, "next_after").string_value(), "ep-219");

  s = Agent("page_size=1000&after=ep-219");  // the last page
  EXPECT_EQ(Field(s, "not_clear").list_value().values_size(), 30);
  EXPECT_EQ(Field(s, "not_clear_matched").number_value(), 30);
  EXPECT_EQ(Field(s, "left_out").number_value(), 0);
  EXPECT_EQ(Field(s, "next_after").string_value(), "");

  s = Agent("after=ep-249");  // past the end
  EXPECT_EQ(Field(s, "not_clear").list_value().values_size(), 0);
  EXPECT_EQ(Field(s, "next_after").string_value(), "");
}

// A prefix pause sits in every replica's set under one target: paging by
// target must neither split nor lose its entries.
TEST_F(AgentStatusApiTest, APageNeverSplitsATargetsEntries) {
  ScriptedSets sets(0, clock_.Now());
  for (const char* replica : {"stagger-0", "stagger-1", "stagger-2"}) {
    sets.Add({"tenant-7/", "prefix", "PAUSED", replica, absl::InfinitePast()});
  }
  sets.Add({"a", "endpoint", "BREAKER", "stagger-0", absl::InfinitePast()});
  sets.Add({"b", "endpoint", "BREAKER", "stagger-1", absl::InfinitePast()});
  sets.Add({"zz", "endpoint", "NEAR_TRIP", "stagger-2", absl::InfinitePast()});
  AgentStatusApi api({"x", "fail_open", true}, std::ref(sets), &tally_,
                     &clock_);
  const auto page = [&](const std::string& query) {
    const http::HttpResponse r = api.Agent(query);
    EXPECT_EQ(r.status, 200) << r.body;
    return ParseJson(r.body);
  };
  // Pages of 3: "tenant-7/" would straddle the first; it starts the next.
  Struct s = page("page_size=3");
  EXPECT_EQ(Targets(s),
            (std::vector<std::string>{"a@stagger-0", "b@stagger-1"}));
  EXPECT_EQ(Field(s, "left_out").number_value(), 4);
  EXPECT_EQ(Field(s, "next_after").string_value(), "b");
  s = page("page_size=3&after=b");
  EXPECT_EQ(Targets(s), (std::vector<std::string>{"tenant-7/@stagger-0",
                                                  "tenant-7/@stagger-1",
                                                  "tenant-7/@stagger-2"}));
  EXPECT_EQ(Field(s, "next_after").string_value(), "tenant-7/");
  s = page("page_size=3&after=tenant-7/");
  EXPECT_EQ(Targets(s), std::vector<std::string>{"zz@stagger-2"});
  EXPECT_EQ(Field(s, "next_after").string_value(), "");

  // Pages of 1: the three entries of "tenant-7/" come as one page of 3
  // (the source asked again for more), then "zz".
  s = page("page_size=1&after=b");
  EXPECT_EQ(Targets(s).size(), 3u);
  EXPECT_EQ(Field(s, "page_size").number_value(), 1);
  EXPECT_EQ(Field(s, "not_clear_matched").number_value(), 4);
  EXPECT_EQ(Field(s, "left_out").number_value(), 1);
  EXPECT_EQ(Field(s, "next_after").string_value(), "tenant-7/");
  EXPECT_EQ(sets.asked.back().second, 4u) << "asked 2, then 4";
  s = page("page_size=1&after=tenant-7/");
  EXPECT_EQ(Targets(s), std::vector<std::string>{"zz@stagger-2"});

  // Walking every page of 2 shows each entry exactly once.
  std::vector<std::string> seen;
  std::string after;
  for (int pages = 0; pages < 10; ++pages) {
    s = page("page_size=2&after=" + after);
    for (const std::string& t : Targets(s)) seen.push_back(t);
    after = Field(s, "next_after").string_value();
    if (after.empty()) break;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "a@stagger-0", "b@stagger-1", "tenant-7/@stagger-0",
                      "tenant-7/@stagger-1", "tenant-7/@stagger-2",
                      "zz@stagger-2"}));
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
    const http::HttpResponse r = api_.Agent(query);
    EXPECT_EQ(r.status, 400) << query;
    const std::string error = Field(ParseJson(r.body), "error").string_value();
    EXPECT_TRUE(absl::StartsWith(error, "query: ")) << error;
    EXPECT_TRUE(absl::StrContains(error, named)) << query << " -> " << error;
  }
  EXPECT_TRUE(sets_->asked.empty()) << "a refused query reads nothing";
  EXPECT_EQ(api_.Decisions("page_size=1").status, 400);
}

TEST_F(AgentStatusApiTest, TheChartIsTheRingsLastTenMinutes) {
  tally_.Record(Decided(DecisionSource::kLease, Verdict::kProceed));
  clock_.Advance(absl::Seconds(3));
  tally_.Record(Decided(DecisionSource::kCoordinator, Verdict::kGiveUp));
  tally_.Record(Decided(DecisionSource::kCoordinator, Verdict::kGiveUp));
  const http::HttpResponse r = api_.Decisions("");
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

TEST(AgentStatusJsonTest, TextIsEscapedNotInterpreted) {
  FakeClock clock;
  DecisionTally tally(&clock);
  const std::string key = "orders/<b>\"x\"</b>\\\x01";
  AgentStatusApi api({"127.0.0.1:50051", "fail_closed", false},
                     [&](absl::string_view, size_t) {
                       client::LeaseStatus s;
                       s.holder_id = "node <i>7</i>";
                       ReplicaStatus r = Leased();
                       r.name = "r\"0";
                       r.refusal = "members [\"<a>\"]\n";
                       r.leased = false;
                       s.replicas.push_back(r);
                       s.not_clear.push_back(
                           {key, "prefix", "PAUSED", "r\"0",
                            absl::FromUnixSeconds(1767225660)});
                       s.not_clear_matched = 1;
                       return s;
                     },
                     &tally, &clock);
  const http::HttpResponse r = api.Agent("");
  ASSERT_EQ(r.status, 200);
  const Struct s = ParseJson(r.body);
  EXPECT_EQ(Field(s, "agent_id").string_value(), "node <i>7</i>");
  const Struct& replica =
      Field(s, "replicas").list_value().values(0).struct_value();
  EXPECT_EQ(Field(replica, "name").string_value(), "r\"0");
  EXPECT_EQ(Field(replica, "refusal").string_value(), "members [\"<a>\"]\n");
  EXPECT_EQ(Field(replica, "lease_state").string_value(), "REFUSED");
  const Struct& entry =
      Field(s, "not_clear").list_value().values(0).struct_value();
  EXPECT_EQ(Field(entry, "target").string_value(), key);
  EXPECT_EQ(Field(entry, "replica").string_value(), "r\"0");
  EXPECT_EQ(Field(entry, "until").string_value(), "2026-01-01T00:01:00+00:00");
  EXPECT_TRUE(Field(s, "coordinator_up").bool_value());
  EXPECT_FALSE(Field(s, "leases_on").bool_value());
  EXPECT_EQ(Field(s, "fallback").string_value(), "fail_closed");
}

// ---- a real client's lease_status -------------------------------------------

// A real client with leases on, its coordinator away (a loopback port
// nothing listens on): one replica, its stream kept but down, no lease, no
// copy of a set; and the JSON the page reads, made from it.
TEST(LeaseStatusTest, ARealClientReportsItsReplicaStreamAndLease) {
  client::ClientOptions o;
  o.target = "127.0.0.1:1";
  o.leases = true;
  o.lease_holder_id = "agent-under-test";
  auto c = client::CoordinatorClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const client::LeaseStatus s = (*c)->lease_status("", 10);
  EXPECT_EQ(s.holder_id, "agent-under-test");
  ASSERT_EQ(s.replicas.size(), 1u);
  const ReplicaStatus& r = s.replicas[0];
  EXPECT_EQ(r.target, "127.0.0.1:1");
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.stream_connected);
  EXPECT_NE(r.incarnation, 0u);
  EXPECT_FALSE(r.leased);
  EXPECT_EQ(r.lease_left, absl::ZeroDuration());
  EXPECT_FALSE(r.in_sync);
  EXPECT_EQ(r.set_version, 0u);
  EXPECT_EQ(r.not_clear, 0);
  EXPECT_EQ(r.refusal, "");
  EXPECT_TRUE(s.not_clear.empty());
  EXPECT_EQ(s.not_clear_matched, 0);

  FakeClock clock;
  DecisionTally tally(&clock);
  AgentStatusApi api({o.target, "fail_open", true},
                     [&c](absl::string_view after, size_t max) {
                       return (*c)->lease_status(after, max);
                     },
                     &tally, &clock);
  const http::HttpResponse page = api.Agent("page_size=5");
  ASSERT_EQ(page.status, 200) << page.body;
  const Struct json = ParseJson(page.body);
  EXPECT_EQ(Field(json, "agent_id").string_value(), "agent-under-test");
  const Struct& replica =
      Field(json, "replicas").list_value().values(0).struct_value();
  EXPECT_EQ(Field(replica, "stream").string_value(), "DOWN");
  EXPECT_EQ(Field(replica, "lease_state").string_value(), "STREAM_DOWN");
  EXPECT_EQ(Field(replica, "incarnation").string_value(),
            absl::StrCat(r.incarnation));
  EXPECT_EQ(Field(replica, "set_version").string_value(), "0");
  EXPECT_EQ(Field(json, "not_clear").list_value().values_size(), 0);
  EXPECT_EQ(Field(json, "next_after").string_value(), "");

  client::ClientOptions off;
  off.target = "127.0.0.1:1";
  auto plain = client::CoordinatorClient::Create(off);
  ASSERT_TRUE(plain.ok());
  const client::LeaseStatus p = (*plain)->lease_status("", 10);
  EXPECT_EQ(p.holder_id, "");
  ASSERT_EQ(p.replicas.size(), 1u);
  EXPECT_FALSE(p.replicas[0].stream);
  EXPECT_EQ(p.replicas[0].incarnation, 0u);
  EXPECT_STREQ(LeaseState(p.replicas[0]), "OFF");
}

// ---- the page over HTTP -----------------------------------------------------

TEST(AgentStatusPageTest, ServesThePageItsAssetsAndTheJsonOnLoopback) {
  FakeClock clock;
  DecisionTally tally(&clock);
  auto page = AgentStatusPage::Start(
      "127.0.0.1:0", {"127.0.0.1:50051", "fail_open", true},
      ScriptedSets(3, clock.Now()), &tally, &clock);
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
      "no-port", {}, ScriptedSets(0, clock.Now()), &tally, &clock);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "status_address"));
}

}  // namespace
}  // namespace stagger::agent
