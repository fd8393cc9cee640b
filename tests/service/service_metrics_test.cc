// The service records what it decides: a real prometheus::Registry and
// metrics::ServerMetrics passed to the CoordinatorService, calls through the
// real gRPC path, and the registry serialised with prometheus::TextSerializer
// (what /metrics serves) and parsed back to exact sample values.
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/prom_text.h"
#include "tests/service/service_harness.h"

namespace stagger::testing {
namespace {

constexpr char kDecisions[] = "stagger_decisions_total";

class ServiceMetricsTest : public ::testing::Test {
 protected:
  ServiceMetricsTest() : h_(Options()) {}
  static ServiceHarness::Options Options() {
    ServiceHarness::Options o;
    o.with_metrics = true;
    return o;
  }
  PromText Scrape() {
    PromText t(h_.Scrape());
    EXPECT_TRUE(t.ok()) << t.error();
    return t;
  }
  static double Decided(const PromText& t, const char* call,
                        const char* verdict, const char* reason) {
    return t.Value(kDecisions,
                   {{"call", call}, {"verdict", verdict}, {"reason", reason}});
  }

  ServiceHarness h_;
};

TEST_F(ServiceMetricsTest, EachDecisionIncrementsItsSeries) {
  // Fresh: every series exists at 0.
  PromText t = Scrape();
  EXPECT_EQ(Decided(t, "admit", "PROCEED", "INITIAL_JITTER"), 0);
  EXPECT_EQ(t.Sum(kDecisions), 0);

  // Admit(1) -> PROCEED/INITIAL_JITTER: +1 on exactly that series.
  ASSERT_TRUE(h_.Admit(AdmitReq("a.example")).ok());
  t = Scrape();
  EXPECT_EQ(Decided(t, "admit", "PROCEED", "INITIAL_JITTER"), 1);
  EXPECT_EQ(t.Sum(kDecisions), 1);

  // Report(1, failure) -> PROCEED/BACKOFF for attempt 2: the decision and
  // the realised delay, under attempt "2".
  v1::ReportResponse rep;
  ASSERT_TRUE(h_.Report(ReportReq("a.example", 1, v1::TIMEOUT), &rep).ok());
  t = Scrape();
  EXPECT_EQ(Decided(t, "report", "PROCEED", "BACKOFF"), 1);
  EXPECT_EQ(t.Value("stagger_retry_delay_seconds_count", {{"attempt", "2"}}), 1);
  // (The wire Duration is whole nanoseconds; the engine's absl::Duration
  // may carry a fraction of one.)
  EXPECT_NEAR(t.Value("stagger_retry_delay_seconds_sum", {{"attempt", "2"}}),
              absl::ToDoubleSeconds(FromWire(rep.decision().delay())), 1e-9);

  // Report(2, success) -> DONE/SUCCEEDED; PERMANENT_FAILURE -> GIVE_UP.
  ASSERT_TRUE(h_.Report(ReportReq("a.example", 2, v1::SUCCESS)).ok());
  ASSERT_TRUE(h_.Report(ReportReq("b.example", 1, v1::PERMANENT_FAILURE)).ok());
  t = Scrape();
  EXPECT_EQ(Decided(t, "report", "DONE", "SUCCEEDED"), 1);
  EXPECT_EQ(Decided(t, "report", "GIVE_UP", "NOT_RETRYABLE"), 1);
  EXPECT_EQ(t.Sum(kDecisions), 4);

  // A Retry-After is counted.
  v1::ReportRequest rl = ReportReq("c.example", 1, v1::RATE_LIMITED);
  *rl.mutable_retry_after() = ToWire(absl::Seconds(5));
  ASSERT_TRUE(h_.Report(rl).ok());
  t = Scrape();
  EXPECT_EQ(Decided(t, "report", "PROCEED", "RETRY_AFTER"), 1);
  EXPECT_EQ(t.Value("stagger_retry_after_total"), 1);
  // The endpoint table gauge, refreshed from the engine at scrape.
  EXPECT_EQ(t.Value("stagger_endpoints_tracked"), 3);
}

TEST_F(ServiceMetricsTest, BatchSizeRecordedAndEveryItemCounted) {
  // AdmitBatch of 3 first attempts, then one of 2.
  v1::AdmitBatchRequest ab;
  for (int i = 0; i < 3; ++i) *ab.add_items() = AdmitReq(absl::StrCat("k", i));
  ASSERT_TRUE(h_.AdmitBatch(ab).ok());
  ab.mutable_items()->RemoveLast();
  ASSERT_TRUE(h_.AdmitBatch(ab).ok());
  // ReportBatch of 4 failures.
  v1::ReportBatchRequest rb;
  for (int i = 0; i < 4; ++i) {
    *rb.add_items() = ReportReq(absl::StrCat("k", i), 1, v1::RETRYABLE_FAILURE);
  }
  ASSERT_TRUE(h_.ReportBatch(rb).ok());

  PromText t = Scrape();
  const Labels admit_batch = {{"method", "AdmitBatch"}};
  const Labels report_batch = {{"method", "ReportBatch"}};
  // Two AdmitBatch requests of 3 + 2 items; one ReportBatch of 4.
  EXPECT_EQ(t.Value("stagger_batch_size_count", admit_batch), 2);
  EXPECT_EQ(t.Value("stagger_batch_size_sum", admit_batch), 5);
  EXPECT_EQ(t.Value("stagger_batch_size_count", report_batch), 1);
  EXPECT_EQ(t.Value("stagger_batch_size_sum", report_batch), 4);
  // Each item is one decision under its call.
  EXPECT_EQ(Decided(t, "admit", "PROCEED", "INITIAL_JITTER"), 5);
  EXPECT_EQ(Decided(t, "report", "PROCEED", "BACKOFF"), 4);
  EXPECT_EQ(t.Sum(kDecisions), 9);
  EXPECT_EQ(t.Value("stagger_retry_delay_seconds_count", {{"attempt", "2"}}), 4);
  // Each RPC timed once under its method.
  EXPECT_EQ(t.Value("stagger_rpc_duration_seconds_count", admit_batch), 2);
  EXPECT_EQ(t.Value("stagger_rpc_duration_seconds_count", report_batch), 1);
}

TEST_F(ServiceMetricsTest, RefusedRequestsAreTimedButDecideNothing) {
  // attempt 0, an empty batch and a 1001-item batch: all refused.
  EXPECT_EQ(h_.Admit(AdmitReq("a.example", 0)).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(h_.AdmitBatch(v1::AdmitBatchRequest()).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  v1::ReportBatchRequest big;
  for (int i = 0; i < 1001; ++i) {
    *big.add_items() = ReportReq("a.example", 1, v1::TIMEOUT);
  }
  EXPECT_EQ(h_.ReportBatch(big).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  PromText t = Scrape();
  EXPECT_EQ(t.Sum(kDecisions), 0);
  // A batch refused for its size is not a batch: no size observed.
  EXPECT_EQ(t.Value("stagger_batch_size_count", {{"method", "AdmitBatch"}}), 0);
  EXPECT_EQ(t.Value("stagger_batch_size_count", {{"method", "ReportBatch"}}), 0);
  // But the handlers ran and were timed.
  EXPECT_EQ(t.Value("stagger_rpc_duration_seconds_count", {{"method", "Admit"}}),
            1);
  EXPECT_EQ(
      t.Value("stagger_rpc_duration_seconds_count", {{"method", "ReportBatch"}}),
      1);
  // Inspection is timed and decides nothing either.
  EXPECT_EQ(h_.Get("nobody.example").error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(h_.ListEndpoints(v1::ListEndpointsRequest()).ok());
  t = Scrape();
  EXPECT_EQ(t.Sum(kDecisions), 0);
  EXPECT_EQ(
      t.Value("stagger_rpc_duration_seconds_count", {{"method", "GetEndpoint"}}),
      1);
  EXPECT_EQ(t.Value("stagger_rpc_duration_seconds_count",
                    {{"method", "ListEndpoints"}}),
            1);
  EXPECT_EQ(t.Value("stagger_endpoints_tracked"), 0);
}

// No endpoint key ever becomes a label value, whatever the key says.
TEST_F(ServiceMetricsTest, EndpointKeysNeverBecomeLabels) {
  const std::string nasty = "https://x.example/\"} 1\nstagger_fake 9";
  const std::set<std::string> series_before = Scrape().SeriesKeys();
  ASSERT_TRUE(h_.Admit(AdmitReq("https://x.example/plain")).ok());
  // A key with a newline is refused (control character) ...
  EXPECT_EQ(h_.Admit(AdmitReq(nasty)).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // ... and a quote-and-brace key is accepted but is not a label.
  ASSERT_TRUE(h_.Admit(AdmitReq("https://x.example/\"}{")).ok());
  const PromText t = Scrape();
  EXPECT_EQ(t.SeriesKeys(), series_before);
  EXPECT_FALSE(t.Has("stagger_fake"));
}

}  // namespace
}  // namespace stagger::testing
