// Bad input through the real gRPC path: every malformed
// request is answered INVALID_ARGUMENT with a message that starts with the
// field's path ("attempt: ...", "items[3].retry_after: ..."), changes no
// state, records no decision, and leaves the server answering good calls.
//
// Each case runs against a fresh in-process server (so "no state changed"
// is exact: nothing is tracked, no decision is counted), and the whole table
// also runs against one server that must then still answer every RPC.
#include <climits>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/generic/generic_stub.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/testing/prom_text.h"
#include "tests/service/service_harness.h"

namespace stagger::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A short key that every profile accepts (max_key_bytes 16 included).
constexpr char kGoodKey[] = "ok.example";

// Server configurations the table needs.
enum class Profile { kDefault, kKeys16, kBatch3 };

engine::EngineConfig ConfigFor(Profile p) {
  engine::EngineConfig c;
  if (p == Profile::kKeys16) c.limits.max_key_bytes = 16;
  if (p == Profile::kBatch3) c.limits.max_batch_size = 3;
  return c;
}

using Call = std::function<grpc::Status(ServiceHarness&)>;

Call Admit(v1::AdmitRequest r) {
  return [r](ServiceHarness& h) { return h.Admit(r); };
}
Call Report(v1::ReportRequest r) {
  return [r](ServiceHarness& h) { return h.Report(r); };
}
Call AdmitBatch(std::vector<v1::AdmitRequest> items) {
  return [items](ServiceHarness& h) {
    v1::AdmitBatchRequest req;
    for (const auto& i : items) *req.add_items() = i;
    return h.AdmitBatch(req);
  };
}
Call ReportBatch(std::vector<v1::ReportRequest> items) {
  return [items](ServiceHarness& h) {
    v1::ReportBatchRequest req;
    for (const auto& i : items) *req.add_items() = i;
    return h.ReportBatch(req);
  };
}
Call List(int page_size, std::string token, int state) {
  return [=](ServiceHarness& h) {
    v1::ListEndpointsRequest req;
    req.set_page_size(page_size);
    req.set_page_token(token);
    req.set_breaker_state(static_cast<v1::BreakerState>(state));
    return h.ListEndpoints(req);
  };
}
Call Get(std::string key) {
  return [key](ServiceHarness& h) { return h.Get(key); };
}

v1::ReportRequest Failure(absl::string_view key = kGoodKey) {
  return ReportReq(key, 1, v1::RETRYABLE_FAILURE);
}
v1::ReportRequest WithRetryAfter(google::protobuf::Duration d) {
  v1::ReportRequest r = ReportReq(kGoodKey, 1, v1::RATE_LIMITED);
  *r.mutable_retry_after() = d;
  return r;
}
v1::ReportRequest WithOutcome(int outcome) {
  return ReportReq(kGoodKey, 1, static_cast<v1::Outcome>(outcome));
}
v1::AdmitRequest AdmitDeadline(google::protobuf::Timestamp t) {
  v1::AdmitRequest r = AdmitReq(kGoodKey);
  *r.mutable_deadline() = t;
  return r;
}
v1::ReportRequest ReportDeadline(google::protobuf::Timestamp t) {
  v1::ReportRequest r = Failure();
  *r.mutable_deadline() = t;
  return r;
}
std::vector<v1::AdmitRequest> Admits(int n) {
  std::vector<v1::AdmitRequest> v;
  for (int i = 0; i < n; ++i) v.push_back(AdmitReq(absl::StrCat("k", i)));
  return v;
}
std::vector<v1::ReportRequest> Reports(int n) {
  std::vector<v1::ReportRequest> v;
  for (int i = 0; i < n; ++i) v.push_back(Failure(absl::StrCat("k", i)));
  return v;
}

struct BadInput {
  std::string name;
  Profile profile;
  Call call;
  // The message starts with "<field>:" ...
  std::string field;
  // ... and contains this (may be empty).
  std::string detail = "";
  grpc::StatusCode code = grpc::StatusCode::INVALID_ARGUMENT;
};

std::vector<BadInput> BadInputs() {
  const std::string k513(513, 'a');  // one over the default 512
  const std::string k17(17, 'a');    // one over 16
  // Timestamp bounds (0001-01-01 .. 9999-12-31T23:59:59Z).
  constexpr int64_t kTsMin = -62135596800, kTsMax = 253402300799;
  constexpr int64_t kDurMax = 315576000000;  // google.protobuf.Duration
  using P = Profile;
  std::vector<BadInput> v = {
      // --- endpoint key: empty, too long, control characters.
      {"AdmitEmptyEndpoint", P::kDefault, Admit(AdmitReq("")), "endpoint",
       "empty"},
      {"ReportEmptyEndpoint", P::kDefault, Report(Failure("")), "endpoint",
       "empty"},
      {"GetEmptyEndpoint", P::kDefault, Get(""), "endpoint", "empty"},
      {"AdmitEndpoint513Bytes", P::kDefault, Admit(AdmitReq(k513)), "endpoint",
       "limits.max_key_bytes"},
      {"ReportEndpoint513Bytes", P::kDefault, Report(Failure(k513)), "endpoint",
       "limits.max_key_bytes"},
      {"GetEndpoint513Bytes", P::kDefault, Get(k513), "endpoint",
       "limits.max_key_bytes"},
      {"AdmitEndpoint17BytesOverLimit16", P::kKeys16, Admit(AdmitReq(k17)),
       "endpoint", "of 16 (limits.max_key_bytes)"},
      {"ReportEndpoint17BytesOverLimit16", P::kKeys16, Report(Failure(k17)),
       "endpoint", "of 16"},
      // 513 bytes is refused under 16 too (not only "one over").
      {"AdmitEndpoint513BytesOverLimit16", P::kKeys16, Admit(AdmitReq(k513)),
       "endpoint", "of 16"},
      {"AdmitEndpointSoh", P::kDefault, Admit(AdmitReq("a\x01" "b")),
       "endpoint", "0x01 at byte 1"},
      {"AdmitEndpointNewline", P::kDefault, Admit(AdmitReq("a\nb")),
       "endpoint", "0x0a"},
      {"AdmitEndpointTab", P::kDefault, Admit(AdmitReq("\tab")), "endpoint",
       "0x09 at byte 0"},
      {"AdmitEndpointDel", P::kDefault, Admit(AdmitReq("ab\x7f")), "endpoint",
       "0x7f at byte 2"},
      {"AdmitEndpointNul", P::kDefault, Admit(AdmitReq(std::string("a\0b", 3))),
       "endpoint", "0x00 at byte 1"},
      {"ReportEndpointUnitSeparator", P::kDefault, Report(Failure("x\x1f")),
       "endpoint", "0x1f"},
      {"GetEndpointControlChar", P::kDefault, Get("a\rb"), "endpoint", "0x0d"},

      // --- attempt: >= 1 and <= 1,000,000.
      {"AdmitAttempt0", P::kDefault, Admit(AdmitReq(kGoodKey, 0)), "attempt",
       "got 0"},
      {"AdmitAttemptMinus1", P::kDefault, Admit(AdmitReq(kGoodKey, -1)),
       "attempt", "got -1"},
      {"AdmitAttemptIntMin", P::kDefault, Admit(AdmitReq(kGoodKey, INT_MIN)),
       "attempt"},
      {"AdmitAttempt1000001", P::kDefault, Admit(AdmitReq(kGoodKey, 1000001)),
       "attempt", "got 1000001"},
      {"AdmitAttemptIntMax", P::kDefault, Admit(AdmitReq(kGoodKey, INT_MAX)),
       "attempt"},
      {"ReportAttempt0", P::kDefault,
       Report(ReportReq(kGoodKey, 0, v1::RETRYABLE_FAILURE)), "attempt"},
      {"ReportAttemptMinus1", P::kDefault,
       Report(ReportReq(kGoodKey, -1, v1::SUCCESS)), "attempt"},
      {"ReportAttempt1000001", P::kDefault,
       Report(ReportReq(kGoodKey, 1000001, v1::RETRYABLE_FAILURE)), "attempt"},

      // --- outcome: set, and a known value.
      {"OutcomeUnspecified", P::kDefault, Report(WithOutcome(0)), "outcome",
       "must be set"},
      {"OutcomeUnknown99", P::kDefault, Report(WithOutcome(99)), "outcome",
       "99"},
      {"OutcomeUnknown6", P::kDefault, Report(WithOutcome(6)), "outcome", "6"},
      {"OutcomeNegative", P::kDefault, Report(WithOutcome(-1)), "outcome",
       "-1"},

      // --- retry_after: 0 .. 24 h, and a well-formed Duration.
      {"RetryAfterMinus1s", P::kDefault,
       Report(WithRetryAfter(RawDuration(-1, 0))), "retry_after", ">= 0"},
      {"RetryAfterMinus1ns", P::kDefault,
       Report(WithRetryAfter(RawDuration(0, -1))), "retry_after", ">= 0"},
      {"RetryAfter24hPlus1ns", P::kDefault,
       Report(WithRetryAfter(RawDuration(86400, 1))), "retry_after", "<= 24h"},
      {"RetryAfterOneYear", P::kDefault,
       Report(WithRetryAfter(RawDuration(365 * 86400, 0))), "retry_after",
       "<= 24h"},
      {"RetryAfterDurationMax", P::kDefault,
       Report(WithRetryAfter(RawDuration(kDurMax, 999999999))), "retry_after"},
      {"RetryAfterSignsDiffer", P::kDefault,
       Report(WithRetryAfter(RawDuration(1, -1))), "retry_after",
       "not a valid Duration"},
      {"RetryAfterSignsDifferNegSeconds", P::kDefault,
       Report(WithRetryAfter(RawDuration(-1, 1))), "retry_after",
       "not a valid Duration"},
      {"RetryAfterNanosOneSecond", P::kDefault,
       Report(WithRetryAfter(RawDuration(0, 1000000000))), "retry_after",
       "not a valid Duration"},
      {"RetryAfterNanosIntMax", P::kDefault,
       Report(WithRetryAfter(RawDuration(5, INT32_MAX))), "retry_after",
       "not a valid Duration"},
      {"RetryAfterSecondsOverDurationRange", P::kDefault,
       Report(WithRetryAfter(RawDuration(kDurMax + 1, 0))), "retry_after",
       "not a valid Duration"},
      {"RetryAfterSecondsInt64Min", P::kDefault,
       Report(WithRetryAfter(RawDuration(INT64_MIN, 0))), "retry_after",
       "not a valid Duration"},

      // --- deadline / first_attempt_time: well-formed Timestamps.
      {"AdmitDeadlineNegativeNanos", P::kDefault,
       Admit(AdmitDeadline(RawTimestamp(1767225600, -1))), "deadline",
       "not a valid Timestamp"},
      {"AdmitDeadlineNanosOneSecond", P::kDefault,
       Admit(AdmitDeadline(RawTimestamp(1767225600, 1000000000))), "deadline",
       "not a valid Timestamp"},
      {"AdmitDeadlineBeforeYear1", P::kDefault,
       Admit(AdmitDeadline(RawTimestamp(kTsMin - 1, 0))), "deadline"},
      {"AdmitDeadlineAfterYear9999", P::kDefault,
       Admit(AdmitDeadline(RawTimestamp(kTsMax + 1, 0))), "deadline"},
      {"AdmitDeadlineInt64Max", P::kDefault,
       Admit(AdmitDeadline(RawTimestamp(INT64_MAX, 0))), "deadline"},
      {"ReportDeadlineNegativeNanos", P::kDefault,
       Report(ReportDeadline(RawTimestamp(1767225600, -5))), "deadline"},
      {"ReportDeadlineInt64Min", P::kDefault,
       Report(ReportDeadline(RawTimestamp(INT64_MIN, 0))), "deadline"},
      {"AdmitFirstAttemptTimeMalformed", P::kDefault,
       Admit([] {
         v1::AdmitRequest r = AdmitReq(kGoodKey);
         *r.mutable_first_attempt_time() = RawTimestamp(0, -1);
         return r;
       }()),
       "first_attempt_time", "not a valid Timestamp"},
      {"ReportFirstAttemptTimeMalformed", P::kDefault,
       Report([] {
         v1::ReportRequest r = Failure();
         *r.mutable_first_attempt_time() = RawTimestamp(kTsMax + 1, 0);
         return r;
       }()),
       "first_attempt_time"},

      // --- batch sizes: 1 .. limits.max_batch_size.
      {"AdmitBatchEmpty", P::kDefault, AdmitBatch({}), "items", "got 0"},
      {"ReportBatchEmpty", P::kDefault, ReportBatch({}), "items", "got 0"},
      {"AdmitBatch1001", P::kDefault, AdmitBatch(Admits(1001)), "items",
       "1..1000 items (limits.max_batch_size), got 1001"},
      {"ReportBatch1001", P::kDefault, ReportBatch(Reports(1001)), "items",
       "1..1000 items (limits.max_batch_size), got 1001"},
      {"AdmitBatch4OverLimit3", P::kBatch3, AdmitBatch(Admits(4)), "items",
       "1..3 items (limits.max_batch_size), got 4"},
      {"ReportBatch4OverLimit3", P::kBatch3, ReportBatch(Reports(4)), "items",
       "1..3 items (limits.max_batch_size), got 4"},
      {"AdmitBatchEmptyLimit3", P::kBatch3, AdmitBatch({}), "items", "got 0"},
      // A bad item names its index (the state check is BadBatchItemTest).
      {"AdmitBatchBadItem0", P::kDefault,
       AdmitBatch({AdmitReq(""), AdmitReq("a"), AdmitReq("b")}),
       "items[0].endpoint"},
      {"AdmitBatchBadItem2", P::kDefault,
       AdmitBatch({AdmitReq("a"), AdmitReq("b"), AdmitReq("c", 0)}),
       "items[2].attempt"},
      {"ReportBatchBadItem1", P::kDefault,
       ReportBatch({Failure("a"), WithOutcome(99), Failure("b")}),
       "items[1].outcome", "99"},
      {"ReportBatchBadItemLimit3", P::kBatch3,
       ReportBatch({Failure("a"), Failure("b"),
                    WithRetryAfter(RawDuration(-3, 0))}),
       "items[2].retry_after"},

      // --- ListEndpoints: page_size 0..1000, a token we issued, a known
      // state.
      {"ListPageSizeMinus1", P::kDefault, List(-1, "", 0), "page_size",
       "got -1"},
      {"ListPageSize1001", P::kDefault, List(1001, "", 0), "page_size",
       "got 1001"},
      {"ListPageSizeIntMin", P::kDefault, List(INT_MIN, "", 0), "page_size"},
      {"ListTokenNotHex", P::kDefault, List(10, "zz", 0), "page_token"},
      {"ListTokenOddLength", P::kDefault, List(10, "abc", 0), "page_token"},
      {"ListTokenPrintableJunk", P::kDefault, List(10, "next page please", 0),
       "page_token"},
      {"ListBreakerStateUnknown99", P::kDefault, List(10, "", 99),
       "breaker_state", "99"},
      {"ListBreakerStateUnknown4", P::kDefault, List(10, "", 4),
       "breaker_state", "4"},
      {"ListBreakerStateNegative", P::kDefault, List(10, "", -1),
       "breaker_state", "-1"},

      // --- GetEndpoint on a key never seen: NOT_FOUND, naming the field.
      {"GetUnknownEndpoint", P::kDefault, Get("never.seen.example"), "endpoint",
       "not tracked", grpc::StatusCode::NOT_FOUND},
  };
  return v;
}

const char* ProfileName(Profile p) {
  switch (p) {
    case Profile::kDefault: return "default";
    case Profile::kKeys16: return "max_key_bytes=16";
    case Profile::kBatch3: return "max_batch_size=3";
  }
  return "?";
}

// A good call that every profile accepts: the server still decides.
void ExpectServerStillAnswers(ServiceHarness& h) {
  v1::AdmitResponse resp;
  grpc::Status s = h.Admit(AdmitReq(kGoodKey), &resp);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_EQ(resp.decision().verdict(), v1::PROCEED);
  EXPECT_EQ(resp.decision().reason(), v1::INITIAL_JITTER);
}

// gtest prints a case by its name, not as bytes.
void PrintTo(const BadInput& c, std::ostream* os) { *os << c.name; }

class BadInputTest : public ::testing::TestWithParam<BadInput> {};

TEST_P(BadInputTest, RefusedNamingTheFieldAndNothingChanges) {
  const BadInput& c = GetParam();
  ServiceHarness::Options o;
  o.config = ConfigFor(c.profile);
  o.with_metrics = true;
  ServiceHarness h(o);
  SCOPED_TRACE(absl::StrCat("profile ", ProfileName(c.profile)));

  // The bad call: refused with the field's path first.
  const grpc::Status s = c.call(h);
  EXPECT_EQ(s.error_code(), c.code) << Describe(s);
  EXPECT_THAT(s.error_message(), StartsWith(c.field + ":"));
  EXPECT_THAT(s.error_message(), HasSubstr(c.detail));

  // Nothing tracked, nothing decided.
  EXPECT_EQ(h.engine().Stats().tracked, 0);
  PromText t(h.Scrape());
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t.Sum("stagger_decisions_total"), 0);

  // And the server answers the next good call.
  ExpectServerStillAnswers(h);
  EXPECT_EQ(h.engine().Stats().tracked, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadInputTest, ::testing::ValuesIn(BadInputs()),
    [](const ::testing::TestParamInfo<BadInput>& i) { return i.param.name; });

// The whole table, twice, against one server per profile: it neither
// crashes nor tracks anything, then answers every RPC.
TEST(BadInputTest, OneServerSurvivesTheWholeTable) {
  for (Profile p : {Profile::kDefault, Profile::kKeys16, Profile::kBatch3}) {
    SCOPED_TRACE(ProfileName(p));
    ServiceHarness::Options o;
    o.config = ConfigFor(p);
    ServiceHarness h(o);
    int refused = 0;
    for (int round = 0; round < 2; ++round) {
      for (const BadInput& c : BadInputs()) {
        if (c.profile != p) continue;
        const grpc::Status s = c.call(h);
        EXPECT_EQ(s.error_code(), c.code) << c.name << ": " << Describe(s);
        ++refused;
      }
    }
    EXPECT_GT(refused, 0);
    EXPECT_EQ(h.engine().Stats().tracked, 0);

    // Every RPC still answers.
    ExpectServerStillAnswers(h);
    v1::ReportResponse rep;
    grpc::Status s = h.Report(Failure(), &rep);
    ASSERT_TRUE(s.ok()) << Describe(s);
    EXPECT_EQ(rep.decision().verdict(), v1::PROCEED);
    EXPECT_TRUE(AdmitBatch(Admits(2))(h).ok());
    EXPECT_TRUE(ReportBatch(Reports(2))(h).ok());
    EXPECT_TRUE(h.Get(kGoodKey).ok());
    v1::ListEndpointsResponse list;
    ASSERT_TRUE(h.ListEndpoints(v1::ListEndpointsRequest(), &list).ok());
    EXPECT_EQ(list.total_tracked(), 3);  // ok.example, k0, k1
  }
}

// Boundaries that are NOT bad input: the largest key, the largest batch,
// attempt 1,000,000, a Retry-After of exactly 24 h, the Timestamp range
// ends. Each is answered (a decision, possibly GIVE_UP), never an error.
struct Accepted {
  std::string name;
  Profile profile;
  Call call;
};

std::vector<Accepted> AcceptedInputs() {
  using P = Profile;
  v1::AdmitRequest deadline_max = AdmitReq(kGoodKey);
  *deadline_max.mutable_deadline() = RawTimestamp(253402300799, 999999999);
  v1::AdmitRequest first_min = AdmitReq(kGoodKey);
  *first_min.mutable_first_attempt_time() = RawTimestamp(-62135596800, 0);
  return {
      {"Endpoint512Bytes", P::kDefault, Admit(AdmitReq(std::string(512, 'a')))},
      {"Endpoint16BytesLimit16", P::kKeys16,
       Admit(AdmitReq(std::string(16, 'a')))},
      {"EndpointUtf8", P::kDefault,
       Admit(AdmitReq("https://h\xc3\xa9llo.example/\xe2\x9c\x93"))},
      {"Attempt1000000", P::kDefault, Admit(AdmitReq(kGoodKey, 1000000))},
      {"ReportAttempt1000000", P::kDefault,
       Report(ReportReq(kGoodKey, 1000000, v1::TIMEOUT))},
      {"RetryAfterZero", P::kDefault, Report(WithRetryAfter(RawDuration(0, 0)))},
      {"RetryAfterExactly24h", P::kDefault,
       Report(WithRetryAfter(RawDuration(86400, 0)))},
      {"DeadlineYear9999", P::kDefault, Admit(deadline_max)},
      {"FirstAttemptYear1", P::kDefault, Admit(first_min)},
      {"AdmitBatch1000", P::kDefault, AdmitBatch(Admits(1000))},
      {"ReportBatch1000", P::kDefault, ReportBatch(Reports(1000))},
      {"AdmitBatch3Limit3", P::kBatch3, AdmitBatch(Admits(3))},
      {"ReportBatch1Limit3", P::kBatch3, ReportBatch(Reports(1))},
      {"ListPageSize1000", P::kDefault, List(1000, "", 0)},
      {"ListPageSize0", P::kDefault, List(0, "", 0)},
      {"ListTokenUpperHex", P::kDefault, List(1, "6B30", 0)},
      {"ListHalfOpenFilter", P::kDefault, List(10, "", 3)},
  };
}

void PrintTo(const Accepted& c, std::ostream* os) { *os << c.name; }

class AcceptedInputTest : public ::testing::TestWithParam<Accepted> {};

TEST_P(AcceptedInputTest, AnsweredNotRefused) {
  const Accepted& c = GetParam();
  ServiceHarness::Options o;
  o.config = ConfigFor(c.profile);
  ServiceHarness h(o);
  const grpc::Status s = c.call(h);
  EXPECT_TRUE(s.ok()) << Describe(s);
}

INSTANTIATE_TEST_SUITE_P(
    Table, AcceptedInputTest, ::testing::ValuesIn(AcceptedInputs()),
    [](const ::testing::TestParamInfo<Accepted>& i) { return i.param.name; });

// A bad item anywhere in a batch: the message names "items[i].<field>", and
// NO item of the batch has changed state: keys only this batch used are
// still unknown (NOT_FOUND), and an endpoint tracked before is exactly as it
// was (last_seen included: the clock moved, so any touch would show). Then
// the same batch with the item fixed goes through, which proves the items
// before and after the bad one would have changed state.
struct BadItem {
  std::string name;
  bool report;      // ReportBatch, else AdmitBatch
  int size;         // items in the batch
  int tracked_at;   // index of the already-tracked endpoint
  int bad_at;       // index of the bad item
  std::function<void(v1::AdmitRequest&)> spoil_admit;
  std::function<void(v1::ReportRequest&)> spoil_report;
  std::string field;  // after "items[bad_at]."
};

constexpr char kTracked[] = "tracked.example";

std::vector<BadItem> BadItems() {
  auto admit = [](std::function<void(v1::AdmitRequest&)> f) { return f; };
  auto report = [](std::function<void(v1::ReportRequest&)> f) { return f; };
  return {
      {"AdmitLastItemAttempt0", false, 5, 1, 4,
       admit([](v1::AdmitRequest& r) { r.set_attempt(0); }), nullptr,
       "attempt"},
      {"AdmitFirstItemEmptyKey", false, 5, 3, 0,
       admit([](v1::AdmitRequest& r) { r.set_endpoint(""); }), nullptr,
       "endpoint"},
      {"AdmitMiddleItemLongKey", false, 5, 0, 2,
       admit([](v1::AdmitRequest& r) { r.set_endpoint(std::string(600, 'x')); }),
       nullptr, "endpoint"},
      {"AdmitTrackedItemItselfBad", false, 4, 2, 2,
       admit([](v1::AdmitRequest& r) { r.set_attempt(-1); }), nullptr,
       "attempt"},
      {"AdmitLastItemBadDeadline", false, 5, 0, 4,
       admit([](v1::AdmitRequest& r) {
         *r.mutable_deadline() = RawTimestamp(1, 1000000000);
       }),
       nullptr, "deadline"},
      {"ReportLastItemOutcomeUnspecified", true, 5, 1, 4, nullptr,
       report([](v1::ReportRequest& r) { r.set_outcome(v1::OUTCOME_UNSPECIFIED); }),
       "outcome"},
      {"ReportMiddleItemOutcome99", true, 5, 0, 3, nullptr,
       report([](v1::ReportRequest& r) {
         r.set_outcome(static_cast<v1::Outcome>(99));
       }),
       "outcome"},
      {"ReportLastItemRetryAfterTwoDays", true, 5, 2, 4, nullptr,
       report([](v1::ReportRequest& r) {
         *r.mutable_retry_after() = RawDuration(2 * 86400, 0);
       }),
       "retry_after"},
      {"ReportItemMalformedRetryAfter", true, 5, 4, 1, nullptr,
       report([](v1::ReportRequest& r) {
         *r.mutable_retry_after() = RawDuration(3, -1);
       }),
       "retry_after"},
      {"ReportLastItemControlChar", true, 5, 0, 4, nullptr,
       report([](v1::ReportRequest& r) { r.set_endpoint("bad\x02key"); }),
       "endpoint"},
      {"ReportLastItemAttemptHuge", true, 5, 3, 4, nullptr,
       report([](v1::ReportRequest& r) { r.set_attempt(2000000); }), "attempt"},
  };
}

std::string ItemKey(const BadItem& c, int i) {
  return i == c.tracked_at ? std::string(kTracked)
                           : absl::StrCat("fresh-", i, ".example");
}

void PrintTo(const BadItem& c, std::ostream* os) { *os << c.name; }

class BadBatchItemTest : public ::testing::TestWithParam<BadItem> {};

TEST_P(BadBatchItemTest, NamesTheItemAndNoItemChangesState) {
  const BadItem& c = GetParam();
  ServiceHarness::Options o;
  o.with_metrics = true;
  ServiceHarness h(o);

  // kTracked: admitted, failed once (consecutive_failures=1, a previous
  // delay, budget used).
  ASSERT_TRUE(h.Admit(AdmitReq(kTracked)).ok());
  ASSERT_TRUE(h.Report(ReportReq(kTracked, 1, v1::RETRYABLE_FAILURE)).ok());
  v1::EndpointState before;
  ASSERT_TRUE(h.Get(kTracked, &before).ok());
  ASSERT_EQ(before.consecutive_failures(), 1);
  // One second later: a touch would move last_seen.
  h.clock().Advance(absl::Seconds(1));
  const double decided_before =
      PromText(h.Scrape()).Sum("stagger_decisions_total");
  ASSERT_EQ(decided_before, 2);

  // The batch: item i is endpoint ItemKey(i) (attempt 2 for the tracked
  // one, whose retry is due), item bad_at spoiled.
  v1::AdmitBatchRequest ab;
  v1::ReportBatchRequest rb;
  for (int i = 0; i < c.size; ++i) {
    const int attempt = i == c.tracked_at ? 2 : 1;
    if (c.report) {
      *rb.add_items() = ReportReq(ItemKey(c, i), attempt, v1::RETRYABLE_FAILURE);
    } else {
      *ab.add_items() = AdmitReq(ItemKey(c, i), attempt);
    }
  }
  if (c.report) {
    c.spoil_report(*rb.mutable_items(c.bad_at));
  } else {
    c.spoil_admit(*ab.mutable_items(c.bad_at));
  }
  const grpc::Status s = c.report ? h.ReportBatch(rb) : h.AdmitBatch(ab);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_THAT(s.error_message(),
              StartsWith(absl::StrCat("items[", c.bad_at, "].", c.field, ":")));

  // No fresh key became tracked ...
  for (int i = 0; i < c.size; ++i) {
    if (i == c.tracked_at || i == c.bad_at) continue;
    const grpc::Status g = h.Get(ItemKey(c, i));
    EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND)
        << "item " << i << " (" << ItemKey(c, i) << ") changed state: "
        << Describe(g);
  }
  // ... the tracked endpoint is exactly as it was ...
  v1::EndpointState after;
  ASSERT_TRUE(h.Get(kTracked, &after).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(before, after))
      << "before:\n" << before.DebugString() << "after:\n" << after.DebugString();
  // ... and nothing was decided.
  EXPECT_EQ(h.engine().Stats().tracked, 1);
  EXPECT_EQ(PromText(h.Scrape()).Sum("stagger_decisions_total"), decided_before);

  // The same batch with the bad item made good: every item is decided, in
  // order, and the fresh keys are now tracked.
  if (c.report) {
    v1::ReportRequest& r = *rb.mutable_items(c.bad_at);
    r = ReportReq(ItemKey(c, c.bad_at), c.bad_at == c.tracked_at ? 2 : 1,
                  v1::RETRYABLE_FAILURE);
    v1::ReportBatchResponse resp;
    ASSERT_TRUE(h.ReportBatch(rb, &resp).ok());
    ASSERT_EQ(resp.decisions_size(), c.size);
  } else {
    v1::AdmitRequest& r = *ab.mutable_items(c.bad_at);
    r = AdmitReq(ItemKey(c, c.bad_at), c.bad_at == c.tracked_at ? 2 : 1);
    v1::AdmitBatchResponse resp;
    ASSERT_TRUE(h.AdmitBatch(ab, &resp).ok());
    ASSERT_EQ(resp.decisions_size(), c.size);
  }
  EXPECT_EQ(h.engine().Stats().tracked, c.size);  // kTracked + the fresh keys
  ASSERT_TRUE(h.Get(kTracked, &after).ok());
  EXPECT_FALSE(google::protobuf::util::MessageDifferencer::Equals(before, after));
}

INSTANTIATE_TEST_SUITE_P(
    Table, BadBatchItemTest, ::testing::ValuesIn(BadItems()),
    [](const ::testing::TestParamInfo<BadItem>& i) { return i.param.name; });

// Request bytes that do not parse as the method's message reach the
// service as bytes (its methods are registered raw), so they are answered
// INVALID_ARGUMENT naming the message type. (Typed callback methods would
// get gRPC 1.51's UNIMPLEMENTED with an empty message.) No state changes
// and the server answers the next call.
grpc::Status RawCall(ServiceHarness& h, const std::string& method,
                     const std::string& bytes) {
  grpc::GenericStub stub(h.channel());
  grpc::Slice slice(bytes);
  grpc::ByteBuffer req(&slice, 1);
  grpc::ByteBuffer resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  absl::Notification done;
  grpc::Status status;
  stub.UnaryCall(&ctx, absl::StrCat("/stagger.v1.RetryCoordinator/", method),
                 grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  return status;
}

TEST(BadInputTest, UnparsableRequestBytesAreInvalidArgumentNamingTheMessage) {
  ServiceHarness h;
  const std::pair<const char*, const char*> methods[] = {
      {"Admit", "AdmitRequest"},           {"Report", "ReportRequest"},
      {"AdmitBatch", "AdmitBatchRequest"}, {"ReportBatch", "ReportBatchRequest"},
      {"GetEndpoint", "GetEndpointRequest"},
      {"ListEndpoints", "ListEndpointsRequest"}};
  for (const auto& [method, message] : methods) {
    // A field tag whose varint never ends: not a protobuf message.
    const grpc::Status s = RawCall(h, method, "\x08\xff\xff\xff");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << Describe(s);
    EXPECT_EQ(s.error_message(),
              absl::StrCat("request: 4 bytes that are not a valid stagger.v1.",
                           message,
                           " (malformed protobuf, or a string field that is "
                           "not UTF-8)"))
        << method;
  }
  EXPECT_EQ(h.engine().Stats().tracked, 0);
  ExpectServerStillAnswers(h);
}

// An endpoint key that is not valid UTF-8 cannot be parsed as a proto3
// `string`: the request does not parse, and is refused as above.
TEST(BadInputTest, InvalidUtf8KeyIsRefusedWithoutCrash) {
  ServiceHarness h;
  const grpc::Status s = h.Admit(AdmitReq("https://bad\xff\xfe.example"));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << Describe(s);
  EXPECT_THAT(s.error_message(), StartsWith("request: "));
  EXPECT_THAT(s.error_message(),
              HasSubstr("bytes that are not a valid stagger.v1.AdmitRequest"));
  EXPECT_EQ(h.engine().Stats().tracked, 0);
  ExpectServerStillAnswers(h);
}

}  // namespace
}  // namespace stagger::testing
