// ServerMetrics fed by a real engine::Engine (fake clock, fixed seed): the
// decisions it returns drive the transition and delay series, and its
// Stats() drive the endpoint gauges and the eviction counter, both when
// refreshed by hand and per scrape through MetricsExposer.
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "core/metrics/metrics_exposer.h"
#include "server/metrics/server_metrics.h"
#include "tests/testing/http_get.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/engine_calls.h"
#include "tests/testing/fake_clock.h"

namespace stagger::metrics {
namespace {

using engine::Outcome;
using engine::Reason;
using engine::Verdict;
using stagger::testing::PromText;
using Call = ServerMetrics::Call;

engine::EngineConfig SmallConfig() {
  engine::EngineConfig c;
  c.default_policy.breaker.consecutive_failures = 2;  // trips on 2 in a row
  c.default_policy.breaker.close_after_successes = 1;
  c.default_policy.breaker.open_base = absl::Seconds(5);  // +-20% jitter
  c.default_policy.breaker.open_max = absl::Seconds(60);
  c.limits.idle_eviction = absl::Minutes(1);
  return c;
}

class EngineMetricsTest : public ::testing::Test {
 protected:
  EngineMetricsTest()
      : random_(42),
        engine_(SmallConfig(), &clock_, &random_),
        metrics_(*registry_, ServerMetrics::MaxAttemptLabelFor(SmallConfig())) {
    metrics_.AttachEngine(&engine_);
  }

  engine::Decision Admit(const std::string& ep, int attempt) {
    const engine::Decision d =
        stagger::testing::AdmitOk(engine_, ep, attempt);
    metrics_.RecordDecision(Call::kAdmit, d);
    return d;
  }
  engine::Decision Report(const std::string& ep, int attempt, Outcome o) {
    const engine::Decision d =
        stagger::testing::ReportOk(engine_, ep, attempt, o);
    metrics_.RecordDecision(Call::kReport, d);
    return d;
  }
  PromText Scrape() {
    metrics_.RefreshEngineStats();
    PromText t(prometheus::TextSerializer().Serialize(registry_->Collect()));
    EXPECT_TRUE(t.ok()) << t.error();
    return t;
  }
  double State(const PromText& t, const std::string& s) {
    return t.Value("stagger_endpoints", {{"breaker_state", s}});
  }
  double Transitions(const PromText& t, const std::string& from,
                     const std::string& to) {
    return t.Value("stagger_breaker_transitions_total",
                   {{"from", from}, {"to", to}});
  }

  stagger::testing::FakeClock clock_;
  engine::SeededRandom random_;
  engine::Engine engine_;
  std::shared_ptr<prometheus::Registry> registry_ =
      std::make_shared<prometheus::Registry>();
  ServerMetrics metrics_;
};

TEST_F(EngineMetricsTest, BreakerRoundTripShowsInGaugesAndTransitions) {
  // Three endpoints admitted: all tracked, all CLOSED.
  for (const char* ep : {"https://a.example/", "https://b.example/",
                         "https://c.example/"}) {
    ASSERT_EQ(Admit(ep, 1).reason, Reason::kInitialJitter);
  }
  PromText t = Scrape();
  EXPECT_EQ(t.Value("stagger_endpoints_tracked"), 3);
  EXPECT_EQ(State(t, "CLOSED"), 3);
  EXPECT_EQ(State(t, "OPEN"), 0);

  // c fails: first failure -> a backoff for attempt 2 (one histogram
  // sample); second consecutive failure trips the breaker -> DEFER.
  const engine::Decision backoff =
      Report("https://c.example/", 1, Outcome::kRetryableFailure);
  ASSERT_EQ(backoff.verdict, Verdict::kProceed);
  ASSERT_EQ(backoff.reason, Reason::kBackoff);
  ASSERT_EQ(Admit("https://c.example/", 2).verdict, Verdict::kProceed);
  const engine::Decision trip =
      Report("https://c.example/", 2, Outcome::kRetryableFailure);
  ASSERT_EQ(trip.reason, Reason::kCircuitOpen);
  ASSERT_EQ(trip.num_transitions, 1);

  t = Scrape();
  EXPECT_EQ(State(t, "CLOSED"), 2);
  EXPECT_EQ(State(t, "OPEN"), 1);
  EXPECT_EQ(Transitions(t, "CLOSED", "OPEN"), 1);
  EXPECT_EQ(t.Value("stagger_retry_delay_seconds_count", {{"attempt", "2"}}),
            1);
  EXPECT_DOUBLE_EQ(
      t.Value("stagger_retry_delay_seconds_sum", {{"attempt", "2"}}),
      absl::ToDoubleSeconds(backoff.delay));

  // Past the open time (5 s +-20%), the next Admit half-opens it and is the
  // probe; its success closes the breaker (close_after_successes = 1).
  clock_.Advance(absl::Seconds(10));
  ASSERT_EQ(Admit("https://c.example/", 3).reason, Reason::kHalfOpenProbe);
  t = Scrape();
  EXPECT_EQ(State(t, "HALF_OPEN"), 1);
  EXPECT_EQ(State(t, "OPEN"), 0);
  EXPECT_EQ(Transitions(t, "OPEN", "HALF_OPEN"), 1);
  ASSERT_EQ(Report("https://c.example/", 3, Outcome::kSuccess).verdict,
            Verdict::kDone);
  t = Scrape();
  EXPECT_EQ(State(t, "CLOSED"), 3);
  EXPECT_EQ(State(t, "HALF_OPEN"), 0);
  EXPECT_EQ(Transitions(t, "HALF_OPEN", "CLOSED"), 1);
  EXPECT_EQ(t.Sum("stagger_breaker_transitions_total"), 3);
  // No endpoint key ever appears in the exposition.
  const std::string text =
      prometheus::TextSerializer().Serialize(registry_->Collect());
  EXPECT_EQ(text.find("example"), std::string::npos);
}

TEST_F(EngineMetricsTest, EvictionsAreACounterNotDoubleCountedByRefreshes) {
  Admit("https://a.example/", 1);
  Admit("https://b.example/", 1);
  clock_.Advance(absl::Minutes(2));  // both idle past idle_eviction (1 min)
  Admit("https://fresh.example/", 1);
  ASSERT_EQ(engine_.EvictIdle(), 2);

  PromText t = Scrape();
  EXPECT_EQ(t.Value("stagger_endpoints_evicted_total"), 2);
  EXPECT_EQ(t.Value("stagger_endpoints_tracked"), 1);
  EXPECT_EQ(State(t, "CLOSED"), 1);
  // Refreshing again without new evictions adds nothing.
  t = Scrape();
  t = Scrape();
  EXPECT_EQ(t.Value("stagger_endpoints_evicted_total"), 2);

  clock_.Advance(absl::Minutes(2));
  ASSERT_EQ(engine_.EvictIdle(), 1);
  t = Scrape();
  EXPECT_EQ(t.Value("stagger_endpoints_evicted_total"), 3);
  EXPECT_EQ(t.Value("stagger_endpoints_tracked"), 0);
  EXPECT_EQ(State(t, "CLOSED"), 0);
}

TEST_F(EngineMetricsTest, ExposerRefreshesEngineGaugesOnEveryScrape) {
  auto exposer = MetricsExposer::Start(
      "127.0.0.1:0", registry_, [this] { metrics_.RefreshEngineStats(); });
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();

  // No explicit RefreshEngineStats(): the scrape itself reads Stats().
  Admit("https://a.example/", 1);
  auto r = stagger::testing::HttpGet(port, "/metrics");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(PromText(r->body).Value("stagger_endpoints_tracked"), 1);

  Admit("https://b.example/", 1);
  r = stagger::testing::HttpGet(port, "/metrics");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(PromText(r->body).Value("stagger_endpoints_tracked"), 2);
  EXPECT_EQ(PromText(r->body).Value("stagger_endpoints",
                                    {{"breaker_state", "CLOSED"}}),
            2);
}

TEST(EngineMetricsFullTableTest, DecisionsOnAFullTableAreCountedUntracked) {
  stagger::testing::FakeClock clock;
  engine::SeededRandom random(7);
  engine::EngineConfig config;
  config.limits.max_endpoints = 2;  // room for two endpoints only
  engine::Engine engine(config, &clock, &random);
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 8);
  metrics.AttachEngine(&engine);

  for (const char* ep : {"https://a.example/", "https://b.example/",
                         "https://c.example/", "https://d.example/"}) {
    engine::AdmitInput in;
    in.endpoint = ep;
    auto d = engine.Admit(in);
    ASSERT_TRUE(d.ok()) << d.status();
    metrics.RecordDecision(Call::kAdmit, *d);
  }
  metrics.RefreshEngineStats();
  PromText t(prometheus::TextSerializer().Serialize(registry.Collect()));
  // a and b are tracked; c and d were decided from fresh state, unstored.
  EXPECT_EQ(t.Value("stagger_endpoints_tracked"), 2);
  EXPECT_EQ(t.Value("stagger_untracked_decisions_total"), 2);
  EXPECT_EQ(t.Value("stagger_decisions_total", {{"call", "admit"},
                                                {"verdict", "PROCEED"},
                                                {"reason", "INITIAL_JITTER"}}),
            4);
}

// stagger_sync_counts_dropped_total: the engine's drops of counts beyond
// their share of the table (endpoint_share) are taken at each refresh,
// once; the caps' cuts and drops are recorded as they happen.
TEST(EngineMetricsFullTableTest, CountsDroppedByCause) {
  stagger::testing::FakeClock clock;
  engine::SeededRandom random(7);
  engine::EngineConfig config;
  config.limits.max_endpoints = 2;  // counts' share: 1
  engine::Engine engine(config, &clock, &random);
  prometheus::Registry registry;
  ServerMetrics metrics(registry, 8);
  metrics.AttachEngine(&engine);
  const engine::LateCounts one{clock.Now(), 1, 0};
  engine.ApplyLateCounts("https://a.example/", {one});
  engine.ApplyLateCounts("https://b.example/", {one});  // beyond: dropped
  engine.ApplyLateCounts("https://c.example/", {one});  // dropped
  metrics.RecordCountsDropped(ServerMetrics::CountsDrop::kBucketCap, 3);
  metrics.RecordCountsDropped(ServerMetrics::CountsDrop::kAgentRate, 5);
  metrics.RefreshEngineStats();
  metrics.RefreshEngineStats();
  PromText t(prometheus::TextSerializer().Serialize(registry.Collect()));
  const std::string f = "stagger_sync_counts_dropped_total";
  EXPECT_EQ(t.Value(f, {{"cause", "endpoint_share"}}), 2);
  EXPECT_EQ(t.Value(f, {{"cause", "bucket_cap"}}), 3);
  EXPECT_EQ(t.Value(f, {{"cause", "agent_rate"}}), 5);
  EXPECT_EQ(t.Value("stagger_endpoints_tracked"), 1);
}

}  // namespace
}  // namespace stagger::metrics
