// Disabled endpoints, narrated on a fake clock: an operator disables and
// enables one; the policy's two triggers (a breaker away from CLOSED too
// long, permanent failures in a window) disable one by themselves; while
// disabled every Admit gives up and nothing is learnt; the disable
// outlives eviction, a reset and a state transfer; the condition feed
// hears each change once, with who and why.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/engine/disable_table.h"
#include "core/engine/endpoint_condition.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/engine_calls.h"
#include "tests/testing/fake_clock.h"

namespace stagger::engine {
namespace {

using ::stagger::testing::AdmitOk;
using ::stagger::testing::FakeClock;
using ::stagger::testing::ReportOk;
using ::testing::HasSubstr;

constexpr char kEp[] = "https://tenant.example/hooks";
constexpr char kOther[] = "https://other.example/hooks";

struct Seen {
  std::string endpoint;
  EndpointCondition from, to;
  bool forgotten = false;
  DisableTrigger trigger = DisableTrigger::kNone;  // `disabled` note
  std::string by;                                  // disabled or enabled
};
class Sink : public ConditionSink {
 public:
  void OnConditionChange(const ConditionChange& c) override {
    Seen s;
    s.endpoint = std::string(c.endpoint);
    s.from = c.from;
    s.to = c.to;
    s.forgotten = c.forgotten;
    if (c.disabled != nullptr) {
      s.trigger = c.disabled->trigger;
      s.by = c.disabled->by;
    }
    if (c.enabled != nullptr) s.by = c.enabled->by;
    seen.push_back(s);
  }
  // The changes whose `disabled` differs, in order.
  std::vector<Seen> DisableChanges() const {
    std::vector<Seen> out;
    for (const Seen& s : seen) {
      if (s.from.disabled != s.to.disabled) out.push_back(s);
    }
    return out;
  }
  std::vector<Seen> seen;
};

class LifecycleTest : public ::testing::Test {
 protected:
  LifecycleTest() {
    // Trips on 3 failures in a row; open 10 s, then half-open; one probe
    // decides.
    config_.default_policy.breaker.consecutive_failures = 3;
    config_.default_policy.breaker.min_throughput = 1000000000;
    config_.default_policy.breaker.open_base = absl::Seconds(10);
    config_.default_policy.breaker.open_max = absl::Seconds(10);
    config_.default_policy.breaker.half_open_probes = 1;
    config_.default_policy.breaker.close_after_successes = 1;
    config_.default_policy.backoff.max_attempts = 100;
  }
  void Make() {
    engine_ = std::make_unique<Engine>(config_, &clock_, &random_);
    engine_->set_condition_sink(&sink_);
  }
  Decision Admit(int attempt = 1, absl::string_view ep = kEp) {
    return AdmitOk(*engine_, ep, attempt);
  }
  Decision Report(Outcome o, int attempt = 1, absl::string_view ep = kEp) {
    return ReportOk(*engine_, ep, attempt, o);
  }
  EndpointSnapshot Inspect(absl::string_view ep = kEp) {
    absl::StatusOr<EndpointSnapshot> s = engine_->Inspect(ep);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : EndpointSnapshot{};
  }
  bool Disabled(absl::string_view ep = kEp) {
    return Inspect(ep).disable.has_value();
  }
  absl::Status DisableByHand(absl::string_view ep = kEp) {
    engine::Disable d;
    d.reason = "tenant deleted the endpoint";
    d.by = "spiffe://ops/alice";
    d.operation_id = "op-1";
    return engine_->Disable(ep, d);
  }
  void Trip() {
    for (int i = 0; i < 3; ++i) Report(Outcome::kRetryableFailure);
    ASSERT_EQ(Inspect().breaker_state, BreakerState::kOpen);
  }

  EngineConfig config_;
  FakeClock clock_;
  SeededRandom random_{11};
  Sink sink_;
  std::unique_ptr<Engine> engine_;
};

// --- By hand ---------------------------------------------------------------

TEST_F(LifecycleTest, ADisabledEndpointGivesUpEveryAdmitUntilEnabled) {
  Make();
  // Ahead of traffic: the endpoint is tracked from then on.
  ASSERT_TRUE(DisableByHand().ok());
  EXPECT_EQ(engine_->Stats().tracked, 1);
  const EndpointSnapshot snap = Inspect();
  ASSERT_TRUE(snap.disable.has_value());
  EXPECT_EQ(snap.disable->trigger, DisableTrigger::kOperator);
  EXPECT_EQ(snap.disable->by, "spiffe://ops/alice");
  EXPECT_EQ(snap.disable->reason, "tenant deleted the endpoint");
  EXPECT_EQ(snap.disable->since, clock_.Now());

  for (int attempt : {1, 2, 7}) {
    const Decision d = Admit(attempt);
    EXPECT_EQ(d.verdict, Verdict::kGiveUp) << attempt;
    EXPECT_EQ(d.reason, Reason::kEndpointDisabled) << attempt;
  }
  // A report of an attempt already in flight: a failure gives up and
  // teaches nothing; a success is recorded.
  const Decision f = Report(Outcome::kRetryableFailure, 2);
  EXPECT_EQ(f.reason, Reason::kEndpointDisabled);
  EXPECT_EQ(f.attempt, 3);
  EXPECT_EQ(Inspect().consecutive_failures, 0);
  EXPECT_EQ(Report(Outcome::kSuccess).verdict, Verdict::kDone);
  EXPECT_TRUE(Disabled()) << "a success does not enable it";
  // Another endpoint is not touched.
  EXPECT_EQ(Admit(1, kOther).verdict, Verdict::kProceed);

  Enable e;
  e.by = "spiffe://ops/bob";
  absl::StatusOr<engine::Disable> ended = engine_->Enable(kEp, e);
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->by, "spiffe://ops/alice");
  EXPECT_EQ(Admit().verdict, Verdict::kProceed);
  EXPECT_FALSE(Disabled());
  EXPECT_TRUE(absl::IsNotFound(engine_->Enable(kEp, e).status()));
}

TEST_F(LifecycleTest, DisabledComesBeforeAPause) {
  Make();
  ASSERT_TRUE(engine_->pauses()
                  .Set("https://tenant.example/", true, absl::Hours(1),
                       "maintenance", "ops", clock_.Now())
                  .ok());
  EXPECT_EQ(Admit().reason, Reason::kPaused);
  ASSERT_TRUE(DisableByHand().ok());
  EXPECT_EQ(Admit().reason, Reason::kEndpointDisabled);
  EXPECT_EQ(Report(Outcome::kTimeout).reason, Reason::kEndpointDisabled);
}

TEST_F(LifecycleTest, BadKeysAndAFullTableAreRefusedNamingTheField) {
  config_.limits.max_endpoints = 1;
  Make();
  const absl::Status bad = engine_->Disable("", {});
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_THAT(bad.message(), HasSubstr("endpoint"));
  Admit(1, kOther);  // the one place, not idle
  const absl::Status full = DisableByHand();
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("max_endpoints"));
  EXPECT_EQ(engine_->disables().size(), 0) << "nothing half-done";
  EXPECT_EQ(Admit().verdict, Verdict::kProceed);
}

// --- The triggers ----------------------------------------------------------

TEST_F(LifecycleTest, BreakerAwayFromClosedTooLongDisablesIt) {
  config_.default_policy.disable.after_unavailable = absl::Seconds(60);
  Make();
  Trip();
  const absl::Time tripped = clock_.Now();
  // Open, half-open, a probe that fails, open again: still away.
  clock_.Advance(absl::Seconds(15));
  const Decision probe = Admit(4);
  ASSERT_EQ(probe.reason, Reason::kHalfOpenProbe);
  Report(Outcome::kRetryableFailure, 4);
  clock_.Advance(absl::Seconds(44));  // 59 s away
  EXPECT_NE(Admit(5).reason, Reason::kEndpointDisabled);
  clock_.Advance(absl::Seconds(1));  // 60 s
  const Decision d = Admit(5);
  EXPECT_EQ(d.verdict, Verdict::kGiveUp);
  EXPECT_EQ(d.reason, Reason::kEndpointDisabled);
  const EndpointSnapshot snap = Inspect();
  ASSERT_TRUE(snap.disable.has_value());
  EXPECT_EQ(snap.disable->trigger, DisableTrigger::kUnavailable);
  EXPECT_EQ(snap.disable->since, tripped + absl::Seconds(60));
  EXPECT_THAT(snap.disable->reason, HasSubstr("after_unavailable"));
  EXPECT_EQ(engine_->Stats().disables_total[static_cast<int>(
                DisableTrigger::kUnavailable)],
            1);
}

TEST_F(LifecycleTest, AClosedBreakerStartsTheClockOver) {
  config_.default_policy.disable.after_unavailable = absl::Seconds(60);
  Make();
  Trip();
  clock_.Advance(absl::Seconds(50));
  const Decision probe = Admit(4);
  ASSERT_EQ(probe.reason, Reason::kHalfOpenProbe);
  ReportInput ok;
  ok.endpoint = kEp;
  ok.attempt = 4;
  ok.outcome = Outcome::kSuccess;
  ok.admission = probe.admission;
  ASSERT_TRUE(engine_->Report(ok).ok());
  ASSERT_EQ(Inspect().breaker_state, BreakerState::kClosed);
  Trip();  // away again, from now
  clock_.Advance(absl::Seconds(50));
  EXPECT_NE(Admit(5).reason, Reason::kEndpointDisabled)
      << "100 s since the first trip, 50 s since the breaker last closed";
  EXPECT_FALSE(Disabled());
}

TEST_F(LifecycleTest, RefreshDisablesAnEndpointWithNoTraffic) {
  config_.default_policy.disable.after_unavailable = absl::Seconds(60);
  Make();
  Trip();
  clock_.Advance(absl::Seconds(61));
  EXPECT_FALSE(Disabled()) << "nobody looked yet";
  engine_->RefreshCondition(kEp);
  EXPECT_TRUE(Disabled());
  ASSERT_FALSE(sink_.DisableChanges().empty());
  EXPECT_EQ(sink_.DisableChanges().back().trigger,
            DisableTrigger::kUnavailable);
}

TEST_F(LifecycleTest, EnableLetsTheUnavailableTriggerCountFromThen) {
  config_.default_policy.disable.after_unavailable = absl::Seconds(60);
  Make();
  Trip();
  clock_.Advance(absl::Seconds(60));
  engine_->RefreshCondition(kEp);
  ASSERT_TRUE(Disabled());
  ASSERT_TRUE(engine_->Enable(kEp, {}).ok());
  // The breaker is still away from CLOSED; the trigger waits 60 s again.
  clock_.Advance(absl::Seconds(59));
  EXPECT_NE(Admit(4).reason, Reason::kEndpointDisabled);
  clock_.Advance(absl::Seconds(1));
  engine_->RefreshCondition(kEp);
  EXPECT_TRUE(Disabled());
}

TEST_F(LifecycleTest, NoBreakerNoUnavailableTrigger) {
  config_.default_policy.disable.after_unavailable = absl::Seconds(1);
  config_.default_policy.breaker.enabled = false;
  Make();
  for (int i = 0; i < 50; ++i) {
    Report(Outcome::kRetryableFailure, 2);
    clock_.Advance(absl::Seconds(1));
  }
  EXPECT_FALSE(Disabled());
}

TEST_F(LifecycleTest, PermanentFailuresInAWindowDisableIt) {
  config_.default_policy.disable.permanent_failures = 3;
  config_.default_policy.disable.window = absl::Minutes(10);
  Make();
  EXPECT_EQ(Report(Outcome::kNotRetryable).reason, Reason::kNotRetryable);
  clock_.Advance(absl::Minutes(4));
  EXPECT_EQ(Report(Outcome::kNotRetryable).reason, Reason::kNotRetryable);
  EXPECT_FALSE(Disabled());
  clock_.Advance(absl::Minutes(5));
  // The third, 9 min after the first: answered as any 410, then disabled.
  EXPECT_EQ(Report(Outcome::kNotRetryable).reason, Reason::kNotRetryable);
  ASSERT_TRUE(Disabled());
  EXPECT_EQ(Inspect().disable->trigger, DisableTrigger::kPermanentFailures);
  EXPECT_EQ(Admit().reason, Reason::kEndpointDisabled);
  EXPECT_EQ(engine_->disables().counting(), 0);
}

TEST_F(LifecycleTest, ASuccessOrTheWindowEndsARunOfPermanentFailures) {
  config_.default_policy.disable.permanent_failures = 2;
  config_.default_policy.disable.window = absl::Minutes(10);
  Make();
  Report(Outcome::kNotRetryable);
  Report(Outcome::kSuccess);
  Report(Outcome::kNotRetryable);
  EXPECT_FALSE(Disabled()) << "a success between them";
  clock_.Advance(absl::Minutes(11));
  Report(Outcome::kNotRetryable);
  EXPECT_FALSE(Disabled()) << "the first is out of the window";
  // Other failures do not count; a paused report teaches nothing.
  Report(Outcome::kRetryableFailure);
  ASSERT_TRUE(engine_->pauses()
                  .Set(kEp, false, absl::Minutes(1), "m", "ops", clock_.Now())
                  .ok());
  EXPECT_EQ(Report(Outcome::kNotRetryable).reason, Reason::kPaused);
  EXPECT_FALSE(Disabled());
  clock_.Advance(absl::Minutes(2));
  Report(Outcome::kNotRetryable);
  EXPECT_TRUE(Disabled()) << "two counted within 3 minutes";
}

// --- What it outlives ------------------------------------------------------

TEST_F(LifecycleTest, ADisabledEndpointIsNeverEvictedAndAResetKeepsIt) {
  config_.limits.idle_eviction = absl::Minutes(1);
  Make();
  Trip();
  Admit(1, kOther);
  ASSERT_TRUE(DisableByHand().ok());
  clock_.Advance(absl::Hours(2));
  EXPECT_EQ(engine_->EvictIdle(), 1) << "the other one";
  EXPECT_TRUE(Disabled());

  sink_.seen.clear();
  ASSERT_TRUE(engine_->ResetEndpoint(kEp).ok());
  const EndpointSnapshot snap = Inspect();
  EXPECT_EQ(snap.breaker_state, BreakerState::kClosed) << "state forgotten";
  ASSERT_TRUE(snap.disable.has_value()) << "the disable kept";
  EXPECT_EQ(Admit().reason, Reason::kEndpointDisabled);
  // The feed: the OPEN breaker ended with the state; the disable did not.
  ASSERT_EQ(sink_.seen.size(), 1u);
  EXPECT_TRUE(sink_.seen[0].forgotten);
  EXPECT_EQ(sink_.seen[0].from.breaker, BreakerState::kOpen);
  EXPECT_TRUE(sink_.seen[0].to.disabled);
  EXPECT_EQ(sink_.seen[0].to.breaker, BreakerState::kClosed);
  EXPECT_EQ(engine_->Stats().tracked, 1);
}

TEST_F(LifecycleTest, TheFeedHearsEachDisableAndEnableOnceWithWho) {
  config_.default_policy.disable.permanent_failures = 1;
  Make();
  ASSERT_TRUE(DisableByHand().ok());
  ASSERT_TRUE(DisableByHand().ok()) << "again: replaced, not reported";
  Enable e;
  e.by = "spiffe://ops/bob";
  ASSERT_TRUE(engine_->Enable(kEp, e).ok());
  Report(Outcome::kNotRetryable);
  const std::vector<Seen> changes = sink_.DisableChanges();
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_TRUE(changes[0].to.disabled);
  EXPECT_FALSE(changes[0].to.clear());
  EXPECT_EQ(changes[0].trigger, DisableTrigger::kOperator);
  EXPECT_EQ(changes[0].by, "spiffe://ops/alice");
  EXPECT_FALSE(changes[1].to.disabled);
  EXPECT_EQ(changes[1].by, "spiffe://ops/bob");
  EXPECT_EQ(changes[2].trigger, DisableTrigger::kPermanentFailures);
  EXPECT_EQ(engine_->Stats().disabled, 1);
  EXPECT_EQ(engine_->Stats().disables_total[static_cast<int>(
                DisableTrigger::kOperator)],
            1);
  // Not clear: the lease side reads it as such.
  EXPECT_FALSE(engine_->LeaseTermsFor(kEp).clear);
}

TEST_F(LifecycleTest, AStateTransferKeepsTheUnavailableClockAndTheDisable) {
  config_.default_policy.disable.after_unavailable = absl::Seconds(60);
  Make();
  Trip();
  ASSERT_TRUE(DisableByHand(kOther).ok());
  std::vector<EndpointRecord> records;
  engine_->ExportState([&](absl::Span<const EndpointRecord> part) {
    records.insert(records.end(), part.begin(), part.end());
  });
  const std::vector<engine::Disable> disabled = engine_->disables().List();
  ASSERT_EQ(disabled.size(), 1u);

  clock_.Advance(absl::Seconds(30));
  Engine other(config_, &clock_, &random_);
  other.ImportState(records);
  ASSERT_TRUE(other.RestoreDisable(disabled[0]).ok());
  absl::StatusOr<EndpointSnapshot> o = other.Inspect(kOther);
  ASSERT_TRUE(o.ok());
  ASSERT_TRUE(o->disable.has_value());
  EXPECT_EQ(o->disable->since, disabled[0].since);
  // 30 s more away makes 60: the clock kept running across the transfer.
  clock_.Advance(absl::Seconds(30));
  other.RefreshCondition(kEp);
  absl::StatusOr<EndpointSnapshot> e = other.Inspect(kEp);
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE(e->disable.has_value());
}

// --- The table's limits ----------------------------------------------------

TEST(DisableTableTest, CountsAreBoundedAndSweptWhenFull) {
  DisableTable t;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  for (int i = 0; i < DisableTable::kMaxCounting; ++i) {
    ASSERT_FALSE(t.CountStrike(absl::StrCat("k", i), t0, 2, absl::Minutes(1)));
  }
  EXPECT_FALSE(t.CountStrike("new", t0, 1, absl::Minutes(1)))
      << "full: not counted";
  EXPECT_EQ(t.counting(), DisableTable::kMaxCounting);
  // Once their window has passed, a new endpoint's count sweeps them.
  EXPECT_TRUE(t.CountStrike("new", t0 + absl::Minutes(2), 1, absl::Minutes(1)));
  EXPECT_EQ(t.counting(), 0);
  // Counted ones go on while there is room.
  EXPECT_FALSE(t.CountStrike("k1", t0, 2, absl::Minutes(1)));
  EXPECT_TRUE(t.CountStrike("k1", t0, 2, absl::Minutes(1)));
}

TEST(DisableTableTest, AtMostMaxDisabledAndReplacingIsAlwaysAllowed) {
  DisableTable t;
  for (int i = 0; i < DisableTable::kMaxDisabled; ++i) {
    engine::Disable d;
    d.endpoint = absl::StrCat("k", i);
    ASSERT_TRUE(t.Put(d).ok());
  }
  engine::Disable extra;
  extra.endpoint = "extra";
  EXPECT_TRUE(absl::IsResourceExhausted(t.Put(extra)));
  engine::Disable again;
  again.endpoint = "k7";
  again.reason = std::string(1000, 'r');
  EXPECT_TRUE(t.Put(again).ok());
  EXPECT_EQ(t.Find("k7")->reason.size(), DisableTable::kMaxTextBytes);
  EXPECT_EQ(t.size(), DisableTable::kMaxDisabled);
}

}  // namespace
}  // namespace stagger::engine
