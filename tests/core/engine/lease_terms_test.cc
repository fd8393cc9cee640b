// What the engine tells the lease side, narrated on a fake clock: when an
// endpoint is clear for a lease (breaker closed, no Retry-After window, no
// pause, no release running, failures below half of each trip threshold),
// how late counts from lease holders are learned at the time they happened,
// and admission tokens: only a probe's success closes a half-open breaker.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "core/engine/admission.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://partner.example/orders";

class LeaseTermsTest : public ::testing::Test {
 protected:
  LeaseTermsTest() {
    // Trips on 4 consecutive failures, or a ratio of 0.5 over >= 20.
    config_.default_policy.breaker.consecutive_failures = 4;
    config_.default_policy.breaker.failure_ratio = 0.5;
    config_.default_policy.breaker.min_throughput = 20;
    config_.default_policy.breaker.half_open_probes = 1;
    config_.default_policy.breaker.close_after_successes = 1;
    engine_ = std::make_unique<Engine>(config_, &clock_, &random_);
  }
  Decision Admit(int attempt) {
    AdmitInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    absl::StatusOr<Decision> d = engine_->Admit(in);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : Decision{};
  }
  Decision Report(int attempt, Outcome o, uint64_t admission = kNoAdmission,
                  std::optional<absl::Duration> retry_after = std::nullopt) {
    ReportInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    in.outcome = o;
    in.admission = admission;
    in.retry_after = retry_after;
    absl::StatusOr<Decision> d = engine_->Report(in);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : Decision{};
  }
  bool Clear() { return engine_->LeaseTermsFor(kEp).clear; }
  BreakerState Breaker() { return engine_->Inspect(kEp)->breaker_state; }
  // Trips the breaker with 4 failures and lets it half-open.
  void TripAndHalfOpen() {
    for (int i = 0; i < 4; ++i) Report(1, Outcome::kRetryableFailure);
    ASSERT_EQ(Breaker(), BreakerState::kOpen);
    clock_.Advance(config_.default_policy.breaker.open_base * 2);
  }

  EngineConfig config_;
  FakeClock clock_;
  SeededRandom random_{11};
  std::unique_ptr<Engine> engine_;
};

TEST_F(LeaseTermsTest, AnEndpointNeverSeenIsClearOnItsPolicysTerms) {
  const LeaseTerms t = engine_->LeaseTermsFor(kEp);
  EXPECT_TRUE(t.clear);
  EXPECT_EQ(t.initial_jitter, config_.default_policy.backoff.initial_jitter);
  EXPECT_EQ(t.served_per_second, 0);
}

TEST_F(LeaseTermsTest, FailuresAtHalfTheCountThresholdEndClear) {
  Admit(1);
  Report(1, Outcome::kSuccess);
  EXPECT_TRUE(Clear());
  Report(1, Outcome::kRetryableFailure);  // 1 of 4 in a row: 0.25
  EXPECT_TRUE(Clear());
  Report(1, Outcome::kRetryableFailure);  // 2 of 4: half, not below it
  EXPECT_FALSE(Clear());
  EXPECT_EQ(Breaker(), BreakerState::kClosed);  // still far from a trip
  Report(1, Outcome::kSuccess);  // the run is broken: 0 in a row
  // The window holds 2 failures of 4 answers, counted against at least 20:
  // 2 / (0.5 x 20) = 0.2.
  EXPECT_TRUE(Clear());
}

TEST_F(LeaseTermsTest, FailuresAtHalfTheRatioThresholdEndClear) {
  // 40 answers, every fourth a failure (never 2 in a row): 10 failures of
  // 40 against a trip at 0.5 x 40 = 20: share 0.5.
  for (int i = 0; i < 40; ++i) {
    Report(1, i % 4 == 3 ? Outcome::kRetryableFailure : Outcome::kSuccess);
    if (i == 38) {
      EXPECT_TRUE(Clear()) << "9 failures: 0.45";
    }
  }
  EXPECT_FALSE(Clear());
  EXPECT_EQ(Breaker(), BreakerState::kClosed);
}

TEST_F(LeaseTermsTest, OpenBreakerRetryAfterWindowAndPauseAreNotClear) {
  Report(1, Outcome::kRateLimited, kNoAdmission, absl::Seconds(30));
  EXPECT_FALSE(Clear()) << "Retry-After window runs";
  clock_.Advance(absl::Seconds(31));
  EXPECT_TRUE(Clear()) << "window over";

  ASSERT_TRUE(engine_->pauses()
                  .Set(kEp, false, absl::Minutes(1), "deploy", "ops",
                       clock_.Now())
                  .ok());
  EXPECT_FALSE(Clear()) << "paused";
  clock_.Advance(absl::Minutes(2));
  EXPECT_TRUE(Clear());

  TripAndHalfOpen();
  EXPECT_FALSE(Clear()) << "half-open";
}

TEST_F(LeaseTermsTest, LateFirstAttemptsFundTheBudgetInTheirSlot) {
  // The budget allows max(0.2 x first attempts, 10/s x 10 s) = 100 retries
  // in its 10 s window; 1000 late first attempts raise it to 200.
  Admit(1);  // 1 first attempt: the floor of 100 holds
  EXPECT_NEAR(engine_->Inspect(kEp)->budget_remaining, 100, 1e-6);
  engine_->ApplyLateCounts(kEp, {LateCounts{clock_.Now() - absl::Seconds(1),
                                            1000, 0}});
  const double after = engine_->Inspect(kEp)->budget_remaining;
  EXPECT_NEAR(after, 0.2 * 1001, 1e-6);
  // Counts older than the window fall outside it at once.
  engine_->ApplyLateCounts(kEp, {LateCounts{clock_.Now() - absl::Seconds(30),
                                            1000, 0}});
  EXPECT_EQ(engine_->Inspect(kEp)->budget_remaining, after);
}

TEST_F(LeaseTermsTest, LateSuccessesAfterTheFailuresBreakTheRun) {
  Report(1, Outcome::kRetryableFailure);
  Report(1, Outcome::kRetryableFailure);
  EXPECT_FALSE(Clear()) << "2 in a row";
  EXPECT_GT(engine_->Inspect(kEp)->previous_delay, absl::ZeroDuration())
      << "the fleet's decorrelated backoff grew from the failures";
  // 50 successes answered under a lease 100 ms after the second failure,
  // reported 400 ms later still.
  const absl::Time answered = clock_.Now() + absl::Milliseconds(100);
  clock_.Advance(absl::Milliseconds(500));
  engine_->ApplyLateCounts(kEp, {LateCounts{answered, 0, 50}});
  EXPECT_TRUE(Clear()) << "50 successes happened since";
  EXPECT_EQ(engine_->Inspect(kEp)->consecutive_failures, 0);
  EXPECT_EQ(engine_->Inspect(kEp)->previous_delay, absl::ZeroDuration())
      << "reset, as a success reported then would have";
  EXPECT_GE(engine_->LeaseTermsFor(kEp).served_per_second, 50);
}

TEST_F(LeaseTermsTest, LateSuccessesFromBeforeTheFailuresDoNotUndoThem) {
  // Successes answered under a lease at t=0 ...
  const absl::Time answered = clock_.Now();
  clock_.Advance(absl::Milliseconds(100));
  // ... then two failures reported centrally at t=100 ms ...
  Report(1, Outcome::kRetryableFailure);
  Report(1, Outcome::kRetryableFailure);
  // ... and only then do the successes' counts arrive (t=400 ms).
  clock_.Advance(absl::Milliseconds(300));
  engine_->ApplyLateCounts(kEp, {LateCounts{answered, 0, 50}});
  EXPECT_EQ(engine_->Inspect(kEp)->consecutive_failures, 2)
      << "the run of failures came after those successes";
  EXPECT_GT(engine_->Inspect(kEp)->previous_delay, absl::ZeroDuration())
      << "nor does the backoff they grew";
  EXPECT_FALSE(Clear());
  // Two more failures trip the breaker (4 in a row).
  Report(1, Outcome::kRetryableFailure);
  Report(1, Outcome::kRetryableFailure);
  EXPECT_EQ(Breaker(), BreakerState::kOpen);
}

TEST_F(LeaseTermsTest, OnlyAProbesSuccessClosesAHalfOpenBreaker) {
  // A first attempt admitted before the trip carries a plain token.
  const Decision before = Admit(1);
  EXPECT_EQ(before.admission, kCoordinatorAdmission);
  TripAndHalfOpen();
  const Decision probe = Admit(2);
  ASSERT_EQ(probe.reason, Reason::kHalfOpenProbe);
  EXPECT_NE(probe.admission & kProbeAdmissionBit, 0u);
  // The attempt from before the trip succeeds: traffic, not a probe.
  EXPECT_EQ(Report(1, Outcome::kSuccess, before.admission).verdict,
            Verdict::kDone);
  EXPECT_EQ(Breaker(), BreakerState::kHalfOpen);
  // Nor does one admitted under a lease.
  Report(1, Outcome::kSuccess, kLocalAdmission);
  EXPECT_EQ(Breaker(), BreakerState::kHalfOpen);
  // The probe's success closes it.
  Report(2, Outcome::kSuccess, probe.admission);
  EXPECT_EQ(Breaker(), BreakerState::kClosed);
}

TEST_F(LeaseTermsTest, AProbeOfAnEarlierHalfOpenPeriodIsNotThisOnes) {
  TripAndHalfOpen();
  const Decision first = Admit(2);
  ASSERT_EQ(first.reason, Reason::kHalfOpenProbe);
  Report(2, Outcome::kRetryableFailure, first.admission);  // trips again
  ASSERT_EQ(Breaker(), BreakerState::kOpen);
  clock_.Advance(config_.default_policy.breaker.open_max * 2);
  const Decision second = Admit(3);
  ASSERT_EQ(second.reason, Reason::kHalfOpenProbe);
  EXPECT_NE(second.admission, first.admission);
  Report(2, Outcome::kSuccess, first.admission);  // a late, stale probe
  EXPECT_EQ(Breaker(), BreakerState::kHalfOpen);
}

TEST_F(LeaseTermsTest, AnUnechoedTokenIsReadAsBeforeTokensExisted) {
  TripAndHalfOpen();
  ASSERT_EQ(Admit(2).reason, Reason::kHalfOpenProbe);
  Report(2, Outcome::kSuccess, kNoAdmission);
  EXPECT_EQ(Breaker(), BreakerState::kClosed);
}

TEST_F(LeaseTermsTest, AReturnedProbeFreesItsSlot) {
  TripAndHalfOpen();
  const Decision probe = Admit(2);
  ASSERT_EQ(probe.reason, Reason::kHalfOpenProbe);
  EXPECT_EQ(Admit(2).reason, Reason::kHalfOpenBusy) << "quota of 1 taken";
  engine_->ReturnProbe(kEp, kCoordinatorAdmission);  // not a probe token
  EXPECT_EQ(Admit(2).reason, Reason::kHalfOpenBusy);
  engine_->ReturnProbe(kEp, probe.admission);
  EXPECT_EQ(Admit(2).reason, Reason::kHalfOpenProbe);
}

TEST_F(LeaseTermsTest, WaitIsCheckedAgainstItsRange) {
  AdmitInput in;
  in.endpoint = kEp;
  in.wait = absl::Seconds(-1);
  EXPECT_EQ(engine_->Admit(in).status().message(), "wait: must be >= 0, got -1s");
  in.wait = absl::Seconds(61);
  EXPECT_EQ(engine_->Admit(in).status().message(),
            "wait: must be <= 1m, got 1m1s");
  in.wait = kMaxWait;
  EXPECT_TRUE(engine_->Admit(in).ok());
}

// Counts may not fill the table: for keys it does not track, they create
// endpoints only while it holds fewer than half of limits.max_endpoints.
// Beyond, they are dropped and counted; tracked keys still learn them, and
// decisions still track new keys up to the limit.
TEST(LateCountsShareTest, CountsCreateEndpointsOnlyUpToTheirShare) {
  EngineConfig config;
  config.limits.max_endpoints = 10;  // counts' share: 5
  FakeClock clock;
  SeededRandom random(3);
  Engine engine(config, &clock, &random);
  const auto key = [](int i) { return absl::StrCat("https://k", i, ".example"); };
  const LateCounts one{clock.Now(), 1, 1};
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(engine.ApplyLateCounts(key(i), {one})) << i;
  }
  EXPECT_EQ(engine.Stats().tracked, 5);
  // At the share: a sixth key's counts are dropped, and counted.
  EXPECT_FALSE(engine.ApplyLateCounts(key(5), {one}));
  EXPECT_FALSE(engine.ApplyLateCounts(key(6), {one, one}));
  EXPECT_EQ(engine.Stats().tracked, 5);
  EXPECT_EQ(engine.Stats().late_counts_dropped, 2);
  EXPECT_FALSE(engine.Inspect(key(5)).ok());
  // A tracked key still learns them.
  EXPECT_TRUE(engine.ApplyLateCounts(key(0), {one}));
  // Decisions take the rest of the table, up to the limit.
  for (int i = 5; i < 10; ++i) {
    AdmitInput in;
    const std::string k = key(i);
    in.endpoint = k;
    ASSERT_TRUE(engine.Admit(in).ok());
  }
  EXPECT_EQ(engine.Stats().tracked, 10);
  EXPECT_EQ(engine.Stats().late_counts_dropped, 2);
}

// LastEvidence: what lets a backoff waiter go (decision.h), read without
// changing anything: a recovery (a release opened), or a Retry-After
// window's end once it has passed; a plain success is not one (docs/API.md,
// "Learned release pace"); InfinitePast for a key never seen.
TEST_F(LeaseTermsTest, LastEvidenceIsARecoveryOrAPassedWindowsEnd) {
  EXPECT_EQ(engine_->LastEvidence(kEp), absl::InfinitePast());
  Report(1, Outcome::kSuccess);
  EXPECT_EQ(engine_->LastEvidence(kEp), absl::InfinitePast())
      << "a success on an endpoint that never went down";
  clock_.Advance(absl::Seconds(1));
  Report(1, Outcome::kRateLimited, kNoAdmission, absl::Seconds(5));
  const absl::Time window_end = clock_.Now() + absl::Seconds(5);
  EXPECT_EQ(engine_->LastEvidence(kEp), absl::InfinitePast())
      << "the window has not ended";
  clock_.Set(window_end + absl::Seconds(1));
  EXPECT_EQ(engine_->LastEvidence(kEp), window_end);
  // Late counts are never evidence.
  engine_->ApplyLateCounts(kEp, {LateCounts{clock_.Now(), 0, 50}});
  EXPECT_EQ(engine_->LastEvidence(kEp), window_end);
}

}  // namespace
}  // namespace stagger::engine
