// The engine's condition feed, narrated on a fake clock: each change of an
// endpoint's condition (breaker, Retry-After window, release, near a trip)
// reaches the sink once, with why and until when; time-driven changes come
// with RefreshCondition; a forgotten state says so.
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/engine/endpoint_condition.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://partner.example/orders";

// Keeps every change, with the key copied.
struct Recorded {
  std::string endpoint;
  ConditionChange change;
};
class RecordingSink : public ConditionSink {
 public:
  void OnConditionChange(const ConditionChange& c) override {
    changes.push_back({std::string(c.endpoint), c});
  }
  std::vector<Recorded> changes;
};

class EndpointConditionTest : public ::testing::Test {
 protected:
  EndpointConditionTest() {
    // Trips on 4 consecutive failures; open for 10 s (no jitter beyond
    // +-20%); one probe closes it.
    config_.default_policy.breaker.consecutive_failures = 4;
    config_.default_policy.breaker.open_base = absl::Seconds(10);
    config_.default_policy.breaker.open_max = absl::Seconds(10);
    config_.default_policy.breaker.half_open_probes = 1;
    config_.default_policy.breaker.close_after_successes = 1;
    engine_ = std::make_unique<Engine>(config_, &clock_, &random_);
    engine_->set_condition_sink(&sink_);
  }
  Decision Report(int attempt, Outcome o, uint64_t admission = kNoAdmission,
                  std::optional<absl::Duration> ra = std::nullopt) {
    ReportInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    in.outcome = o;
    in.admission = admission;
    in.retry_after = ra;
    return *engine_->Report(in);
  }
  Decision Admit(int attempt) {
    AdmitInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    return *engine_->Admit(in);
  }
  // The changes since the last call.
  std::vector<Recorded> Take() {
    std::vector<Recorded> out;
    out.swap(sink_.changes);
    return out;
  }

  EngineConfig config_;
  FakeClock clock_;
  SeededRandom random_{7};
  RecordingSink sink_;
  std::unique_ptr<Engine> engine_;
};

TEST(EndpointConditionPackTest, EveryConditionRoundTripsAndClearIsZero) {
  EXPECT_EQ(EndpointCondition().Pack(), 0);
  for (int b = 1; b <= kNumBreakerStates; ++b) {
    for (int flags = 0; flags < 8; ++flags) {
      EndpointCondition c;
      c.breaker = static_cast<BreakerState>(b);
      c.retry_after = flags & 1;
      c.releasing = flags & 2;
      c.near_trip = flags & 4;
      EXPECT_EQ(EndpointCondition::Unpack(c.Pack()), c);
      EXPECT_EQ(c.clear(), b == 1 && flags == 0);
    }
  }
}

TEST_F(EndpointConditionTest, AHealthyEndpointReportsNothing) {
  Admit(1);
  Report(1, Outcome::kSuccess);
  EXPECT_TRUE(Take().empty());
}

TEST_F(EndpointConditionTest, FailuresGoNearATripThenOpenWithTheirCause) {
  Report(1, Outcome::kRetryableFailure);  // 1 of 4 in a row
  EXPECT_TRUE(Take().empty());
  Report(1, Outcome::kRetryableFailure);  // 2 of 4: half a trip
  std::vector<Recorded> c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].endpoint, kEp);
  EXPECT_TRUE(c[0].change.from.clear());
  EXPECT_TRUE(c[0].change.to.near_trip);
  EXPECT_EQ(c[0].change.to.breaker, BreakerState::kClosed);

  Report(1, Outcome::kRetryableFailure);  // 3 of 4: still near, no news
  EXPECT_TRUE(Take().empty());
  Report(1, Outcome::kRetryableFailure);  // 4: the trip
  c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].change.from.near_trip);
  EXPECT_EQ(c[0].change.to.breaker, BreakerState::kOpen);
  EXPECT_FALSE(c[0].change.to.near_trip) << "only CLOSED is near a trip";
  EXPECT_EQ(c[0].change.open_cause, OpenCause::kConsecutiveFailures);
  EXPECT_GE(c[0].change.open_until, clock_.Now() + absl::Seconds(8));
  EXPECT_EQ(c[0].change.at, clock_.Now());
}

TEST_F(EndpointConditionTest, HalfOpenIsFoundByRefreshAndAProbeClosesIt) {
  for (int i = 0; i < 4; ++i) Report(1, Outcome::kRetryableFailure);
  const absl::Time open_until = engine_->Inspect(kEp)->open_until;
  Take();
  engine_->RefreshCondition(kEp);
  EXPECT_TRUE(Take().empty()) << "still open";
  clock_.Set(open_until);
  engine_->RefreshCondition(kEp);
  std::vector<Recorded> c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].change.from.breaker, BreakerState::kOpen);
  EXPECT_EQ(c[0].change.to.breaker, BreakerState::kHalfOpen);

  const Decision probe = Admit(2);
  ASSERT_EQ(probe.reason, Reason::kHalfOpenProbe);
  EXPECT_TRUE(Take().empty()) << "a probe out changes no condition";
  Report(2, Outcome::kSuccess, probe.admission);
  c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].change.from.breaker, BreakerState::kHalfOpen);
  EXPECT_EQ(c[0].change.to.breaker, BreakerState::kClosed);
  // The deliveries parked meanwhile come back at the learned pace: a
  // release runs, and its end is found by a refresh.
  EXPECT_TRUE(c[0].change.to.releasing);
  EXPECT_GT(c[0].change.release_pace, 0);
  clock_.Advance(absl::Minutes(1));
  engine_->RefreshCondition(kEp);
  c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].change.to.clear());
}

TEST_F(EndpointConditionTest, AFailedProbeReopensWithThatCause) {
  for (int i = 0; i < 4; ++i) Report(1, Outcome::kRetryableFailure);
  clock_.Set(engine_->Inspect(kEp)->open_until);
  const Decision probe = Admit(2);
  ASSERT_EQ(probe.reason, Reason::kHalfOpenProbe);
  Take();
  Report(2, Outcome::kRetryableFailure, probe.admission);
  std::vector<Recorded> c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].change.to.breaker, BreakerState::kOpen);
  EXPECT_EQ(c[0].change.open_cause, OpenCause::kProbeFailed);
}

TEST_F(EndpointConditionTest, ARetryAfterWindowIsReportedAndItsEndFound) {
  Report(1, Outcome::kRateLimited, kNoAdmission, absl::Seconds(5));
  std::vector<Recorded> c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].change.to.retry_after);
  EXPECT_EQ(c[0].change.retry_after_until, clock_.Now() + absl::Seconds(5));
  clock_.Advance(absl::Seconds(5));
  engine_->RefreshCondition(kEp);
  c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_FALSE(c[0].change.to.retry_after);
}

TEST_F(EndpointConditionTest, AnOperatorsForcedBreakerIsReported) {
  Admit(1);
  ASSERT_TRUE(
      engine_->ForceBreaker(kEp, BreakerState::kOpen, absl::Minutes(1)).ok());
  std::vector<Recorded> c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].change.open_cause, OpenCause::kOperator);
  EXPECT_EQ(c[0].change.open_until, clock_.Now() + absl::Minutes(1));
  ASSERT_TRUE(
      engine_->ForceBreaker(kEp, BreakerState::kClosed, absl::ZeroDuration())
          .ok());
  c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].change.to.clear());
}

TEST_F(EndpointConditionTest, AForgottenStateSaysSoOnlyIfItWasNotClear) {
  Admit(1);
  ASSERT_TRUE(engine_->ResetEndpoint(kEp).ok());
  EXPECT_TRUE(Take().empty()) << "a clear endpoint leaves no news";

  for (int i = 0; i < 4; ++i) Report(1, Outcome::kRetryableFailure);
  Take();
  ASSERT_TRUE(engine_->ResetEndpoint(kEp).ok());
  std::vector<Recorded> c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].change.forgotten);
  EXPECT_EQ(c[0].change.from.breaker, BreakerState::kOpen);
  EXPECT_TRUE(c[0].change.to.clear());
}

TEST_F(EndpointConditionTest, EvictionForgetsANotClearEndpointAloud) {
  Report(1, Outcome::kRateLimited, kNoAdmission, absl::Seconds(1));
  Take();
  clock_.Advance(config_.limits.idle_eviction + absl::Seconds(1));
  EXPECT_EQ(engine_->EvictIdle(), 1);
  std::vector<Recorded> c = Take();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(c[0].change.forgotten);
}

TEST_F(EndpointConditionTest, ARestoredOpenBreakerIsReportedOnImport) {
  for (int i = 0; i < 4; ++i) Report(1, Outcome::kRetryableFailure);
  std::vector<EndpointRecord> records;
  engine_->ExportState([&](absl::Span<const EndpointRecord> part) {
    records.insert(records.end(), part.begin(), part.end());
  });
  Engine restarted(config_, &clock_, &random_);
  RecordingSink sink;
  restarted.set_condition_sink(&sink);
  restarted.ImportState(records);
  ASSERT_EQ(sink.changes.size(), 1u);
  EXPECT_EQ(sink.changes[0].change.to.breaker, BreakerState::kOpen);
}

}  // namespace
}  // namespace stagger::engine
