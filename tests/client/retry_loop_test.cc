// RetryLoop in what is the C++ client's own: on_decision's events, real
// waits and a real waiting call cut short by the Canceller from another
// thread, Canceller subscriptions, and the loop over a real
// CoordinatorClient whose coordinator is down (the full engine as its
// fallback, fake clock). The loop's answers to each decision are
// tests/conformance/ (every client runs them).
//
// Scripted tests use ScriptedCoordinator: the exact sequence of calls the
// loop must make, each with its answer. Waits go to FakeWaiter, which
// records each requested delay and advances the fake clock instead of
// sleeping.
#include "client/retry_loop.h"

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_coordinator.h"
#include "tests/testing/fake_clock.h"

namespace stagger::client {
namespace {

using engine::Outcome;
using engine::Reason;
using engine::Verdict;
using stagger::testing::FakeClock;
using ::testing::ElementsAre;

ClientDecision Proceed(int attempt, Reason reason, absl::Duration delay) {
  ClientDecision d;
  d.verdict = Verdict::kProceed;
  d.reason = reason;
  d.delay = delay;
  d.attempt = attempt;
  return d;
}
ClientDecision Defer(int attempt, Reason reason, absl::Duration for_) {
  ClientDecision d;
  d.verdict = Verdict::kDefer;
  d.reason = reason;
  d.defer_for = for_;
  d.attempt = attempt;
  return d;
}
ClientDecision Final(Verdict v, int attempt, Reason reason) {
  ClientDecision d;
  d.verdict = v;
  d.reason = reason;
  d.attempt = attempt;
  return d;
}

// The calls the loop must make, in order, and what each is answered.
class ScriptedCoordinator final : public Coordinator {
 public:
  struct Step {
    Call call;
    int attempt;
    std::optional<Outcome> outcome;  // Report: the expected outcome
    absl::StatusOr<ClientDecision> answer;
  };
  void Expect(Step s) { script_.push_back(std::move(s)); }
  bool done() const { return script_.empty(); }

  std::vector<engine::ReportInput> reports;  // as received (endpoint dropped)
  std::vector<engine::AdmitInput> admits;

  using Coordinator::Admit;
  using Coordinator::Report;
  absl::StatusOr<ClientDecision> Admit(const engine::AdmitInput& in) override {
    admits.push_back(in);
    admits.back().endpoint = {};
    return Next(Call::kAdmit, in.attempt, std::nullopt);
  }
  absl::StatusOr<ClientDecision> Report(const engine::ReportInput& in) override {
    reports.push_back(in);
    reports.back().endpoint = {};
    return Next(Call::kReport, in.attempt, in.outcome);
  }

 private:
  absl::StatusOr<ClientDecision> Next(Call call, int attempt,
                                      std::optional<Outcome> outcome) {
    if (script_.empty()) {
      ADD_FAILURE() << "unexpected " << CallName(call) << " #" << attempt;
      return absl::InternalError("script exhausted");
    }
    Step s = script_.front();
    script_.pop_front();
    EXPECT_EQ(call, s.call) << "attempt " << attempt;
    EXPECT_EQ(attempt, s.attempt) << CallName(call);
    EXPECT_EQ(outcome, s.outcome) << CallName(call) << " #" << attempt;
    return s.answer;
  }
  std::deque<Step> script_;
};

// Records waits and advances the fake clock; optionally cancels at the
// n-th wait (1-based), which then reports cancellation like WaitFor does.
struct FakeWaiter {
  FakeClock* clock;
  Canceller* canceller;
  int cancel_at = 0;
  std::vector<absl::Duration> waits;

  WaitFn Fn() {
    return [this](absl::Duration d, const Canceller& c) {
      waits.push_back(d);
      if (cancel_at > 0 && static_cast<int>(waits.size()) == cancel_at) {
        canceller->Cancel();
      }
      if (c.cancelled()) return false;
      clock->Advance(d);
      return true;
    };
  }
};

class RetryLoopTest : public ::testing::Test {
 protected:
  RetryLoopOptions Options() {
    RetryLoopOptions o;
    o.clock = &clock_;
    o.wait = waiter_.Fn();
    o.on_decision = [this](const DecisionEvent& e) { events_.push_back(e); };
    return o;
  }
  // An attempt callback that answers outcomes in order and records the
  // attempt numbers and the clock at each send.
  AttemptFn Attempts(std::vector<AttemptResult> results) {
    results_ = std::move(results);
    return [this](const Attempt& a) {
      sent_.push_back(a.number);
      sent_at_.push_back(clock_.Now());
      if (sent_.size() > results_.size()) {
        ADD_FAILURE() << "unexpected attempt " << a.number;
        return AttemptResult{};
      }
      return results_[sent_.size() - 1];
    };
  }

  FakeClock clock_;
  Canceller canceller_;
  FakeWaiter waiter_{&clock_, &canceller_, 0, {}};
  ScriptedCoordinator coord_;
  std::vector<DecisionEvent> events_;
  std::vector<AttemptResult> results_;
  std::vector<int> sent_;
  std::vector<absl::Time> sent_at_;
};

TEST_F(RetryLoopTest, OnDecisionSeesEveryDecisionAndTheLoopWaitsEachDelay) {
  const absl::Time t0 = clock_.Now();
  // Admit #1 -> jitter 10ms; #1 fails (500) -> backoff 200ms; Admit #2 ->
  // now; #2 is rate limited with Retry-After 1s -> 1.5s; Admit #3 -> now;
  // #3 succeeds -> DONE.
  coord_.Expect({Call::kAdmit, 1, {}, Proceed(1, Reason::kInitialJitter,
                                              absl::Milliseconds(10))});
  coord_.Expect({Call::kReport, 1, Outcome::kRetryableFailure,
                 Proceed(2, Reason::kBackoff, absl::Milliseconds(200))});
  coord_.Expect({Call::kAdmit, 2, {}, Proceed(2, Reason::kAdmitted,
                                              absl::ZeroDuration())});
  coord_.Expect({Call::kReport, 2, Outcome::kRateLimited,
                 Proceed(3, Reason::kRetryAfter, absl::Milliseconds(1500))});
  coord_.Expect({Call::kAdmit, 3, {}, Proceed(3, Reason::kAdmitted,
                                              absl::ZeroDuration())});
  coord_.Expect({Call::kReport, 3, Outcome::kSuccess,
                 Final(Verdict::kDone, 3, Reason::kSucceeded)});

  RetryLoop loop(&coord_, &canceller_, Options());
  const LoopResult r = loop.Run(
      "e", Attempts({{Outcome::kRetryableFailure, std::nullopt},
                     {Outcome::kRateLimited, absl::Seconds(1)},
                     {Outcome::kSuccess, std::nullopt}}));

  EXPECT_EQ(r.end, LoopEnd::kSucceeded);
  EXPECT_EQ(r.attempts_made, 3);
  EXPECT_TRUE(coord_.done());
  EXPECT_THAT(sent_, ElementsAre(1, 2, 3));
  // Every delay was waited, in order, before the call it delayed (a zero
  // delay is no wait).
  EXPECT_THAT(waiter_.waits,
              ElementsAre(absl::Milliseconds(10), absl::Milliseconds(200),
                          absl::Milliseconds(1500)));
  EXPECT_THAT(sent_at_,
              ElementsAre(t0 + absl::Milliseconds(10),
                          t0 + absl::Milliseconds(210),
                          t0 + absl::Milliseconds(1710)));
  // The Retry-After went to the coordinator with report #2.
  ASSERT_EQ(coord_.reports.size(), 3u);
  EXPECT_EQ(coord_.reports[1].retry_after, absl::Seconds(1));
  EXPECT_FALSE(coord_.reports[0].retry_after.has_value());
  // first_attempt_time: unknown for Admit #1, then the send time of #1.
  EXPECT_EQ(coord_.admits[0].first_attempt_time, absl::InfinitePast());
  EXPECT_EQ(coord_.admits[1].first_attempt_time, t0 + absl::Milliseconds(10));
  EXPECT_EQ(coord_.reports[2].first_attempt_time,
            t0 + absl::Milliseconds(10));
  EXPECT_EQ(r.first_attempt_time, t0 + absl::Milliseconds(10));
  // Every decision was shown to on_decision.
  ASSERT_EQ(events_.size(), 6u);
  EXPECT_EQ(events_[3].call, Call::kReport);
  EXPECT_EQ(events_[3].attempt, 2);
  EXPECT_EQ(events_[3].outcome, Outcome::kRateLimited);
  EXPECT_EQ(events_[3].decision.reason, Reason::kRetryAfter);
  ASSERT_TRUE(r.last_decision.has_value());
  EXPECT_EQ(r.last_decision->verdict, Verdict::kDone);
}

TEST_F(RetryLoopTest, AFailureThatUsedUpNoAttemptIsRetriedUnderItsNumber) {
  // #3 is refused by the endpoint's limiter (429, RateLimit-Reset: 2): the
  // coordinator's pace let too much through, so it answers about attempt 3
  // again (DEFER PACED). The loop admits the attempt the decision names,
  // not #4: overloads and the fleet's probes never use up an attempt.
  coord_.Expect({Call::kAdmit, 3, {}, Proceed(3, Reason::kAdmitted,
                                              absl::ZeroDuration())});
  coord_.Expect({Call::kReport, 3, Outcome::kRateLimited,
                 Proceed(3, Reason::kBackoff, absl::Milliseconds(50))});
  coord_.Expect({Call::kAdmit, 3, {}, Proceed(3, Reason::kAdmitted,
                                              absl::ZeroDuration())});
  coord_.Expect({Call::kReport, 3, Outcome::kSuccess,
                 Final(Verdict::kDone, 3, Reason::kSucceeded)});
  RetryLoopOptions o = Options();
  o.first_attempt = 3;
  RetryLoop loop(&coord_, &canceller_, o);
  const LoopResult r =
      loop.Run("e", Attempts({{Outcome::kRateLimited, std::nullopt,
                               absl::Seconds(2)},
                              {Outcome::kSuccess, std::nullopt}}));
  EXPECT_EQ(r.end, LoopEnd::kSucceeded);
  EXPECT_TRUE(coord_.done());
  EXPECT_THAT(sent_, ElementsAre(3, 3));
  // The RateLimit-Reset went to the coordinator with the report.
  ASSERT_EQ(coord_.reports.size(), 2u);
  EXPECT_EQ(coord_.reports[0].ratelimit_reset, absl::Seconds(2));
  EXPECT_FALSE(coord_.reports[0].retry_after.has_value());
}

TEST_F(RetryLoopTest, ADeferAboutTheSameAttemptResumesFromIt) {
  // #5 refused by a limiter: DEFER(PACED) about #5 again. Parked past the
  // park limit, the run ends deferred, to resume at #5, not #6.
  coord_.Expect({Call::kAdmit, 5, {}, Proceed(5, Reason::kAdmitted,
                                              absl::ZeroDuration())});
  coord_.Expect({Call::kReport, 5, Outcome::kRateLimited,
                 Defer(5, Reason::kPaced, absl::Milliseconds(30))});
  RetryLoopOptions o = Options();
  o.first_attempt = 5;
  o.waiting = false;
  o.park_limit = absl::ZeroDuration();
  RetryLoop loop(&coord_, &canceller_, o);
  const LoopResult d =
      loop.Run("e", Attempts({{Outcome::kRateLimited, std::nullopt}}));
  EXPECT_EQ(d.end, LoopEnd::kDeferred);
  EXPECT_EQ(d.next_attempt, 5);
}

TEST_F(RetryLoopTest, RealWaitIsInterruptedAtOnce) {
  // The default wait (WaitFor, real time): a one-hour backoff is cut short
  // by Cancel() from another thread.
  coord_.Expect({Call::kAdmit, 1, {}, Proceed(1, Reason::kInitialJitter,
                                              absl::ZeroDuration())});
  coord_.Expect({Call::kReport, 1, Outcome::kRetryableFailure,
                 Proceed(2, Reason::kBackoff, absl::Hours(1))});
  RetryLoopOptions o;
  o.clock = &clock_;
  absl::Notification sent;
  RetryLoop loop(&coord_, &canceller_, o);
  LoopResult r;
  std::thread runner([&] {
    r = loop.Run("e", [&](const Attempt&) {
      sent.Notify();
      return AttemptResult{Outcome::kRetryableFailure, std::nullopt};
    });
  });
  ASSERT_TRUE(sent.WaitForNotificationWithTimeout(absl::Seconds(30)));
  const absl::Time cancel_at = absl::Now();
  canceller_.Cancel();
  runner.join();
  EXPECT_LT(absl::Now() - cancel_at, absl::Seconds(10));  // not an hour
  EXPECT_EQ(r.end, LoopEnd::kCancelled);
  EXPECT_EQ(r.next_attempt, 2);
}

TEST(RetryLoopWithClientTest, LocalFallbackDrivesTheLoopToSuccess) {
  stagger::testing::FakeCoordinatorServer server;
  ASSERT_TRUE(server.ok());
  server.service().FailEverything(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  FakeClock clock;
  engine::SeededRandom random(11);
  ClientOptions o;
  o.target = server.target();
  o.clock = &clock;
  o.random = &random;
  auto client = CoordinatorClient::Create(o);
  ASSERT_TRUE(client.ok()) << client.status();

  Canceller canceller;
  FakeWaiter waiter{&clock, &canceller, 0, {}};
  RetryLoopOptions lo;
  lo.clock = &clock;
  lo.wait = waiter.Fn();
  std::vector<DecisionEvent> events;
  lo.on_decision = [&](const DecisionEvent& e) { events.push_back(e); };
  RetryLoop loop(client->get(), &canceller, lo);

  int calls = 0;
  const LoopResult r = loop.Run("https://flaky.example", [&](const Attempt& a) {
    ++calls;
    EXPECT_EQ(a.number, calls);
    return AttemptResult{calls <= 3 ? Outcome::kRetryableFailure
                                    : Outcome::kSuccess,
                         std::nullopt};
  });

  EXPECT_EQ(r.end, LoopEnd::kSucceeded);
  EXPECT_EQ(r.attempts_made, 4);
  for (const DecisionEvent& e : events) {
    EXPECT_EQ(e.decision.source, DecisionSource::kLocalFallback);
  }
  // Waits: jitter [0, 50ms) (none if it drew zero), then for each failure
  // a decorrelated backoff within [base=200ms, 3 * previous]; each retry is
  // admitted at once (no wait).
  ASSERT_GE(waiter.waits.size(), 3u);
  const size_t first_backoff = waiter.waits.size() - 3;
  ASSERT_LE(first_backoff, 1u);
  if (first_backoff == 1) {
    EXPECT_LT(waiter.waits[0], absl::Milliseconds(50));
  }
  absl::Duration prev = absl::Milliseconds(200);
  for (size_t i = first_backoff; i < waiter.waits.size(); ++i) {
    EXPECT_GE(waiter.waits[i], absl::Milliseconds(200)) << i;
    EXPECT_LE(waiter.waits[i], 3 * prev) << i;
    prev = waiter.waits[i];
  }
}

// ---- A waiting call, cancelled -------------------------------------------

ClientDecision Waits(ClientDecision d) {
  d.wait_supported = true;
  return d;
}

class HoldingCoordinator final : public Coordinator {
 public:
  absl::StatusOr<ClientDecision> Admit(const engine::AdmitInput& in) override {
    return Waits(Defer(in.attempt, Reason::kCircuitOpen, absl::Seconds(30)));
  }
  absl::StatusOr<ClientDecision> Report(const engine::ReportInput&) override {
    return absl::InternalError("no attempt is sent");
  }
  absl::StatusOr<ClientDecision> AdmitWaiting(const engine::AdmitInput& in,
                                              const Canceller* cancel) override {
    held.Notify();
    absl::Notification cancelled;
    Canceller::Subscription sub = cancel->OnCancel([&] { cancelled.Notify(); });
    cancelled.WaitForNotification();
    return absl::CancelledError("cancelled while waiting");
  }
  absl::Notification held;
};

TEST_F(RetryLoopTest, CancellingAWaitingAdmitEndsTheRunAtOnce) {
  HoldingCoordinator coord;
  RetryLoop loop(&coord, &canceller_, Options());
  LoopResult r;
  std::thread run([&] { r = loop.Run("e", Attempts({})); });
  coord.held.WaitForNotification();
  canceller_.Cancel();
  run.join();
  EXPECT_EQ(r.end, LoopEnd::kCancelled);
  EXPECT_TRUE(sent_.empty());
}

TEST(CancellerTest, ASubscriptionRunsOnceOnCancelAndNotAfterItIsGone) {
  Canceller c;
  int ran = 0;
  {
    Canceller::Subscription gone = c.OnCancel([&] { ran += 100; });
  }
  Canceller::Subscription kept = c.OnCancel([&] { ++ran; });
  c.Cancel();
  c.Cancel();
  EXPECT_EQ(ran, 1);
  // Subscribing after the cancel runs at once.
  Canceller::Subscription late = c.OnCancel([&] { ran += 10; });
  EXPECT_EQ(ran, 11);
}

}  // namespace
}  // namespace stagger::client
