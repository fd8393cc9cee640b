// Waiting admission in the engine (decision.h, "Waiting admission"),
// narrated on a fake clock: what a waiting Admit answers when it arrives,
// what lets a held call go (a half-open probe, the end of a Retry-After
// window or a pause, a recovery for a retry in its backoff, the learned
// pace), what never does (a Retry-After window is never cut short, a
// success that may predate the delivery's failure, a release running), who
// is passed over for a probe, and that a call whose wait runs out gets what
// an Admit gets then.
#include <memory>
#include <optional>

#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://waited.example";

class WaitingTest : public ::testing::Test {
 protected:
  WaitingTest() {
    config_.default_policy.breaker.consecutive_failures = 3;
    config_.default_policy.breaker.open_base = absl::Seconds(4);
    config_.default_policy.breaker.open_max = absl::Seconds(4);
    config_.default_policy.breaker.half_open_probes = 1;
    config_.default_policy.breaker.close_after_successes = 1;
    engine_ = std::make_unique<Engine>(config_, &clock_, &random_);
  }
  // A waiting call arriving now for `attempt`, waiting `wait`.
  struct Call {
    AdmitInput in;
    WaitState w;
  };
  Call Waiting(int attempt, absl::Duration wait,
               absl::Time deadline = absl::InfiniteFuture()) {
    Call c;
    c.in.endpoint = kEp;
    c.in.attempt = attempt;
    c.in.wait = wait;
    c.in.deadline = deadline;
    c.w.since = clock_.Now();
    c.w.until = clock_.Now() + wait;
    return c;
  }
  WaitOutcome Step(Call& c, WaitStep step) {
    absl::StatusOr<WaitOutcome> o = engine_->AdmitWaiting(c.in, &c.w, step);
    EXPECT_TRUE(o.ok()) << o.status();
    return o.ok() ? *o : WaitOutcome{};
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
  void Trip() {
    for (int i = 0; i < 3; ++i) Report(1, Outcome::kRetryableFailure);
    ASSERT_EQ(engine_->Inspect(kEp)->breaker_state, BreakerState::kOpen);
  }

  EngineConfig config_;
  FakeClock clock_;
  SeededRandom random_{21};
  std::unique_ptr<Engine> engine_;
};

TEST_F(WaitingTest, AFirstAttemptOnAHealthyEndpointIsAnsweredAtOnce) {
  Call c = Waiting(1, absl::Seconds(30));
  WaitOutcome o = Step(c, WaitStep::kArrive);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->reason, Reason::kInitialJitter);
}

TEST_F(WaitingTest, HeldCallsGetTheProbeWhenTheBreakerHalfOpensThenTheRest) {
  Trip();
  const absl::Time half_open = engine_->Inspect(kEp)->open_until;
  Call first = Waiting(2, absl::Seconds(30));
  Call second = Waiting(2, absl::Seconds(30));
  WaitOutcome o = Step(first, WaitStep::kArrive);
  ASSERT_FALSE(o.answer.has_value()) << "held while the breaker is open";
  EXPECT_EQ(o.recheck, half_open) << "looked at again when it half-opens";
  ASSERT_FALSE(Step(second, WaitStep::kArrive).answer.has_value());
  // Nothing changes before then.
  clock_.Advance(absl::Seconds(1));
  EXPECT_FALSE(Step(first, WaitStep::kRecheck).answer.has_value());
  clock_.Set(half_open);
  o = Step(first, WaitStep::kRecheck);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->reason, Reason::kHalfOpenProbe);
  EXPECT_FALSE(Step(second, WaitStep::kRecheck).answer.has_value())
      << "one probe only";
  // The probe's success closes the breaker and lets the next call go.
  clock_.Advance(absl::Milliseconds(300));
  Report(2, Outcome::kSuccess, o.answer->admission);
  o = Step(second, WaitStep::kRecheck);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->verdict, Verdict::kProceed);
  EXPECT_EQ(o.answer->reason, Reason::kReleased);
}

TEST_F(WaitingTest, ARetryInItsBackoffGoesEarlyOnlyOnARecoverySinceItArrived) {
  Report(1, Outcome::kSuccess);  // an old success: not evidence
  clock_.Advance(absl::Seconds(1));
  Call c = Waiting(2, absl::Seconds(30));
  ASSERT_FALSE(Step(c, WaitStep::kArrive).answer.has_value());
  EXPECT_TRUE(c.w.backoff);
  clock_.Advance(absl::Seconds(2));
  EXPECT_FALSE(Step(c, WaitStep::kRecheck).answer.has_value());
  // Another delivery's success, reported after the call arrived: it may
  // have been sent before this delivery's failure, so it says nothing of
  // the wait that failure started. The call keeps its backoff.
  Report(1, Outcome::kSuccess);
  EXPECT_FALSE(Step(c, WaitStep::kRecheck).answer.has_value());
  // The endpoint trips, half-opens, and its probe succeeds: the gate
  // opened again after the call arrived. That is a recovery: it goes.
  Trip();
  clock_.Set(engine_->Inspect(kEp)->open_until);
  Call probe = Waiting(2, absl::Seconds(30));
  WaitOutcome p = Step(probe, WaitStep::kArrive);
  ASSERT_TRUE(p.answer.has_value());
  ASSERT_EQ(p.answer->reason, Reason::kHalfOpenProbe);
  EXPECT_FALSE(Step(c, WaitStep::kRecheck).answer.has_value());
  clock_.Advance(absl::Milliseconds(100));
  Report(2, Outcome::kSuccess, p.answer->admission);  // closes the breaker
  WaitOutcome o = Step(c, WaitStep::kRecheck);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->reason, Reason::kReleased);
}

TEST_F(WaitingTest, ARetryArrivingDuringAReleaseWaitsOutItsBackoff) {
  // The endpoint had an outage and recovered: its parked backlog is being
  // released. A delivery fails now (one of a flaky endpoint's failures) and
  // is told BACKOFF; its waiting Admit for the next attempt is held for
  // that backoff, not let go at once because a release runs (a delivery
  // once ran eight attempts in 80 ms that way, and gave up).
  Trip();
  clock_.Set(engine_->Inspect(kEp)->open_until);
  Call probe = Waiting(2, absl::Seconds(30));
  WaitOutcome p = Step(probe, WaitStep::kArrive);
  ASSERT_EQ(p.answer->reason, Reason::kHalfOpenProbe);
  Report(2, Outcome::kSuccess, p.answer->admission);
  ASSERT_TRUE(engine_->Inspect(kEp)->releasing);
  clock_.Advance(absl::Milliseconds(500));
  const Decision failed = Report(1, Outcome::kRetryableFailure);
  ASSERT_EQ(failed.reason, Reason::kBackoff);
  Call c = Waiting(2, failed.delay);
  EXPECT_FALSE(Step(c, WaitStep::kArrive).answer.has_value());
  EXPECT_TRUE(c.w.backoff);
  // Other deliveries succeed meanwhile: still not evidence for it.
  Report(1, Outcome::kSuccess);
  EXPECT_FALSE(Step(c, WaitStep::kRecheck).answer.has_value());
  // Its backoff runs out: it goes then.
  clock_.Set(c.w.until);
  WaitOutcome o = Step(c, WaitStep::kExpire);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->verdict, Verdict::kProceed);
}

TEST_F(WaitingTest, ARetryThePaceHoldsGoesAtASlotOnlyWhileTheEndpointServes) {
  // As above, but the pace has no slot when the retry arrives (the
  // backlog took them): it waits in line for one. A slot that frees is
  // not enough, though: the endpoint may have gone down again before the
  // breaker knows (a release once ran on into a new outage, and its slots
  // sent one delivery's attempts 2 to 8 in 200 ms: it gave up). It goes
  // at a slot only once an attempt sent after it arrived has succeeded.
  Trip();
  clock_.Set(engine_->Inspect(kEp)->open_until);
  Call probe = Waiting(2, absl::Seconds(30));
  WaitOutcome p = Step(probe, WaitStep::kArrive);
  ASSERT_EQ(p.answer->reason, Reason::kHalfOpenProbe);
  Report(2, Outcome::kSuccess, p.answer->admission);
  ASSERT_TRUE(engine_->Inspect(kEp)->releasing);
  // The backlog takes every slot the pace has now.
  while (engine_->Admit({.endpoint = kEp, .attempt = 2})->verdict ==
         Verdict::kProceed) {
  }
  ASSERT_EQ(Report(1, Outcome::kRetryableFailure).reason, Reason::kBackoff);
  // Its waiting Admit for attempt 2, with a backoff of 2 s.
  Call c = Waiting(2, absl::Seconds(2));
  EXPECT_FALSE(Step(c, WaitStep::kArrive).answer.has_value());
  EXPECT_TRUE(c.w.paced);
  // Slots free (500 ms at the start pace of 10/s frees five), but nothing
  // has succeeded since it arrived: it holds.
  clock_.Advance(absl::Milliseconds(500));
  EXPECT_FALSE(Step(c, WaitStep::kRecheck).answer.has_value());
  // A success now was sent after it arrived (a round trip, 250 ms until
  // one is measured, would have passed): the endpoint serves, it goes.
  Report(2, Outcome::kSuccess);
  const WaitOutcome o = Step(c, WaitStep::kRecheck);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->reason, Reason::kReleased);
}

TEST_F(WaitingTest, ACallOnItsLastAttemptIsPassedOverForTheProbe) {
  // Two held calls, the more urgent one on its last attempt (8 by
  // default). Should its client count a probe's failure as its own
  // attempt, that probe would make it give up: the next call takes it.
  Trip();
  Call last = Waiting(8, absl::Seconds(30), clock_.Now() + absl::Seconds(60));
  Call next = Waiting(2, absl::Seconds(30), clock_.Now() + absl::Seconds(90));
  ASSERT_FALSE(Step(last, WaitStep::kArrive).answer.has_value());
  ASSERT_FALSE(Step(next, WaitStep::kArrive).answer.has_value());
  clock_.Set(engine_->Inspect(kEp)->open_until);
  const WaitOutcome passed = Step(last, WaitStep::kRecheck);
  EXPECT_FALSE(passed.answer.has_value());
  EXPECT_FALSE(passed.gated) << "the calls behind it may take the probe";
  const WaitOutcome o = Step(next, WaitStep::kRecheck);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->reason, Reason::kHalfOpenProbe);
}

TEST_F(WaitingTest, LateCountsAreNeverEvidenceThatLetsABackoffGo) {
  Call c = Waiting(2, absl::Seconds(10));
  ASSERT_FALSE(Step(c, WaitStep::kArrive).answer.has_value());
  ASSERT_TRUE(c.w.backoff);
  clock_.Advance(absl::Seconds(2));
  // An agent's counts say 50 deliveries succeeded a second ago: counts
  // carry no admission token and no check that they came from the
  // endpoint as it is now, so they are not evidence on their own. (Nor is
  // a reported success: only a recovery is, as above.)
  engine_->ApplyLateCounts(
      kEp, {LateCounts{clock_.Now() - absl::Seconds(1), 0, 50}});
  EXPECT_FALSE(Step(c, WaitStep::kRecheck).answer.has_value());
  // Its backoff runs out: it goes then.
  clock_.Set(c.w.until);
  const WaitOutcome o = Step(c, WaitStep::kExpire);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->verdict, Verdict::kProceed);
}

TEST_F(WaitingTest, ARetryAfterWindowIsNeverCutShort) {
  Report(1, Outcome::kRateLimited, kNoAdmission, absl::Seconds(5));
  const absl::Time window_end = clock_.Now() + absl::Seconds(5);
  Call c = Waiting(2, absl::Seconds(30));
  WaitOutcome o = Step(c, WaitStep::kArrive);
  ASSERT_FALSE(o.answer.has_value());
  EXPECT_EQ(o.recheck, window_end);
  clock_.Advance(absl::Seconds(1));
  Report(1, Outcome::kSuccess);  // a success inside the window
  EXPECT_FALSE(Step(c, WaitStep::kRecheck).answer.has_value());
  clock_.Set(window_end);
  o = Step(c, WaitStep::kRecheck);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->reason, Reason::kReleased);
}

TEST_F(WaitingTest, AWaitThatRunsOutGetsWhatAnAdmitGetsThen) {
  Trip();
  Call c = Waiting(2, absl::Seconds(1));
  ASSERT_FALSE(Step(c, WaitStep::kArrive).answer.has_value());
  clock_.Advance(absl::Seconds(1));
  WaitOutcome o = Step(c, WaitStep::kExpire);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->verdict, Verdict::kDefer);
  EXPECT_EQ(o.answer->reason, Reason::kCircuitOpen);
}

TEST_F(WaitingTest, APauseHoldsUntilItEnds) {
  ASSERT_TRUE(engine_->pauses()
                  .Set(kEp, false, absl::Seconds(8), "deploy", "ops",
                       clock_.Now())
                  .ok());
  Call c = Waiting(1, absl::Seconds(30));
  WaitOutcome o = Step(c, WaitStep::kArrive);
  ASSERT_FALSE(o.answer.has_value());
  EXPECT_EQ(o.recheck, clock_.Now() + absl::Seconds(8));
  clock_.Advance(absl::Seconds(8));
  o = Step(c, WaitStep::kRecheck);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->verdict, Verdict::kProceed);
}

TEST_F(WaitingTest, ADeliveryNearItsDeadlineGetsItsLastChance) {
  Trip();
  // The breaker half-opens in 4 s; the delivery's deadline is in 3 s.
  Call c = Waiting(2, absl::Seconds(30), clock_.Now() + absl::Seconds(3));
  WaitOutcome o = Step(c, WaitStep::kArrive);
  ASSERT_FALSE(o.answer.has_value());
  EXPECT_GE(o.recheck, clock_.Now() + absl::Seconds(2));
  EXPECT_LT(o.recheck, clock_.Now() + absl::Seconds(3));
  clock_.Set(o.recheck);
  o = Step(c, WaitStep::kRecheck);
  ASSERT_TRUE(o.answer.has_value());
  EXPECT_EQ(o.answer->reason, Reason::kLastChance);
}

TEST_F(WaitingTest, AfterAnOutageHeldCallsGoAtTheLearnedPace) {
  Trip();
  std::vector<Call> calls;
  for (int i = 0; i < 200; ++i) {
    calls.push_back(Waiting(2, absl::Seconds(60)));
    ASSERT_FALSE(Step(calls.back(), WaitStep::kArrive).answer.has_value());
  }
  clock_.Advance(absl::Seconds(5));
  WaitOutcome probe = Step(calls[0], WaitStep::kRecheck);
  ASSERT_EQ(probe.answer->reason, Reason::kHalfOpenProbe);
  clock_.Advance(absl::Milliseconds(200));
  Report(2, Outcome::kSuccess, probe.answer->admission);  // closes
  // Every 100 ms the room looks at all of them: a burst at the start pace
  // at most, not the herd.
  int released = 0;
  for (size_t i = 1; i < calls.size(); ++i) {
    if (Step(calls[i], WaitStep::kRecheck).answer.has_value()) ++released;
  }
  EXPECT_GT(released, 0);
  EXPECT_LT(released, 100) << "the herd went at once";
}

TEST_F(WaitingTest, WaitIsCheckedWhenTheCallArrives) {
  Call c = Waiting(1, absl::Seconds(90));
  EXPECT_EQ(engine_->AdmitWaiting(c.in, &c.w, WaitStep::kArrive)
                .status()
                .message(),
            "wait: must be <= 1m, got 1m30s");
}

}  // namespace
}  // namespace stagger::engine
