// The engine's operator controls (stagger.v1.Admin), narrated on a fake
// clock: a pause is the first gate of every decision (DEFER(PAUSED) until
// it ends, spread after it; nothing given up; the endpoint's state
// untouched; SUCCESS still recorded), prefix pauses, pauses surviving a
// config reload and ResetEndpoint, shown by Inspect/List; ResetEndpoint;
// ForceBreaker open and closed.
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "tests/testing/engine_calls.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://partner.example/orders";
constexpr char kOther[] = "https://other.example/x";

class EngineOperatorTest : public ::testing::Test {
 protected:
  EngineOperatorTest() {
    config_.default_policy.breaker.consecutive_failures = 3;
    config_.default_policy.breaker.min_throughput = 1000000000;
    engine_ = std::make_unique<Engine>(config_, &clock_, &random_);
  }
  Decision Admit(const char* ep, int attempt) {
    return ::stagger::testing::AdmitOk(*engine_, ep, attempt);
  }
  Decision Report(const char* ep, int attempt, Outcome o) {
    return ::stagger::testing::ReportOk(*engine_, ep, attempt, o);
  }
  void Pause(const std::string& target, bool prefix, absl::Duration d) {
    ASSERT_TRUE(engine_->pauses()
                    .Set(target, prefix, d, "maintenance", "admin", clock_.Now())
                    .ok());
  }
  // The pause's end, and its end plus the policy's spread.
  void ExpectPaused(const Decision& d, absl::Time until, int attempt) {
    EXPECT_EQ(d.verdict, Verdict::kDefer);
    EXPECT_EQ(d.reason, Reason::kPaused);
    EXPECT_GE(d.defer_until, until);
    EXPECT_LE(d.defer_until, until + config_.default_policy.deferral.spread);
    EXPECT_EQ(d.attempt, attempt);
  }

  EngineConfig config_;
  FakeClock clock_;
  SeededRandom random_{7};
  std::unique_ptr<Engine> engine_;
};

TEST_F(EngineOperatorTest, PausedEndpointDefersEveryDecisionUntilThePauseEnds) {
  ASSERT_EQ(Admit(kEp, 1).verdict, Verdict::kProceed);  // tracked
  const absl::Time until = clock_.Now() + absl::Minutes(10);
  Pause(kEp, false, absl::Minutes(10));
  ExpectPaused(Admit(kEp, 1), until, 1);
  ExpectPaused(Admit(kEp, 3), until, 3);
  // A failure during the pause: held for the next attempt, and not learned
  // (the breaker trips on 3 failures; 5 change nothing).
  for (int i = 0; i < 5; ++i) ExpectPaused(Report(kEp, 1, Outcome::kRetryableFailure), until, 2);
  // Nothing is given up: not for a permanent failure, not past the
  // attempt limit (8).
  ExpectPaused(Report(kEp, 1, Outcome::kNotRetryable), until, 2);
  ExpectPaused(Admit(kEp, 50), until, 50);
  // A success is still recorded.
  EXPECT_EQ(Report(kEp, 1, Outcome::kSuccess).verdict, Verdict::kDone);
  absl::StatusOr<EndpointSnapshot> snap = engine_->Inspect(kEp);
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->consecutive_failures, 0);
  EXPECT_EQ(snap->breaker_state, BreakerState::kClosed);
  ASSERT_TRUE(snap->pause.has_value());
  EXPECT_EQ(snap->pause->until, until);
  EXPECT_EQ(snap->pause->reason, "maintenance");
  EXPECT_EQ(snap->pause->paused_by, "admin");
  // Other endpoints are not held.
  EXPECT_EQ(Admit(kOther, 1).verdict, Verdict::kProceed);
  // At the end of the pause the endpoint's own logic answers again.
  clock_.Advance(absl::Minutes(10));
  EXPECT_EQ(Admit(kEp, 2).verdict, Verdict::kProceed);
  EXPECT_FALSE(engine_->Inspect(kEp)->pause.has_value());
}

TEST_F(EngineOperatorTest, PrefixPauseCoversUntrackedEndpointsAndListShowsIt) {
  const absl::Time until = clock_.Now() + absl::Minutes(5);
  Pause("https://partner.example/", true, absl::Minutes(5));
  ExpectPaused(Admit(kEp, 1), until, 1);
  ExpectPaused(Admit("https://partner.example/refunds", 1), until, 1);
  EXPECT_EQ(Admit(kOther, 1).verdict, Verdict::kProceed);
  ListPage page = engine_->List("", 10, std::nullopt);
  int paused = 0;
  for (const EndpointSnapshot& s : page.endpoints) {
    if (s.pause.has_value()) {
      ++paused;
      EXPECT_TRUE(s.pause->prefix);
      EXPECT_EQ(s.pause->target, "https://partner.example/");
    }
  }
  EXPECT_EQ(paused, 2);
}

TEST_F(EngineOperatorTest, PauseSurvivesConfigReloadAndReset) {
  Admit(kEp, 1);
  const absl::Time until = clock_.Now() + absl::Hours(1);
  Pause(kEp, false, absl::Hours(1));
  EngineConfig next = config_;
  next.default_policy.backoff.max_attempts = 4;
  engine_->SetConfig(next);
  ExpectPaused(Admit(kEp, 1), until, 1);
  ASSERT_TRUE(engine_->ResetEndpoint(kEp).ok());
  ExpectPaused(Admit(kEp, 1), until, 1);
  ASSERT_TRUE(engine_->pauses().Remove(kEp, false, clock_.Now()).ok());
  EXPECT_EQ(Admit(kEp, 1).verdict, Verdict::kProceed);
}

TEST_F(EngineOperatorTest, ResetEndpointForgetsItsState) {
  for (int i = 1; i <= 3; ++i) Report(kEp, 1, Outcome::kRetryableFailure);
  ASSERT_EQ(engine_->Inspect(kEp)->breaker_state, BreakerState::kOpen);
  ASSERT_EQ(engine_->Stats().tracked, 1);
  ASSERT_TRUE(engine_->ResetEndpoint(kEp).ok());
  EXPECT_EQ(engine_->Inspect(kEp).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine_->Stats().tracked, 0);
  EXPECT_EQ(engine_->Stats().by_breaker_state[static_cast<int>(BreakerState::kOpen)], 0);
  EXPECT_EQ(Admit(kEp, 2).verdict, Verdict::kProceed);  // fresh state
  EXPECT_EQ(engine_->ResetEndpoint(kOther).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine_->ResetEndpoint("").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EngineOperatorTest, ForceBreakerOpenThenClosed) {
  Admit(kEp, 1);
  absl::StatusOr<EndpointSnapshot> s =
      engine_->ForceBreaker(kEp, BreakerState::kOpen, absl::Minutes(2));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->breaker_state, BreakerState::kOpen);
  EXPECT_EQ(s->open_until, clock_.Now() + absl::Minutes(2));
  EXPECT_EQ(engine_->Stats().by_breaker_state[static_cast<int>(BreakerState::kOpen)], 1);
  const Decision held = Admit(kEp, 2);
  EXPECT_EQ(held.verdict, Verdict::kDefer);
  EXPECT_EQ(held.reason, Reason::kCircuitOpen);
  s = engine_->ForceBreaker(kEp, BreakerState::kClosed, absl::ZeroDuration());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->breaker_state, BreakerState::kClosed);
  EXPECT_EQ(engine_->Stats().by_breaker_state[static_cast<int>(BreakerState::kClosed)], 1);
  EXPECT_EQ(Admit(kEp, 2).verdict, Verdict::kProceed);
  EXPECT_EQ(engine_->ForceBreaker(kOther, BreakerState::kOpen, absl::Minutes(1))
                .status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(engine_->ForceBreaker(kEp, BreakerState::kOpen, absl::ZeroDuration())
                .status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stagger::engine
