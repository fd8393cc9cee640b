// ServerMetrics unit tests: record known decisions into a fresh registry,
// serialize it with prometheus::TextSerializer (what /metrics serves) and
// assert exact sample values, the fixed label sets, the attempt-label
// overflow, and that recording never creates a series.
#include "server/metrics/server_metrics.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "core/engine/decision.h"
#include "tests/testing/prom_text.h"

namespace stagger::metrics {
namespace {

using engine::BreakerState;
using engine::Decision;
using engine::Reason;
using engine::Verdict;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using stagger::testing::PromText;
using Call = ServerMetrics::Call;
using Method = ServerMetrics::Method;

Decision D(Verdict v, Reason r, int attempt = 1,
           absl::Duration delay = absl::ZeroDuration()) {
  Decision d;
  d.verdict = v;
  d.reason = r;
  d.attempt = attempt;
  d.delay = delay;
  return d;
}

PromText Scrape(prometheus::Registry& registry) {
  PromText text(prometheus::TextSerializer().Serialize(registry.Collect()));
  EXPECT_TRUE(text.ok()) << text.error();
  return text;
}

// Fixed label sets: the only values any stagger_* series may carry.
const std::set<std::string> kCalls = {"admit", "report"};
const std::set<std::string> kVerdicts = {"PROCEED", "DEFER", "GIVE_UP", "DONE"};
const std::set<std::string> kReasons = {
    "INITIAL_JITTER",  "BACKOFF",          "RETRY_AFTER",
    "CIRCUIT_OPEN",    "HALF_OPEN_PROBE",  "BUDGET_EXHAUSTED",
    "ATTEMPTS_EXHAUSTED", "NOT_RETRYABLE", "DEADLINE",
    "SUCCEEDED",       "HALF_OPEN_BUSY",   "RETRY_AFTER_WINDOW",
    "ADMITTED",        "PACED",            "LAST_CHANCE",
    "PAUSED",          "RELEASED",         "ENDPOINT_DISABLED"};
const std::set<std::string> kStates = {"CLOSED", "OPEN", "HALF_OPEN"};
const std::set<std::string> kMethods = {"Admit",       "Report",
                                        "AdmitBatch",  "ReportBatch",
                                        "GetEndpoint", "ListEndpoints"};

TEST(ServerMetricsTest, FreshRegistryHoldsEveryFixedSeriesAtZero) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, /*max_attempt_label=*/8);
  PromText t = Scrape(registry);

  // 2 calls x 4 verdicts x every reason, all present before any traffic so
  // the first increment of a rare combination is not lost to rate().
  EXPECT_EQ(t.Count("stagger_decisions_total"), 2 * 4 * engine::kMaxReason);
  EXPECT_EQ(t.LabelValues("stagger_decisions_total", "call"), kCalls);
  EXPECT_EQ(t.LabelValues("stagger_decisions_total", "verdict"), kVerdicts);
  EXPECT_EQ(t.LabelValues("stagger_decisions_total", "reason"), kReasons);
  // Attempts 2..8 and overflow: 8 histograms.
  EXPECT_EQ(t.Count("stagger_retry_delay_seconds_count"), 8);
  EXPECT_EQ(t.Count("stagger_breaker_transitions_total"), 6);
  EXPECT_EQ(t.Count("stagger_endpoints"), 3);
  EXPECT_EQ(t.LabelValues("stagger_endpoints", "breaker_state"), kStates);
  EXPECT_EQ(t.Count("stagger_config_reloads_total"), 2);
  EXPECT_EQ(t.LabelValues("stagger_state_load_failures_total", "reason"),
            (std::set<std::string>{"missing", "unreadable", "truncated",
                                   "corrupt", "incompatible_version"}));
  EXPECT_EQ(t.Count("stagger_state_saves_total"), 2);
  EXPECT_EQ(t.LabelValues("stagger_sync_counts_dropped_total", "cause"),
            (std::set<std::string>{"bucket_cap", "agent_rate",
                                   "endpoint_share"}));
  EXPECT_EQ(t.LabelValues("stagger_rpc_duration_seconds_count", "method"),
            kMethods);
  EXPECT_EQ(t.LabelValues("stagger_batch_size_count", "method"),
            (std::set<std::string>{"AdmitBatch", "ReportBatch"}));
  for (const char* name :
       {"stagger_retry_after_total", "stagger_retry_after_clamped_total",
        "stagger_budget_refusals_total", "stagger_untracked_decisions_total",
        "stagger_pace_cuts_total", "stagger_misrouted_requests_total",
        "stagger_endpoints_tracked",
        "stagger_endpoints_evicted_total", "stagger_state_endpoints_restored",
        "stagger_state_last_save_timestamp_seconds"}) {
    EXPECT_TRUE(t.Has(name)) << name;
  }
  EXPECT_THAT(t.NonZero("stagger_"), IsEmpty());
}

TEST(ServerMetricsTest, StateFileLoadsAndSaves) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, /*max_attempt_label=*/8);
  metrics.RecordStateLoadFailure("corrupt");
  metrics.RecordStateLoadFailure("corrupt");
  metrics.RecordStateLoadFailure("missing");
  metrics.RecordStateLoadFailure("loaded");  // not a failure: not counted
  metrics.RecordStateRestored(42);
  metrics.RecordStateSave(false, absl::FromUnixSeconds(100));
  metrics.RecordStateSave(true, absl::FromUnixSeconds(1767225600));
  PromText t = Scrape(registry);
  const std::string f = "stagger_state_load_failures_total";
  EXPECT_EQ(t.Value(f, {{"reason", "corrupt"}}), 2);
  EXPECT_EQ(t.Value(f, {{"reason", "missing"}}), 1);
  EXPECT_EQ(t.Sum(f), 3);
  EXPECT_EQ(t.Value("stagger_state_endpoints_restored", {}), 42);
  EXPECT_EQ(t.Value("stagger_state_saves_total", {{"result", "success"}}), 1);
  EXPECT_EQ(t.Value("stagger_state_saves_total", {{"result", "failure"}}), 1);
  EXPECT_EQ(t.Value("stagger_state_last_save_timestamp_seconds", {}),
            1767225600);
}

TEST(ServerMetricsTest, CountsDecisionsByCallVerdictAndReason) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 8);

  // Three first attempts admitted with initial jitter, one of them retried
  // after a backoff, then the retry succeeds; one delivery is dead-lettered.
  for (int i = 0; i < 3; ++i) {
    metrics.RecordDecision(Call::kAdmit, D(Verdict::kProceed,
                                           Reason::kInitialJitter, 1,
                                           absl::Milliseconds(20)));
  }
  metrics.RecordDecision(Call::kReport, D(Verdict::kProceed, Reason::kBackoff,
                                          2, absl::Milliseconds(300)));
  metrics.RecordDecision(Call::kAdmit,
                         D(Verdict::kProceed, Reason::kAdmitted, 2));
  metrics.RecordDecision(Call::kReport,
                         D(Verdict::kDone, Reason::kSucceeded, 2));
  metrics.RecordDecision(Call::kReport,
                         D(Verdict::kGiveUp, Reason::kNotRetryable, 1));

  PromText t = Scrape(registry);
  const std::string n = "stagger_decisions_total";
  EXPECT_EQ(t.Value(n, {{"call", "admit"},
                        {"verdict", "PROCEED"},
                        {"reason", "INITIAL_JITTER"}}),
            3);
  EXPECT_EQ(t.Value(n, {{"call", "report"},
                        {"verdict", "PROCEED"},
                        {"reason", "BACKOFF"}}),
            1);
  EXPECT_EQ(t.Value(n, {{"call", "admit"},
                        {"verdict", "PROCEED"},
                        {"reason", "ADMITTED"}}),
            1);
  EXPECT_EQ(t.Value(n, {{"call", "report"},
                        {"verdict", "DONE"},
                        {"reason", "SUCCEEDED"}}),
            1);
  EXPECT_EQ(t.Value(n, {{"call", "report"},
                        {"verdict", "GIVE_UP"},
                        {"reason", "NOT_RETRYABLE"}}),
            1);
  // Nothing else moved: 7 decisions in all.
  EXPECT_EQ(t.Sum(n), 7);
  // The same reason under the other call is a different series, still 0.
  EXPECT_EQ(t.Value(n, {{"call", "admit"},
                        {"verdict", "PROCEED"},
                        {"reason", "BACKOFF"}}),
            0);
}

TEST(ServerMetricsTest, RetryDelayHistogramObservesOnlyRealisedRetryDelays) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 8);
  const std::string b = "stagger_retry_delay_seconds_bucket";

  // Retry 2 after a 300 ms backoff: falls in (0.25, 0.5].
  metrics.RecordDecision(Call::kReport, D(Verdict::kProceed, Reason::kBackoff,
                                          2, absl::Milliseconds(300)));
  // Retry 3 after a Retry-After clamped to the 30 s cap: the cap is a bucket
  // boundary, so a pile-up at the cap shows in (20, 30].
  metrics.RecordDecision(Call::kReport, D(Verdict::kProceed,
                                          Reason::kRetryAfter, 3,
                                          absl::Seconds(30)));
  // Not retry delays: an Admit's initial jitter, a probe, a deferral.
  metrics.RecordDecision(Call::kAdmit, D(Verdict::kProceed,
                                         Reason::kInitialJitter, 1,
                                         absl::Milliseconds(40)));
  metrics.RecordDecision(Call::kAdmit, D(Verdict::kProceed, Reason::kBackoff,
                                         2, absl::Seconds(1)));
  metrics.RecordDecision(Call::kReport, D(Verdict::kDefer,
                                          Reason::kCircuitOpen, 2,
                                          absl::Seconds(5)));
  metrics.RecordDecision(Call::kReport, D(Verdict::kGiveUp, Reason::kDeadline,
                                          4, absl::Seconds(5)));

  PromText t = Scrape(registry);
  EXPECT_EQ(t.Sum("stagger_retry_delay_seconds_count"), 2);
  EXPECT_EQ(t.Value("stagger_retry_delay_seconds_count", {{"attempt", "2"}}), 1);
  EXPECT_DOUBLE_EQ(
      t.Value("stagger_retry_delay_seconds_sum", {{"attempt", "2"}}), 0.3);
  EXPECT_EQ(t.Value(b, {{"attempt", "2"}, {"le", "0.25"}}), 0);
  EXPECT_EQ(t.Value(b, {{"attempt", "2"}, {"le", "0.5"}}), 1);
  EXPECT_EQ(t.Value(b, {{"attempt", "2"}, {"le", "+Inf"}}), 1);
  EXPECT_EQ(t.Value(b, {{"attempt", "3"}, {"le", "20"}}), 0);
  EXPECT_EQ(t.Value(b, {{"attempt", "3"}, {"le", "30"}}), 1);
  EXPECT_DOUBLE_EQ(
      t.Value("stagger_retry_delay_seconds_sum", {{"attempt", "3"}}), 30);
  EXPECT_EQ(t.Value("stagger_retry_delay_seconds_count", {{"attempt", "4"}}), 0);
}

TEST(ServerMetricsTest, BucketsSpanTheDocumentedRanges) {
  const auto& delay = ServerMetrics::RetryDelayBuckets();
  EXPECT_DOUBLE_EQ(delay.front(), 0.001);
  EXPECT_DOUBLE_EQ(delay.back(), 60);
  const auto& rpc = ServerMetrics::RpcDurationBuckets();
  EXPECT_DOUBLE_EQ(rpc.front(), 0.00001);
  EXPECT_DOUBLE_EQ(rpc.back(), 1);
  const auto& batch = ServerMetrics::BatchSizeBuckets();
  EXPECT_DOUBLE_EQ(batch.front(), 1);
  EXPECT_DOUBLE_EQ(batch.back(), 100000);
  for (const auto* v : {&delay, &rpc, &batch}) {
    EXPECT_TRUE(std::is_sorted(v->begin(), v->end()));
    EXPECT_EQ(std::adjacent_find(v->begin(), v->end()), v->end());
  }
}

struct OverflowCase {
  int max_attempt_label;
  std::set<std::string> labels;  // the attempt label values created
};

class AttemptLabelTest : public ::testing::TestWithParam<OverflowCase> {};

TEST_P(AttemptLabelTest, CreatesTwoToKThenOverflow) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, GetParam().max_attempt_label);
  PromText t = Scrape(registry);
  EXPECT_EQ(t.LabelValues("stagger_retry_delay_seconds_count", "attempt"),
            GetParam().labels);
}

std::set<std::string> Attempts(int k) {
  std::set<std::string> s = {"overflow"};
  for (int a = 2; a <= k; ++a) s.insert(std::to_string(a));
  return s;
}

INSTANTIATE_TEST_SUITE_P(
    Clamped, AttemptLabelTest,
    ::testing::Values(OverflowCase{-5, Attempts(2)},  // clamped up to 2
                      OverflowCase{1, Attempts(2)},
                      OverflowCase{2, Attempts(2)},
                      OverflowCase{4, Attempts(4)},
                      OverflowCase{20, Attempts(20)},
                      OverflowCase{1000, Attempts(20)}));  // capped at 20

TEST(ServerMetricsTest, AttemptsAboveKShareTheOverflowSeries) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, /*max_attempt_label=*/4);
  EXPECT_STREQ(metrics.AttemptLabel(1), "");
  EXPECT_STREQ(metrics.AttemptLabel(2), "2");
  EXPECT_STREQ(metrics.AttemptLabel(4), "4");
  EXPECT_STREQ(metrics.AttemptLabel(5), "overflow");
  EXPECT_STREQ(metrics.AttemptLabel(1 << 30), "overflow");

  // K=4: retry 4 has its own series; 5, 6 and a huge attempt number share
  // "overflow"; a (nonsensical) retry delay for attempt 1 or below is not
  // recorded at all.
  for (int attempt : {4, 5, 6, 1 << 30, 1, 0, -3}) {
    metrics.RecordDecision(Call::kReport,
                           D(Verdict::kProceed, Reason::kBackoff, attempt,
                             absl::Seconds(1)));
  }
  PromText t = Scrape(registry);
  const std::string c = "stagger_retry_delay_seconds_count";
  EXPECT_EQ(t.Value(c, {{"attempt", "4"}}), 1);
  EXPECT_EQ(t.Value(c, {{"attempt", "overflow"}}), 3);
  EXPECT_EQ(t.Sum(c), 4);
  EXPECT_EQ(t.LabelValues(c, "attempt"), Attempts(4));
}

TEST(ServerMetricsTest, MaxAttemptLabelForTakesTheLargestPolicyClamped) {
  engine::EngineConfig config;
  config.default_policy.backoff.max_attempts = 5;
  EXPECT_EQ(ServerMetrics::MaxAttemptLabelFor(config), 5);
  engine::PolicyOverride o;
  o.pattern = "https://slow.example/";
  o.policy.backoff.max_attempts = 12;
  config.overrides.push_back(o);
  EXPECT_EQ(ServerMetrics::MaxAttemptLabelFor(config), 12);
  config.overrides[0].policy.backoff.max_attempts = 100;
  EXPECT_EQ(ServerMetrics::MaxAttemptLabelFor(config), 20);
  config.overrides.clear();
  config.default_policy.backoff.max_attempts = 1;  // no retries at all
  EXPECT_EQ(ServerMetrics::MaxAttemptLabelFor(config), 2);
}

TEST(ServerMetricsTest, RetryAfterBudgetAndUntrackedCounters) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 8);

  // A 429 with Retry-After 10 s under a 30 s clamp: seen, not clamped.
  Decision seen = D(Verdict::kProceed, Reason::kRetryAfter, 2,
                    absl::Seconds(10));
  seen.retry_after_seen = true;
  metrics.RecordDecision(Call::kReport, seen);
  // A 429 with Retry-After 1 h: seen and clamped.
  Decision clamped = D(Verdict::kProceed, Reason::kRetryAfter, 3,
                       absl::Seconds(30));
  clamped.retry_after_seen = true;
  clamped.retry_after_clamped = true;
  metrics.RecordDecision(Call::kReport, clamped);
  // Budget empty: refused once on a failure report, twice on re-admission.
  metrics.RecordDecision(Call::kReport,
                         D(Verdict::kDefer, Reason::kBudgetExhausted, 2));
  metrics.RecordDecision(Call::kAdmit,
                         D(Verdict::kDefer, Reason::kBudgetExhausted, 2));
  metrics.RecordDecision(Call::kAdmit,
                         D(Verdict::kDefer, Reason::kBudgetExhausted, 2));
  // The table is full: a first attempt decided from unstored state.
  Decision untracked = D(Verdict::kProceed, Reason::kInitialJitter, 1);
  untracked.untracked = true;
  metrics.RecordDecision(Call::kAdmit, untracked);
  // An overload cut the learned pace: the failure is deferred for a slot.
  Decision cut = D(Verdict::kDefer, Reason::kPaced, 3);
  cut.pace_cut = true;
  metrics.RecordDecision(Call::kReport, cut);
  metrics.RecordDecision(Call::kReport, D(Verdict::kDefer, Reason::kPaced, 3));

  PromText t = Scrape(registry);
  EXPECT_EQ(t.Value("stagger_pace_cuts_total"), 1);
  EXPECT_EQ(t.Value("stagger_retry_after_total"), 2);
  EXPECT_EQ(t.Value("stagger_retry_after_clamped_total"), 1);
  EXPECT_EQ(t.Value("stagger_budget_refusals_total"), 3);
  EXPECT_EQ(t.Value("stagger_untracked_decisions_total"), 1);
  EXPECT_EQ(t.Value("stagger_decisions_total", {{"call", "admit"},
                                                {"verdict", "DEFER"},
                                                {"reason", "BUDGET_EXHAUSTED"}}),
            2);
}

TEST(ServerMetricsTest, BreakerTransitionsByFromAndTo) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 8);

  // One report that half-opened an expired breaker and, as a failed probe,
  // reopened it: two transitions in one decision.
  Decision probe_failed = D(Verdict::kDefer, Reason::kCircuitOpen, 2);
  probe_failed.num_transitions = 2;
  probe_failed.transitions[0] = {BreakerState::kOpen, BreakerState::kHalfOpen};
  probe_failed.transitions[1] = {BreakerState::kHalfOpen, BreakerState::kOpen};
  metrics.RecordDecision(Call::kReport, probe_failed);
  // A trip.
  Decision trip = D(Verdict::kDefer, Reason::kCircuitOpen, 2);
  trip.num_transitions = 1;
  trip.transitions[0] = {BreakerState::kClosed, BreakerState::kOpen};
  trip.transitions[1] = {BreakerState::kOpen, BreakerState::kClosed};  // unused
  metrics.RecordDecision(Call::kReport, trip);

  PromText t = Scrape(registry);
  const std::string n = "stagger_breaker_transitions_total";
  EXPECT_EQ(t.Value(n, {{"from", "OPEN"}, {"to", "HALF_OPEN"}}), 1);
  EXPECT_EQ(t.Value(n, {{"from", "HALF_OPEN"}, {"to", "OPEN"}}), 1);
  EXPECT_EQ(t.Value(n, {{"from", "CLOSED"}, {"to", "OPEN"}}), 1);
  EXPECT_EQ(t.Value(n, {{"from", "OPEN"}, {"to", "CLOSED"}}), 0);
  EXPECT_EQ(t.Sum(n), 3);
}

TEST(ServerMetricsTest, RpcDurationBatchSizeAndReloads) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 8);

  metrics.RecordRpc(Method::kAdmit, absl::Microseconds(30));
  metrics.RecordRpc(Method::kListEndpoints, absl::Milliseconds(2));
  metrics.RecordRpc(Method::kReport, -absl::Seconds(1));  // clock oddity: 0
  metrics.RecordBatchSize(Method::kAdmitBatch, 7);
  metrics.RecordBatchSize(Method::kReportBatch, 1000);
  metrics.RecordBatchSize(Method::kAdmit, 7);  // not a batch: ignored
  metrics.RecordConfigReload(true);
  metrics.RecordConfigReload(false);
  metrics.RecordConfigReload(false);

  PromText t = Scrape(registry);
  const std::string rb = "stagger_rpc_duration_seconds_bucket";
  EXPECT_EQ(t.Value(rb, {{"method", "Admit"}, {"le", "2.5e-05"}}), 0);
  EXPECT_EQ(t.Value(rb, {{"method", "Admit"}, {"le", "5e-05"}}), 1);
  EXPECT_EQ(t.Value(rb, {{"method", "ListEndpoints"}, {"le", "0.001"}}), 0);
  EXPECT_EQ(t.Value(rb, {{"method", "ListEndpoints"}, {"le", "0.0025"}}), 1);
  EXPECT_EQ(t.Value(rb, {{"method", "Report"}, {"le", "1e-05"}}), 1);
  EXPECT_EQ(t.Value("stagger_rpc_duration_seconds_sum", {{"method", "Report"}}),
            0);
  EXPECT_EQ(t.Sum("stagger_rpc_duration_seconds_count"), 3);

  const std::string bb = "stagger_batch_size_bucket";
  EXPECT_EQ(t.Value(bb, {{"method", "AdmitBatch"}, {"le", "5"}}), 0);
  EXPECT_EQ(t.Value(bb, {{"method", "AdmitBatch"}, {"le", "10"}}), 1);
  EXPECT_EQ(t.Value(bb, {{"method", "ReportBatch"}, {"le", "500"}}), 0);
  EXPECT_EQ(t.Value(bb, {{"method", "ReportBatch"}, {"le", "1000"}}), 1);
  EXPECT_EQ(t.Value("stagger_batch_size_sum", {{"method", "ReportBatch"}}),
            1000);
  EXPECT_EQ(t.Sum("stagger_batch_size_count"), 2);

  EXPECT_EQ(t.Value("stagger_config_reloads_total", {{"result", "success"}}), 1);
  EXPECT_EQ(t.Value("stagger_config_reloads_total", {{"result", "failure"}}), 2);
}

TEST(ServerMetricsTest, ScopedRpcTimerRecordsOnceAtFinishOrDestruction) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 8);
  {
    ScopedRpcTimer finished(&metrics, Method::kGetEndpoint);
    finished.Finish();
    finished.Finish();  // second Finish: no second sample
    ScopedRpcTimer dropped(&metrics, Method::kAdmitBatch);  // at scope end
    ScopedRpcTimer none(nullptr, Method::kAdmit);            // records nothing
  }
  PromText t = Scrape(registry);
  const std::string c = "stagger_rpc_duration_seconds_count";
  EXPECT_EQ(t.Value(c, {{"method", "GetEndpoint"}}), 1);
  EXPECT_EQ(t.Value(c, {{"method", "AdmitBatch"}}), 1);
  EXPECT_EQ(t.Sum(c), 2);
}

TEST(ServerMetricsTest, OutOfRangeValuesAreNeverCountedUnderAnyLabel) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 8);
  const std::set<std::string> before = Scrape(registry).SeriesKeys();

  // Enum values the engine never produces (a corrupted or future value):
  // no decision series counts them, no transition series either.
  metrics.RecordDecision(Call::kAdmit, D(static_cast<Verdict>(0),
                                         Reason::kAdmitted));
  metrics.RecordDecision(Call::kAdmit, D(static_cast<Verdict>(99),
                                         Reason::kAdmitted));
  metrics.RecordDecision(Call::kReport, D(Verdict::kProceed,
                                          static_cast<Reason>(0)));
  metrics.RecordDecision(Call::kReport, D(Verdict::kProceed,
                                          static_cast<Reason>(200)));
  metrics.RecordDecision(static_cast<Call>(7),
                         D(Verdict::kProceed, Reason::kAdmitted));
  Decision odd = D(Verdict::kDefer, Reason::kCircuitOpen);
  odd.num_transitions = 99;  // clamped to the 2 slots
  odd.transitions[0] = {static_cast<BreakerState>(0), BreakerState::kOpen};
  odd.transitions[1] = {BreakerState::kOpen, BreakerState::kOpen};  // no-op
  metrics.RecordDecision(Call::kReport, odd);
  metrics.RecordRpc(static_cast<Method>(42), absl::Seconds(1));
  metrics.RecordBatchSize(static_cast<Method>(42), 3);

  PromText t = Scrape(registry);
  EXPECT_EQ(t.SeriesKeys(), before);
  // Only the well-formed (DEFER, CIRCUIT_OPEN) decision counted.
  EXPECT_THAT(t.NonZero("stagger_"),
              ElementsAre("stagger_decisions_total{call=\"report\",reason="
                          "\"CIRCUIT_OPEN\",verdict=\"DEFER\"}=1"));
}

// The hot path must not create series: sweep every Record* over every enum
// value (and many junk ones) from several threads at once, then compare the
// set of series with the fresh one, and check the totals are exact (no lost
// increments under concurrency).
TEST(ServerMetricsTest, RecordingFromManyThreadsCreatesNoSeriesAndLosesNothing) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 6);
  PromText fresh = Scrape(registry);
  const std::set<std::string> before = fresh.SeriesKeys();
  const size_t families_before = registry.Collect().size();

  constexpr int kThreads = 4;
  constexpr int kRounds = 50;
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&metrics] {
      for (int round = 0; round < kRounds; ++round) {
        for (int c = 0; c < 2; ++c) {
          for (int v = 1; v <= 4; ++v) {
            for (int r = 1; r <= engine::kMaxReason; ++r) {
              Decision d = D(static_cast<Verdict>(v), static_cast<Reason>(r),
                             /*attempt=*/r + 1, absl::Milliseconds(r));
              d.retry_after_seen = r == 3;
              d.num_transitions = 1;
              d.transitions[0] = {static_cast<BreakerState>(1 + r % 3),
                                  static_cast<BreakerState>(1 + (r + 1) % 3)};
              metrics.RecordDecision(static_cast<Call>(c), d);
            }
          }
        }
        for (int m = 0; m < ServerMetrics::kNumMethods; ++m) {
          metrics.RecordRpc(static_cast<Method>(m), absl::Microseconds(m));
          metrics.RecordBatchSize(static_cast<Method>(m), m);
        }
        metrics.RecordConfigReload(round % 2 == 0);
        metrics.RefreshEngineStats();  // no engine attached: no-op
      }
    });
  }
  for (auto& t : threads) t.join();

  PromText t = Scrape(registry);
  EXPECT_EQ(t.SeriesKeys(), before);
  EXPECT_EQ(registry.Collect().size(), families_before);

  const int n = kThreads * kRounds;
  // Every one of the 144 combinations, n times each.
  EXPECT_EQ(t.Sum("stagger_decisions_total"), 144.0 * n);
  EXPECT_EQ(t.Value("stagger_decisions_total", {{"call", "report"},
                                                {"verdict", "DONE"},
                                                {"reason", "ADMITTED"}}),
            n);
  // Report x PROCEED x {BACKOFF (attempt 3), RETRY_AFTER (attempt 4)}.
  EXPECT_EQ(t.Value("stagger_retry_delay_seconds_count", {{"attempt", "3"}}), n);
  EXPECT_EQ(t.Value("stagger_retry_delay_seconds_count", {{"attempt", "4"}}), n);
  EXPECT_EQ(t.Sum("stagger_retry_delay_seconds_count"), 2.0 * n);
  // Reason RETRY_AFTER flagged seen in all 2 x 4 of its decisions.
  EXPECT_EQ(t.Value("stagger_retry_after_total"), 8.0 * n);
  EXPECT_EQ(t.Value("stagger_budget_refusals_total"), 8.0 * n);
  EXPECT_EQ(t.Sum("stagger_breaker_transitions_total"), 144.0 * n);
  EXPECT_EQ(t.Sum("stagger_rpc_duration_seconds_count"), 6.0 * n);
  EXPECT_EQ(t.Sum("stagger_batch_size_count"), 2.0 * n);
  EXPECT_EQ(t.Sum("stagger_config_reloads_total"), n);
}

// Every label value on every stagger_* sample, after heavy recording, is
// from the fixed sets: never anything a request could have supplied.
TEST(ServerMetricsTest, LabelValuesComeOnlyFromTheFixedSets) {
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 20);
  for (int v = 0; v <= 6; ++v) {
    for (int r = 0; r <= 20; ++r) {
      for (int attempt : {-1, 0, 1, 2, 19, 20, 21, 1000}) {
        metrics.RecordDecision(Call::kReport,
                               D(static_cast<Verdict>(v),
                                 static_cast<Reason>(r), attempt,
                                 absl::Seconds(attempt)));
      }
    }
  }
  const std::map<std::string, std::set<std::string>> allowed = {
      {"call", kCalls},
      {"verdict", kVerdicts},
      {"reason", kReasons},
      {"from", kStates},
      {"to", kStates},
      {"breaker_state", kStates},
      {"method", kMethods},
      {"result", {"success", "failure"}},
      {"attempt", Attempts(20)},
      {"direction", {"in", "out"}},
      {"trigger", {"operator", "unavailable", "permanent_failures"}},
      {"cause", {"bucket_cap", "agent_rate", "endpoint_share"}},
      {"kind", {"first_attempts", "successes"}},
  };
  // The state file's load failures have reasons of their own.
  const std::set<std::string> state_reasons(
      ServerMetrics::kStateLoadFailureReasons.begin(),
      ServerMetrics::kStateLoadFailureReasons.end());
  PromText t = Scrape(registry);
  int checked = 0;
  for (const auto& s : t.samples()) {
    if (s.name.rfind("stagger_", 0) != 0) continue;
    for (const auto& [name, value] : s.labels) {
      if (name == "le") continue;  // histogram bucket bounds: fixed numbers
      if (s.name == "stagger_state_load_failures_total" && name == "reason") {
        EXPECT_TRUE(state_reasons.count(value)) << value;
        ++checked;
        continue;
      }
      // Agents' count reports have results of their own.
      if (s.name == "stagger_count_reports_total" && name == "result") {
        EXPECT_TRUE(value == "applied" || value == "lost" ||
                    value == "duplicate")
            << value;
        ++checked;
        continue;
      }
      auto it = allowed.find(name);
      ASSERT_NE(it, allowed.end()) << "unexpected label " << name << " on "
                                   << s.name;
      EXPECT_TRUE(it->second.count(value))
          << name << "=\"" << value << "\" on " << s.name;
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace stagger::metrics
