// Good-path mapping through the real gRPC path: engine decisions become the
// wire Decision field by field (verdict, reason, delay / defer_until +
// defer_for, attempt), batches answer one decision per item in request
// order, and the inspection RPCs map EndpointState and page with tokens.
//
// Fake clock (starts 2026-01-01T00:00:00Z and moves only when told), fixed
// seed, embedded defaults unless a test says otherwise: decorrelated jitter
// base 200 ms / cap 30 s, initial jitter 50 ms, max_attempts 8, deferral
// spread 1 s, breaker trips after 20 consecutive failures.
#include <algorithm>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_harness.h"

namespace stagger::testing {
namespace {

using ::testing::ElementsAreArray;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;

// The fields a verdict may carry, and no other.
void ExpectShape(const v1::Decision& d) {
  switch (d.verdict()) {
    case v1::PROCEED:
      EXPECT_TRUE(d.has_delay()) << d.DebugString();
      EXPECT_FALSE(d.has_defer_until()) << d.DebugString();
      EXPECT_FALSE(d.has_defer_for()) << d.DebugString();
      break;
    case v1::DEFER:
      EXPECT_FALSE(d.has_delay()) << d.DebugString();
      EXPECT_TRUE(d.has_defer_until()) << d.DebugString();
      EXPECT_TRUE(d.has_defer_for()) << d.DebugString();
      break;
    case v1::GIVE_UP:
    case v1::DONE:
      EXPECT_FALSE(d.has_delay()) << d.DebugString();
      EXPECT_FALSE(d.has_defer_until()) << d.DebugString();
      EXPECT_FALSE(d.has_defer_for()) << d.DebugString();
      break;
    default:
      ADD_FAILURE() << "no verdict: " << d.DebugString();
  }
}

v1::Decision AdmitOk(ServiceHarness& h, const v1::AdmitRequest& req) {
  v1::AdmitResponse resp;
  const grpc::Status s = h.Admit(req, &resp);
  EXPECT_TRUE(s.ok()) << Describe(s);
  ExpectShape(resp.decision());
  return resp.decision();
}
v1::Decision ReportOk(ServiceHarness& h, const v1::ReportRequest& req) {
  v1::ReportResponse resp;
  const grpc::Status s = h.Report(req, &resp);
  EXPECT_TRUE(s.ok()) << Describe(s);
  ExpectShape(resp.decision());
  return resp.decision();
}
v1::EndpointState GetOk(ServiceHarness& h, absl::string_view key) {
  v1::EndpointState st;
  const grpc::Status s = h.Get(key, &st);
  EXPECT_TRUE(s.ok()) << Describe(s);
  return st;
}

TEST(AdmitTest, FirstAttemptProceedsWithInitialJitterUnder50ms) {
  ServiceHarness h;
  // 200 deliveries to 200 endpoints, all at the same instant (a bulk
  // fan-out): each is spread over [0, 50 ms), and they are spread, not
  // piled on one value.
  absl::Duration lo = absl::InfiniteDuration(), hi = -absl::InfiniteDuration();
  std::set<int64_t> distinct;
  for (int i = 0; i < 200; ++i) {
    const v1::Decision d = AdmitOk(h, AdmitReq(absl::StrCat("fan-", i)));
    EXPECT_EQ(d.verdict(), v1::PROCEED);
    EXPECT_EQ(d.reason(), v1::INITIAL_JITTER);
    EXPECT_EQ(d.attempt(), 1);
    const absl::Duration delay = FromWire(d.delay());
    EXPECT_GE(delay, absl::ZeroDuration());
    EXPECT_LT(delay, absl::Milliseconds(50));
    lo = std::min(lo, delay);
    hi = std::max(hi, delay);
    distinct.insert(absl::ToInt64Nanoseconds(delay));
  }
  // Uniform over 50 ms: 200 draws reach both ends' 5 ms.
  EXPECT_LT(lo, absl::Milliseconds(5));
  EXPECT_GT(hi, absl::Milliseconds(45));
  EXPECT_GT(distinct.size(), 190u);
}

// A failure report answers for the next attempt: PROCEED(BACKOFF) after a
// decorrelated delay in [base, 3 * base] = [200 ms, 600 ms], attempt + 1.
struct FailureCase {
  const char* name;
  v1::Outcome outcome;
};

void PrintTo(const FailureCase& c, std::ostream* os) { *os << c.name; }

class FailureReportTest : public ::testing::TestWithParam<FailureCase> {};

TEST_P(FailureReportTest, ProceedsWithBackoffForTheNextAttempt) {
  ServiceHarness h;
  const std::string key = "https://flaky.example/hook";
  ASSERT_EQ(AdmitOk(h, AdmitReq(key, 1)).verdict(), v1::PROCEED);

  // attempt 1 failed -> attempt 2 after [200 ms, 600 ms].
  const v1::Decision d = ReportOk(h, ReportReq(key, 1, GetParam().outcome));
  EXPECT_EQ(d.verdict(), v1::PROCEED);
  EXPECT_EQ(d.reason(), v1::BACKOFF);
  EXPECT_EQ(d.attempt(), 2);
  const absl::Duration delay = FromWire(d.delay());
  EXPECT_GE(delay, absl::Milliseconds(200));
  EXPECT_LE(delay, absl::Milliseconds(600));
  // The engine's decorrelated state is exactly that delay, to the ns.
  EXPECT_EQ(FromWire(GetOk(h, key).previous_delay()), delay);

  // The worker waits, then asks for attempt 2: admitted with no more wait.
  h.clock().Advance(delay);
  const v1::Decision a = AdmitOk(h, AdmitReq(key, 2));
  EXPECT_EQ(a.verdict(), v1::PROCEED);
  EXPECT_EQ(a.reason(), v1::ADMITTED);
  EXPECT_EQ(a.attempt(), 2);
  EXPECT_EQ(FromWire(a.delay()), absl::ZeroDuration());
}

INSTANTIATE_TEST_SUITE_P(
    Outcomes, FailureReportTest,
    ::testing::Values(FailureCase{"RetryableFailure", v1::RETRYABLE_FAILURE},
                      FailureCase{"Timeout", v1::TIMEOUT},
                      // 429 without Retry-After: an ordinary backoff.
                      FailureCase{"RateLimitedNoRetryAfter", v1::RATE_LIMITED}),
    [](const ::testing::TestParamInfo<FailureCase>& i) { return i.param.name; });

TEST(ReportTest, SuccessIsDoneAndResetsTheBackoff) {
  ServiceHarness h;
  const std::string key = "https://ok.example/";
  // Two failures grow the decorrelated state above base ...
  ReportOk(h, ReportReq(key, 1, v1::RETRYABLE_FAILURE));
  ReportOk(h, ReportReq(key, 2, v1::RETRYABLE_FAILURE));
  ASSERT_GT(FromWire(GetOk(h, key).previous_delay()), absl::ZeroDuration());
  ASSERT_EQ(GetOk(h, key).consecutive_failures(), 2);

  // ... attempt 3 succeeds: DONE(SUCCEEDED) about attempt 3, no timing.
  const v1::Decision d = ReportOk(h, ReportReq(key, 3, v1::SUCCESS));
  EXPECT_EQ(d.verdict(), v1::DONE);
  EXPECT_EQ(d.reason(), v1::SUCCEEDED);
  EXPECT_EQ(d.attempt(), 3);
  // Reset on success: previous delay 0, failure streak broken.
  const v1::EndpointState st = GetOk(h, key);
  EXPECT_EQ(FromWire(st.previous_delay()), absl::ZeroDuration());
  EXPECT_EQ(st.consecutive_failures(), 0);
}

// DEFER carries defer_until (server wall clock) and defer_for (the same
// instant from the server's now): with the fake clock, defer_for is exactly
// defer_until - now, at every reading.
TEST(DeferTest, RetryAfterWindowDefersWithConsistentUntilAndFor) {
  ServiceHarness h;
  const std::string key = "https://busy.example/";
  const absl::Time t0 = h.clock().Now();

  // Worker A: attempt 1 -> 429 with Retry-After 10 s. Its own retry waits
  // for the window, spread by up to 1 s after it.
  v1::ReportRequest rl = ReportReq(key, 1, v1::RATE_LIMITED);
  *rl.mutable_retry_after() = ToWire(absl::Seconds(10));
  const v1::Decision a = ReportOk(h, rl);
  EXPECT_EQ(a.verdict(), v1::PROCEED);
  EXPECT_EQ(a.reason(), v1::RETRY_AFTER);
  EXPECT_EQ(a.attempt(), 2);
  EXPECT_GE(FromWire(a.delay()), absl::Seconds(10));
  EXPECT_LT(FromWire(a.delay()), absl::Seconds(11));
  // The window is the endpoint's, for the fleet.
  const v1::EndpointState st = GetOk(h, key);
  ASSERT_TRUE(st.has_retry_after_until());
  EXPECT_EQ(FromWire(st.retry_after_until()), t0 + absl::Seconds(10));

  // Worker B, 1 s later, wants to send its retry (attempt 2) now: DEFER
  // until after the window; no attempt consumed (attempt stays 2).
  h.clock().Advance(absl::Seconds(1));
  v1::Decision b = AdmitOk(h, AdmitReq(key, 2));
  EXPECT_EQ(b.verdict(), v1::DEFER);
  EXPECT_EQ(b.reason(), v1::RETRY_AFTER_WINDOW);
  EXPECT_EQ(b.attempt(), 2);
  const absl::Time until = FromWire(b.defer_until());
  EXPECT_GE(until, t0 + absl::Seconds(10));
  EXPECT_LT(until, t0 + absl::Seconds(12));
  EXPECT_EQ(FromWire(b.defer_for()), until - h.clock().Now());

  // 4 s later, worker C: deferred again, to a later release slot; defer_for
  // again measured from the (new) now.
  h.clock().Advance(absl::Seconds(4));
  const v1::Decision c = AdmitOk(h, AdmitReq(key, 2));
  EXPECT_EQ(c.verdict(), v1::DEFER);
  EXPECT_EQ(FromWire(c.defer_for()),
            FromWire(c.defer_until()) - h.clock().Now());
  EXPECT_GE(FromWire(c.defer_until()), t0 + absl::Seconds(10));

  // Past the window (and its spread): admitted.
  h.clock().Set(t0 + absl::Seconds(12));
  const v1::Decision d = AdmitOk(h, AdmitReq(key, 2));
  EXPECT_EQ(d.verdict(), v1::PROCEED);
  EXPECT_EQ(d.reason(), v1::ADMITTED);
}

TEST(DeferTest, OpenBreakerDefersUntilItHalfOpens) {
  ServiceHarness::Options o;
  o.config.default_policy.breaker.consecutive_failures = 3;
  ServiceHarness h(o);
  const std::string key = "https://down.example/";

  // failures=1, 2: closed, backoff.
  EXPECT_EQ(ReportOk(h, ReportReq(key, 1, v1::RETRYABLE_FAILURE)).reason(),
            v1::BACKOFF);
  EXPECT_EQ(ReportOk(h, ReportReq(key, 2, v1::RETRYABLE_FAILURE)).reason(),
            v1::BACKOFF);
  // failures=3: trips; the answer for attempt 4 is DEFER(CIRCUIT_OPEN).
  const v1::Decision d = ReportOk(h, ReportReq(key, 3, v1::RETRYABLE_FAILURE));
  EXPECT_EQ(d.verdict(), v1::DEFER);
  EXPECT_EQ(d.reason(), v1::CIRCUIT_OPEN);
  EXPECT_EQ(d.attempt(), 4);
  EXPECT_EQ(FromWire(d.defer_for()), FromWire(d.defer_until()) - h.clock().Now());

  const v1::EndpointState st = GetOk(h, key);
  EXPECT_EQ(st.breaker_state(), v1::OPEN);
  EXPECT_EQ(st.consecutive_trips(), 1);
  ASSERT_TRUE(st.has_open_until());
  const absl::Time open_until = FromWire(st.open_until());
  EXPECT_GT(open_until, h.clock().Now());
  // Parked until the breaker half-opens (spread after it), not before.
  EXPECT_GE(FromWire(d.defer_until()), open_until);
  EXPECT_LT(FromWire(d.defer_until()), open_until + absl::Seconds(1) +
                                           absl::Milliseconds(10));

  // Another worker's Admit while open: also deferred.
  const v1::Decision a = AdmitOk(h, AdmitReq(key, 1));
  EXPECT_EQ(a.verdict(), v1::DEFER);
  EXPECT_EQ(a.reason(), v1::CIRCUIT_OPEN);
  EXPECT_EQ(a.attempt(), 1);

  // At open_until it half-opens: the next Admit is a probe.
  h.clock().Set(open_until);
  const v1::Decision p = AdmitOk(h, AdmitReq(key, 4));
  EXPECT_EQ(p.verdict(), v1::PROCEED);
  EXPECT_EQ(p.reason(), v1::HALF_OPEN_PROBE);
  const v1::EndpointState half = GetOk(h, key);
  EXPECT_EQ(half.breaker_state(), v1::HALF_OPEN);
  EXPECT_FALSE(half.has_open_until());
  EXPECT_EQ(half.probes_in_flight(), 1);
}

// Every GIVE_UP reason the service can produce, and the attempt it names.
struct GiveUpCase {
  const char* name;
  std::function<v1::Decision(ServiceHarness&)> call;
  v1::Reason reason;
  int attempt;
};

std::vector<GiveUpCase> GiveUpCases() {
  const std::string k = "https://gone.example/";
  return {
      {"PermanentFailureIsNotRetryable",
       [k](ServiceHarness& h) {
         return ReportOk(h, ReportReq(k, 1, v1::PERMANENT_FAILURE));
       },
       v1::NOT_RETRYABLE, 1},
      {"ReportOfLastAttemptExhausts",  // max_attempts 8 counts the first
       [k](ServiceHarness& h) {
         return ReportOk(h, ReportReq(k, 8, v1::RETRYABLE_FAILURE));
       },
       v1::ATTEMPTS_EXHAUSTED, 9},
      {"AdmitPastTheLimitExhausts",
       [k](ServiceHarness& h) { return AdmitOk(h, AdmitReq(k, 9)); },
       v1::ATTEMPTS_EXHAUSTED, 9},
      {"AdmitAfterTheDeadline",
       [k](ServiceHarness& h) {
         v1::AdmitRequest r = AdmitReq(k, 1);
         *r.mutable_deadline() = ToWire(h.clock().Now() - absl::Seconds(1));
         return AdmitOk(h, r);
       },
       v1::DEADLINE, 1},
      {"RetryWouldLandPastTheDeadline",  // delay >= 200 ms > 100 ms left
       [k](ServiceHarness& h) {
         v1::ReportRequest r = ReportReq(k, 1, v1::TIMEOUT);
         *r.mutable_deadline() =
             ToWire(h.clock().Now() + absl::Milliseconds(100));
         return ReportOk(h, r);
       },
       v1::DEADLINE, 2},
      {"PastTheUsefulnessHorizon",  // horizon 1 h (below), first try 2 h ago
       [k](ServiceHarness& h) {
         v1::AdmitRequest r = AdmitReq(k, 3);
         *r.mutable_first_attempt_time() =
             ToWire(h.clock().Now() - absl::Hours(2));
         return AdmitOk(h, r);
       },
       v1::DEADLINE, 3},
  };
}

void PrintTo(const GiveUpCase& c, std::ostream* os) { *os << c.name; }

class GiveUpTest : public ::testing::TestWithParam<GiveUpCase> {};

TEST_P(GiveUpTest, ReasonAndAttemptMapped) {
  ServiceHarness::Options o;
  o.config.default_policy.backoff.horizon = absl::Hours(1);
  ServiceHarness h(o);
  const v1::Decision d = GetParam().call(h);
  EXPECT_EQ(d.verdict(), v1::GIVE_UP);
  EXPECT_EQ(d.reason(), GetParam().reason) << v1::Reason_Name(d.reason());
  EXPECT_EQ(d.attempt(), GetParam().attempt);
}

INSTANTIATE_TEST_SUITE_P(
    Reasons, GiveUpTest, ::testing::ValuesIn(GiveUpCases()),
    [](const ::testing::TestParamInfo<GiveUpCase>& i) { return i.param.name; });

// Batches: one decision per item, in request order. Items are decided in
// order, so an endpoint that appears twice sees its own earlier item.
TEST(BatchTest, AdmitBatchDecisionsInRequestOrder) {
  ServiceHarness h;
  struct Item {
    const char* key;
    int attempt;
    v1::Verdict verdict;
    v1::Reason reason;
  };
  const std::vector<Item> items = {
      {"a", 1, v1::PROCEED, v1::INITIAL_JITTER},
      {"b", 9, v1::GIVE_UP, v1::ATTEMPTS_EXHAUSTED},
      {"c", 1, v1::PROCEED, v1::INITIAL_JITTER},
      {"a", 2, v1::PROCEED, v1::ADMITTED},  // a's retry, after item 0
      {"d", 8, v1::PROCEED, v1::ADMITTED},
  };
  v1::AdmitBatchRequest req;
  for (const Item& i : items) *req.add_items() = AdmitReq(i.key, i.attempt);
  v1::AdmitBatchResponse resp;
  ASSERT_TRUE(h.AdmitBatch(req, &resp).ok());
  ASSERT_EQ(resp.decisions_size(), static_cast<int>(items.size()));
  for (size_t i = 0; i < items.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("item ", i));
    const v1::Decision& d = resp.decisions(i);
    ExpectShape(d);
    EXPECT_EQ(d.verdict(), items[i].verdict);
    EXPECT_EQ(d.reason(), items[i].reason) << v1::Reason_Name(d.reason());
    EXPECT_EQ(d.attempt(), items[i].attempt);
  }
}

TEST(BatchTest, ReportBatchDecisionsInRequestOrder) {
  ServiceHarness h;
  v1::ReportBatchRequest req;
  *req.add_items() = ReportReq("a", 1, v1::SUCCESS);
  *req.add_items() = ReportReq("b", 1, v1::PERMANENT_FAILURE);
  *req.add_items() = ReportReq("c", 1, v1::RETRYABLE_FAILURE);
  *req.add_items() = ReportReq("c", 2, v1::RETRYABLE_FAILURE);
  *req.add_items() = ReportReq("d", 8, v1::TIMEOUT);
  v1::ReportBatchResponse resp;
  ASSERT_TRUE(h.ReportBatch(req, &resp).ok());
  ASSERT_EQ(resp.decisions_size(), 5);
  for (const v1::Decision& d : resp.decisions()) ExpectShape(d);

  EXPECT_EQ(resp.decisions(0).verdict(), v1::DONE);
  EXPECT_EQ(resp.decisions(0).reason(), v1::SUCCEEDED);
  EXPECT_EQ(resp.decisions(0).attempt(), 1);
  EXPECT_EQ(resp.decisions(1).verdict(), v1::GIVE_UP);
  EXPECT_EQ(resp.decisions(1).reason(), v1::NOT_RETRYABLE);
  EXPECT_EQ(resp.decisions(2).verdict(), v1::PROCEED);
  EXPECT_EQ(resp.decisions(2).reason(), v1::BACKOFF);
  EXPECT_EQ(resp.decisions(2).attempt(), 2);
  EXPECT_EQ(resp.decisions(3).reason(), v1::BACKOFF);
  EXPECT_EQ(resp.decisions(3).attempt(), 3);
  EXPECT_EQ(resp.decisions(4).verdict(), v1::GIVE_UP);
  EXPECT_EQ(resp.decisions(4).reason(), v1::ATTEMPTS_EXHAUSTED);
  EXPECT_EQ(resp.decisions(4).attempt(), 9);

  // c's second failure was decided after its first: its delay is drawn
  // from [base, 3 * first delay], and it is the state the endpoint keeps.
  const absl::Duration first = FromWire(resp.decisions(2).delay());
  const absl::Duration second = FromWire(resp.decisions(3).delay());
  EXPECT_GE(second, absl::Milliseconds(200));
  EXPECT_LE(second, 3 * first);
  EXPECT_EQ(FromWire(GetOk(h, "c").previous_delay()), second);
}

// A full batch (the default limit, 1000 items) and a full small one (limit
// 3): one decision per item, item i's decision about item i's attempt.
struct FullBatch {
  const char* name;
  int max_batch_size;
};

void PrintTo(const FullBatch& c, std::ostream* os) { *os << c.name; }

class FullBatchTest : public ::testing::TestWithParam<FullBatch> {};

TEST_P(FullBatchTest, OneDecisionPerItemInOrder) {
  const int n = GetParam().max_batch_size;
  ServiceHarness::Options o;
  o.config.limits.max_batch_size = n;
  ServiceHarness h(o);

  // Admit: attempts cycle 1..9; attempt 9 is past max_attempts 8.
  v1::AdmitBatchRequest ab;
  for (int i = 0; i < n; ++i) {
    *ab.add_items() = AdmitReq(absl::StrFormat("ep-%04d", i), i % 9 + 1);
  }
  v1::AdmitBatchResponse ar;
  ASSERT_TRUE(h.AdmitBatch(ab, &ar).ok());
  ASSERT_EQ(ar.decisions_size(), n);
  for (int i = 0; i < n; ++i) {
    const v1::Decision& d = ar.decisions(i);
    ASSERT_EQ(d.attempt(), i % 9 + 1) << "item " << i;
    ASSERT_EQ(d.verdict(), i % 9 + 1 == 9 ? v1::GIVE_UP : v1::PROCEED)
        << "item " << i;
  }

  // Report: even items succeed, odd items fail (attempt 1 -> next is 2).
  v1::ReportBatchRequest rb;
  for (int i = 0; i < n; ++i) {
    *rb.add_items() = ReportReq(absl::StrFormat("ep-%04d", i), 1,
                                i % 2 == 0 ? v1::SUCCESS : v1::TIMEOUT);
  }
  v1::ReportBatchResponse rr;
  ASSERT_TRUE(h.ReportBatch(rb, &rr).ok());
  ASSERT_EQ(rr.decisions_size(), n);
  for (int i = 0; i < n; ++i) {
    const v1::Decision& d = rr.decisions(i);
    ASSERT_EQ(d.verdict(), i % 2 == 0 ? v1::DONE : v1::PROCEED) << "item " << i;
    ASSERT_EQ(d.attempt(), i % 2 == 0 ? 1 : 2) << "item " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Limits, FullBatchTest,
    ::testing::Values(FullBatch{"Default1000", 1000}, FullBatch{"Limit3", 3}),
    [](const ::testing::TestParamInfo<FullBatch>& i) { return i.param.name; });

// GetEndpoint: every EndpointState field from the engine's snapshot.
TEST(InspectTest, GetEndpointMapsTheSnapshot) {
  ServiceHarness::Options o;
  engine::PolicyOverride slow;
  slow.match = engine::PolicyOverride::Match::kPrefix;
  slow.pattern = "https://slow.example/";
  engine::PolicyOverride internal;
  internal.match = engine::PolicyOverride::Match::kGlob;
  internal.pattern = "*.internal/*";
  o.config.overrides = {slow, internal};
  ServiceHarness h(o);
  const absl::Time t0 = h.clock().Now();

  // A default-policy endpoint: admitted, failed twice, retry admitted.
  const std::string key = "https://plain.example/x";
  AdmitOk(h, AdmitReq(key, 1));
  ReportOk(h, ReportReq(key, 1, v1::RETRYABLE_FAILURE));
  const v1::Decision last = ReportOk(h, ReportReq(key, 2, v1::RETRYABLE_FAILURE));
  h.clock().Advance(absl::Seconds(3));
  AdmitOk(h, AdmitReq(key, 2));  // one retry withdrawn from the budget

  const v1::EndpointState st = GetOk(h, key);
  EXPECT_EQ(st.endpoint(), key);
  EXPECT_EQ(st.policy(), "default");
  EXPECT_EQ(st.breaker_state(), v1::CLOSED);
  EXPECT_FALSE(st.has_open_until());
  EXPECT_EQ(st.consecutive_trips(), 0);
  EXPECT_EQ(st.consecutive_failures(), 2);
  EXPECT_EQ(st.probes_in_flight(), 0);
  EXPECT_EQ(st.probe_successes(), 0);
  EXPECT_EQ(FromWire(st.previous_delay()), FromWire(last.delay()));
  // Floor 10/s x 10 s = 100 retries, one used.
  EXPECT_DOUBLE_EQ(st.budget_remaining(), 99);
  EXPECT_FALSE(st.has_retry_after_until());
  ASSERT_TRUE(st.has_last_seen());
  EXPECT_EQ(FromWire(st.last_seen()), t0 + absl::Seconds(3));

  // Overrides name the match that applies.
  AdmitOk(h, AdmitReq("https://slow.example/a"));
  AdmitOk(h, AdmitReq("http://db.internal/q"));
  EXPECT_EQ(GetOk(h, "https://slow.example/a").policy(),
            "prefix:https://slow.example/");
  EXPECT_EQ(GetOk(h, "http://db.internal/q").policy(), "glob:*.internal/*");

  // Inspection is read-only: last_seen does not move when read later.
  h.clock().Advance(absl::Minutes(1));
  EXPECT_EQ(FromWire(GetOk(h, key).last_seen()), t0 + absl::Seconds(3));
  // Never unavailable: no release pace yet.
  EXPECT_FALSE(GetOk(h, key).has_release_pace());
}

// GetEndpoint's release_pace: the learned pace and where it came from.
TEST(InspectTest, GetEndpointShowsTheLearnedPace) {
  ServiceHarness h;
  const std::string key = "https://paced.example/x";
  // It served 3 in the last second, then sent a Retry-After of 2s: its
  // gate is closed, and 40 retries park behind the window.
  for (int i = 0; i < 3; ++i) ReportOk(h, ReportReq(key, 1, v1::SUCCESS));
  v1::ReportRequest ra = ReportReq(key, 1, v1::RATE_LIMITED);
  ra.mutable_retry_after()->set_seconds(2);
  ReportOk(h, ra);
  for (int i = 0; i < 40; ++i) AdmitOk(h, AdmitReq(key, 2));
  v1::EndpointState st = GetOk(h, key);
  ASSERT_TRUE(st.has_release_pace());
  EXPECT_EQ(st.release_pace().phase(), v1::PACE_GATE_CLOSED);
  EXPECT_DOUBLE_EQ(st.release_pace().served_per_second(), 3);
  // The window passes: the pace starts from the 10/s floor (it served
  // less than that), and a release is running while the parked retries
  // come back.
  h.clock().Advance(absl::Milliseconds(2100));
  AdmitOk(h, AdmitReq(key, 2));
  st = GetOk(h, key);
  EXPECT_EQ(st.release_pace().phase(), v1::PACE_OPENING);
  EXPECT_EQ(st.release_pace().learned_from(), v1::PACE_START);
  EXPECT_DOUBLE_EQ(st.release_pace().per_second(), 10);
  EXPECT_FALSE(st.release_pace().capped());
  EXPECT_TRUE(st.release_pace().releasing());
  EXPECT_GT(st.release_pace().backlog(), 0);
  EXPECT_EQ(st.release_pace().capacity_per_second(), 0);
  EXPECT_EQ(FromWire(st.release_pace().round_trip()), absl::Milliseconds(250));
}

// ListEndpoints pages in key order with opaque (hex) tokens.
std::vector<std::string> ListAll(ServiceHarness& h, int page_size,
                                 v1::BreakerState filter, int* pages) {
  std::vector<std::string> keys;
  std::string token;
  *pages = 0;
  do {
    v1::ListEndpointsRequest req;
    req.set_page_size(page_size);
    req.set_page_token(token);
    req.set_breaker_state(filter);
    v1::ListEndpointsResponse resp;
    const grpc::Status s = h.ListEndpoints(req, &resp);
    EXPECT_TRUE(s.ok()) << Describe(s);
    if (!s.ok()) break;
    ++*pages;
    EXPECT_LE(resp.endpoints_size(), page_size);
    for (const v1::EndpointState& e : resp.endpoints()) {
      keys.push_back(e.endpoint());
      if (filter != v1::BREAKER_STATE_UNSPECIFIED) {
        EXPECT_EQ(e.breaker_state(), filter) << e.endpoint();
      }
    }
    EXPECT_EQ(resp.total_tracked(), h.engine().Stats().tracked);
    if (!resp.next_page_token().empty()) {
      EXPECT_THAT(resp.next_page_token(), MatchesRegex("[0-9a-f]+"));
    }
    token = resp.next_page_token();
  } while (!token.empty() && *pages < 100);
  return keys;
}

TEST(InspectTest, ListEndpointsPagesInKeyOrderWithoutRepeats) {
  ServiceHarness h;
  // 25 endpoints, created out of order.
  std::vector<std::string> all;
  for (int i = 0; i < 25; ++i) all.push_back(absl::StrFormat("ep-%02d", i));
  for (int i = 0; i < 25; ++i) AdmitOk(h, AdmitReq(all[(i * 7) % 25]));
  std::sort(all.begin(), all.end());

  // 10 + 10 + 5: three pages, every key once, in key order.
  int pages = 0;
  const std::vector<std::string> seen =
      ListAll(h, 10, v1::BREAKER_STATE_UNSPECIFIED, &pages);
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(seen, ElementsAreArray(all));

  // The first page alone: 10 keys and a token; page_size 0 means 100.
  v1::ListEndpointsRequest req;
  req.set_page_size(10);
  v1::ListEndpointsResponse first;
  ASSERT_TRUE(h.ListEndpoints(req, &first).ok());
  EXPECT_EQ(first.endpoints_size(), 10);
  EXPECT_FALSE(first.next_page_token().empty());
  EXPECT_EQ(first.total_tracked(), 25);
  v1::ListEndpointsResponse whole;
  ASSERT_TRUE(h.ListEndpoints(v1::ListEndpointsRequest(), &whole).ok());
  EXPECT_EQ(whole.endpoints_size(), 25);
  EXPECT_THAT(whole.next_page_token(), IsEmpty());

  // Exactly one page's worth: no token pointing at an empty page.
  EXPECT_THAT(ListAll(h, 25, v1::BREAKER_STATE_UNSPECIFIED, &pages),
              ElementsAreArray(all));
  EXPECT_EQ(pages, 1);
}

TEST(InspectTest, ListEndpointsFiltersByBreakerState) {
  ServiceHarness::Options o;
  o.config.default_policy.breaker.consecutive_failures = 3;
  ServiceHarness h(o);
  // 12 endpoints; 4 of them (the "down-" ones) fail 3 times and trip.
  std::vector<std::string> down, up;
  for (int i = 0; i < 4; ++i) down.push_back(absl::StrCat("down-", i));
  for (int i = 0; i < 8; ++i) up.push_back(absl::StrCat("up-", i));
  for (const std::string& k : up) AdmitOk(h, AdmitReq(k));
  for (const std::string& k : down) {
    for (int a = 1; a <= 3; ++a) ReportOk(h, ReportReq(k, a, v1::TIMEOUT));
    ASSERT_EQ(GetOk(h, k).breaker_state(), v1::OPEN) << k;
  }

  int pages = 0;
  // OPEN, 3 per page: 3 + 1.
  EXPECT_THAT(ListAll(h, 3, v1::OPEN, &pages), ElementsAreArray(down));
  EXPECT_EQ(pages, 2);
  EXPECT_THAT(ListAll(h, 5, v1::CLOSED, &pages), ElementsAreArray(up));
  EXPECT_EQ(pages, 2);
  EXPECT_THAT(ListAll(h, 5, v1::HALF_OPEN, &pages), IsEmpty());
  EXPECT_EQ(pages, 1);

  // 2 minutes later (past any open period) the open ones read as half-open:
  // the filter sees the state as of now, not as last stored.
  h.clock().Advance(absl::Minutes(2));
  EXPECT_THAT(ListAll(h, 3, v1::HALF_OPEN, &pages), ElementsAreArray(down));
  EXPECT_THAT(ListAll(h, 3, v1::OPEN, &pages), IsEmpty());
  EXPECT_EQ(ListAll(h, 100, v1::BREAKER_STATE_UNSPECIFIED, &pages).size(), 12u);
}

}  // namespace
}  // namespace stagger::testing
