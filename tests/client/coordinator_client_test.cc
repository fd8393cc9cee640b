// CoordinatorClient against an in-process FakeCoordinator: conversions,
// deadlines, fail-open / fail-closed fallback, the recheck interval and the
// return to the coordinator, INVALID_ARGUMENT not masked, metrics, batches.
//
// Time: the client's clock is a FakeClock (recheck interval, local engine,
// DEFER conversion), so the state machine moves only when a test advances
// it. Only the RPC deadline is real time; tests that expect the
// coordinator's answer give it a generous deadline, and the one test about
// the deadline asserts "within the deadline + generous slack".
#include "client/coordinator_client.h"
#include "tests/testing/requests.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "tests/testing/fake_coordinator.h"
#include "tests/client/metrics_reader.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/make_client.h"

namespace stagger::client {
namespace {

using engine::Outcome;
using engine::Reason;
using engine::Verdict;
using stagger::testing::FakeClock;
using stagger::testing::AdmitOf;
using stagger::testing::ReportOf;
using stagger::testing::FakeCoordinatorServer;
using stagger::testing::MakeClient;
using stagger::testing::MakeDecision;
using stagger::testing::MetricValue;
using ::testing::HasSubstr;

// A deadline long enough that a loaded machine still gets the fake's answer.
constexpr absl::Duration kGenerousDeadline = absl::Seconds(10);
// Slack on real-time bounds: a slow, noisy CI machine.
constexpr absl::Duration kSlack = absl::Seconds(2);

class CoordinatorClientTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.ok()); }

  ClientOptions Options() {
    ClientOptions o;
    o.target = server_.target();
    o.call_deadline = kGenerousDeadline;
    o.clock = &clock_;
    o.random = &random_;
    o.registry = registry_;
    return o;
  }
  double Metric(const std::string& name,
                const std::map<std::string, std::string>& labels = {}) {
    return MetricValue(*registry_, name, labels).value_or(-1);
  }

  FakeCoordinatorServer server_;
  FakeClock clock_;
  engine::SeededRandom random_{7};
  std::shared_ptr<prometheus::Registry> registry_ =
      std::make_shared<prometheus::Registry>();
};

TEST_F(CoordinatorClientTest, SendsRequestsAndConvertsDecisions) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  const absl::Time now = clock_.Now();

  // Admit: the fake answers PROCEED(17ms, INITIAL_JITTER).
  server_.service().SetAdmit(
      [](const v1::AdmitRequest& req, v1::AdmitResponse* resp) {
        *resp->mutable_decision() = MakeDecision(
            v1::PROCEED, v1::INITIAL_JITTER, req.attempt(),
            absl::Milliseconds(17));
        return grpc::Status::OK;
      });
  AdmitRequest admit;
  admit.endpoint = "https://e.example/a";
  admit.attempt = 1;
  admit.deadline = now + absl::Seconds(30);
  admit.first_attempt_time = now - absl::Seconds(1);
  absl::StatusOr<ClientDecision> d = client->Admit(admit);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kProceed);
  EXPECT_EQ(d->reason, Reason::kInitialJitter);
  EXPECT_EQ(d->delay, absl::Milliseconds(17));
  EXPECT_EQ(d->attempt, 1);
  EXPECT_EQ(d->source, DecisionSource::kCoordinator);
  EXPECT_TRUE(d->fallback_cause.ok());
  // ... and the request carried every field.
  const v1::AdmitRequest seen = server_.service().last_admit();
  EXPECT_EQ(seen.endpoint(), "https://e.example/a");
  EXPECT_EQ(seen.attempt(), 1);
  EXPECT_EQ(seen.deadline().seconds(), absl::ToUnixSeconds(now) + 30);
  EXPECT_EQ(seen.first_attempt_time().seconds(), absl::ToUnixSeconds(now) - 1);

  // Report: the fake answers DEFER with defer_for=3s and a defer_until on a
  // server clock 26 years behind ours; the client trusts defer_for.
  server_.service().SetReport(
      [](const v1::ReportRequest& req, v1::ReportResponse* resp) {
        v1::Decision dec =
            MakeDecision(v1::DEFER, v1::CIRCUIT_OPEN, req.attempt() + 1);
        dec.mutable_defer_for()->set_seconds(3);
        dec.mutable_defer_until()->set_seconds(946684800);  // 2000-01-01
        *resp->mutable_decision() = dec;
        return grpc::Status::OK;
      });
  d = client->Report(ReportOf("https://e.example/a", 2, Outcome::kRateLimited,
                     absl::Milliseconds(2500)));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kDefer);
  EXPECT_EQ(d->reason, Reason::kCircuitOpen);
  EXPECT_EQ(d->attempt, 3);
  EXPECT_EQ(d->defer_for, absl::Seconds(3));
  EXPECT_EQ(d->defer_until, now + absl::Seconds(3));
  const v1::ReportRequest rep = server_.service().last_report();
  EXPECT_EQ(rep.outcome(), v1::RATE_LIMITED);
  EXPECT_EQ(rep.attempt(), 2);
  EXPECT_EQ(rep.retry_after().seconds(), 2);
  EXPECT_EQ(rep.retry_after().nanos(), 500000000);
  EXPECT_FALSE(rep.has_deadline());  // not given: not sent
  EXPECT_FALSE(rep.has_first_attempt_time());
}

TEST_F(CoordinatorClientTest, DeferUntilIsUsedWhenDeferForIsMissing) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  const absl::Time at = clock_.Now() + absl::Seconds(5);
  server_.service().SetAdmit(
      [at](const v1::AdmitRequest& req, v1::AdmitResponse* resp) {
        v1::Decision dec =
            MakeDecision(v1::DEFER, v1::RETRY_AFTER_WINDOW, req.attempt());
        dec.mutable_defer_until()->set_seconds(absl::ToUnixSeconds(at));
        *resp->mutable_decision() = dec;
        return grpc::Status::OK;
      });
  absl::StatusOr<ClientDecision> d = client->Admit(AdmitOf("e", 2));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kDefer);
  EXPECT_EQ(d->defer_until, at);
  EXPECT_EQ(d->defer_for, absl::Seconds(5));
}

TEST_F(CoordinatorClientTest, SlowCoordinatorFallsBackWithinTheDeadline) {
  ClientOptions o = Options();
  o.call_deadline = absl::Milliseconds(50);
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  // The coordinator now takes up to a minute to answer.
  server_.service().Hold(absl::Minutes(1));

  const absl::Time start = absl::Now();
  absl::StatusOr<ClientDecision> d = client->Admit(AdmitOf("https://slow.example", 1));
  const absl::Duration took = absl::Now() - start;

  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_LT(took, absl::Milliseconds(50) + kSlack);
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
  EXPECT_EQ(d->fallback_cause.code(), absl::StatusCode::kDeadlineExceeded);
  // The local engine answered a first attempt: initial jitter in [0, 50ms).
  EXPECT_EQ(d->verdict, Verdict::kProceed);
  EXPECT_EQ(d->reason, Reason::kInitialJitter);
  EXPECT_GE(d->delay, absl::ZeroDuration());
  EXPECT_LT(d->delay, absl::Milliseconds(50));
  EXPECT_EQ(Metric("stagger_client_coordinator_errors_total",
                   {{"code", "DEADLINE_EXCEEDED"}}),
            1);
}

TEST_F(CoordinatorClientTest, FailOpenDecidesWithTheLocalPolicy) {
  ClientOptions o = Options();
  o.local_policy.default_policy.backoff.base = absl::Milliseconds(100);
  o.local_policy.default_policy.backoff.cap = absl::Seconds(1);
  o.local_policy.default_policy.backoff.max_attempts = 3;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  server_.service().FailEverything(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "down for the test"));

  // attempt 1: initial jitter, decided locally because of UNAVAILABLE.
  absl::StatusOr<ClientDecision> d = client->Admit(AdmitOf("e", 1));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
  EXPECT_EQ(d->fallback_cause.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(d->fallback_cause.message()),
              HasSubstr("down for the test"));
  EXPECT_EQ(d->verdict, Verdict::kProceed);
  EXPECT_EQ(d->reason, Reason::kInitialJitter);
  EXPECT_LT(d->delay, absl::Milliseconds(50));

  // attempt 1 failed: decorrelated backoff from base=100ms, within
  // [base, 3*base]. The coordinator is now considered down: not called.
  d = client->Report(ReportOf("e", 1, Outcome::kRetryableFailure));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
  EXPECT_EQ(d->fallback_cause.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(d->verdict, Verdict::kProceed);
  EXPECT_EQ(d->reason, Reason::kBackoff);
  EXPECT_EQ(d->attempt, 2);
  EXPECT_GE(d->delay, absl::Milliseconds(100));
  EXPECT_LE(d->delay, absl::Milliseconds(300));

  // attempt 3 of max 3 failed: the local attempt limit gives up.
  d = client->Report(ReportOf("e", 3, Outcome::kRetryableFailure));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kGiveUp);
  EXPECT_EQ(d->reason, Reason::kAttemptsExhausted);

  // A non-retryable outcome gives up too; a success is done.
  d = client->Report(ReportOf("e", 1, Outcome::kNotRetryable));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kGiveUp);
  EXPECT_EQ(d->reason, Reason::kNotRetryable);
  d = client->Report(ReportOf("e", 2, Outcome::kSuccess));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kDone);
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);

  // Only the first call reached the coordinator.
  EXPECT_EQ(server_.service().calls(), 1);
}

// The fallback is the server's policy code: with the same configuration,
// clock and seed, a local engine decides exactly what the client decided.
TEST_F(CoordinatorClientTest, FallbackDecidesExactlyLikeTheEngine) {
  ClientOptions o = Options();
  o.local_policy.default_policy.breaker.consecutive_failures = 4;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  server_.service().FailEverything(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));

  FakeClock twin_clock(clock_.Now());
  engine::SeededRandom twin_random(7);  // the seed of random_
  engine::Engine twin(o.local_policy, &twin_clock, &twin_random);

  // A failing endpoint: admit, fail, ... until the breaker (4 failures)
  // opens. Each step both sides decide; 10ms pass between steps.
  for (int step = 0; step < 6; ++step) {
    const int attempt = step + 1;
    engine::AdmitInput a;
    a.endpoint = "twin";
    a.attempt = attempt;
    absl::StatusOr<ClientDecision> got = client->Admit(a);
    absl::StatusOr<engine::Decision> want = twin.Admit(a);
    ASSERT_TRUE(got.ok() && want.ok());
    EXPECT_EQ(got->source, DecisionSource::kLocalFallback);
    EXPECT_EQ(got->verdict, want->verdict) << "admit step " << step;
    EXPECT_EQ(got->reason, want->reason) << "admit step " << step;
    EXPECT_EQ(got->delay, want->delay) << "admit step " << step;
    EXPECT_EQ(got->defer_until, want->defer_until) << "admit step " << step;

    engine::ReportInput r;
    r.endpoint = "twin";
    r.attempt = attempt;
    r.outcome = Outcome::kRetryableFailure;
    got = client->Report(r);
    want = twin.Report(r);
    ASSERT_TRUE(got.ok() && want.ok());
    EXPECT_EQ(got->verdict, want->verdict) << "report step " << step;
    EXPECT_EQ(got->reason, want->reason) << "report step " << step;
    EXPECT_EQ(got->delay, want->delay) << "report step " << step;
    EXPECT_EQ(got->defer_until, want->defer_until) << "report step " << step;
    clock_.Advance(absl::Milliseconds(10));
    twin_clock.Advance(absl::Milliseconds(10));
  }
  // And the sequence did reach the breaker (the comparison covered it).
  absl::StatusOr<engine::EndpointSnapshot> s = twin.Inspect("twin");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->breaker_state, engine::BreakerState::kOpen);
}

TEST_F(CoordinatorClientTest, FailClosedDefersForTheRecheckInterval) {
  ClientOptions o = Options();
  o.fallback = FallbackMode::kFailClosed;
  o.recheck_interval = absl::Seconds(2);
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  server_.service().FailEverything(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  const absl::Time now = clock_.Now();

  // Admit: DEFER(CIRCUIT_OPEN) over [2s, 3s), same attempt.
  std::set<absl::Duration> defers;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<ClientDecision> d = client->Admit(AdmitOf("e", 2));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
    EXPECT_EQ(d->verdict, Verdict::kDefer);
    EXPECT_EQ(d->reason, Reason::kCircuitOpen);
    EXPECT_EQ(d->attempt, 2);
    EXPECT_GE(d->defer_for, absl::Seconds(2));
    EXPECT_LT(d->defer_for, absl::Seconds(3));
    EXPECT_EQ(d->defer_until, now + d->defer_for);
    defers.insert(d->defer_for);
  }
  // Spread: parked deliveries do not all come back at the same instant.
  EXPECT_GT(defers.size(), 10u);

  // A failure report defers the *next* attempt (none consumed).
  absl::StatusOr<ClientDecision> d =
      client->Report(ReportOf("e", 2, Outcome::kRetryableFailure));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kDefer);
  EXPECT_EQ(d->attempt, 3);
  // Answers that send nothing need no coordinator: success is done, a
  // non-retryable outcome gives up.
  d = client->Report(ReportOf("e", 3, Outcome::kSuccess));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kDone);
  EXPECT_EQ(d->reason, Reason::kSucceeded);
  d = client->Report(ReportOf("e", 3, Outcome::kNotRetryable));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->verdict, Verdict::kGiveUp);
  EXPECT_EQ(d->reason, Reason::kNotRetryable);
  // Bad input is still an error, not a deferral.
  d = client->Admit(AdmitOf("", 1));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorClientTest, RecheckIntervalThenBackToTheCoordinator) {
  ClientOptions o = Options();
  o.recheck_interval = absl::Seconds(1);
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto& fake = server_.service();
  fake.FailEverything(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));

  // t=0: the call reaches the coordinator, fails: local. calls=1, down.
  absl::StatusOr<ClientDecision> d = client->Admit(AdmitOf("e", 1));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
  EXPECT_EQ(fake.calls(), 1);
  EXPECT_FALSE(client->coordinator_up());
  EXPECT_EQ(Metric("stagger_client_coordinator_up"), 0);

  // t=0..999ms: down, the coordinator is not called (no deadline paid).
  for (int i = 0; i < 5; ++i) {
    d = client->Admit(AdmitOf("e", 1));
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
    EXPECT_THAT(std::string(d->fallback_cause.message()),
                HasSubstr("considered down"));
    clock_.Advance(absl::Milliseconds(150));  // t = 150 .. 750ms
  }
  EXPECT_EQ(fake.calls(), 1);

  // The coordinator recovers, but the interval is not over: still local.
  fake.SetAdmit([](const v1::AdmitRequest& req, v1::AdmitResponse* resp) {
    *resp->mutable_decision() =
        MakeDecision(v1::PROCEED, v1::ADMITTED, req.attempt());
    return grpc::Status::OK;
  });
  d = client->Admit(AdmitOf("e", 1));  // t=750ms
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
  EXPECT_EQ(fake.calls(), 1);

  // t=1s: the interval is over; this call probes, the coordinator answers:
  // back on the coordinator. calls=2, up.
  clock_.Advance(absl::Milliseconds(250));
  d = client->Admit(AdmitOf("e", 1));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->source, DecisionSource::kCoordinator);
  EXPECT_EQ(fake.calls(), 2);
  EXPECT_TRUE(client->coordinator_up());
  EXPECT_EQ(Metric("stagger_client_coordinator_up"), 1);

  // And stays there: every call goes to it.
  d = client->Admit(AdmitOf("e", 1));
  EXPECT_EQ(d->source, DecisionSource::kCoordinator);
  EXPECT_EQ(fake.calls(), 3);
}

TEST_F(CoordinatorClientTest, FailedProbeKeepsItDownForAnotherInterval) {
  ClientOptions o = Options();
  o.recheck_interval = absl::Seconds(1);
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  auto& fake = server_.service();
  fake.FailEverything(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));

  ASSERT_TRUE(client->Admit(AdmitOf("e", 1)).ok());  // t=0: calls=1, down
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(client->Admit(AdmitOf("e", 1)).ok());  // t=1s: probe, fails: calls=2
  EXPECT_EQ(fake.calls(), 2);
  clock_.Advance(absl::Milliseconds(900));
  ASSERT_TRUE(client->Admit(AdmitOf("e", 1)).ok());  // t=1.9s: down until 2s
  EXPECT_EQ(fake.calls(), 2);
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_TRUE(client->Admit(AdmitOf("e", 1)).ok());  // t=2s: probe again: calls=3
  EXPECT_EQ(fake.calls(), 3);
  EXPECT_EQ(Metric("stagger_client_coordinator_errors_total",
                   {{"code", "UNAVAILABLE"}}),
            3);
}

TEST_F(CoordinatorClientTest, InvalidArgumentIsReturnedNotMasked) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  server_.service().SetAdmit([](const v1::AdmitRequest&, v1::AdmitResponse*) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "attempt: must be in [1, 1000], got 0");
  });

  absl::StatusOr<ClientDecision> d = client->Admit(AdmitOf("e", 0));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("attempt"));
  // The coordinator answered: it is up, nothing fell back or was counted.
  EXPECT_TRUE(client->coordinator_up());
  EXPECT_EQ(Metric("stagger_client_coordinator_up"), 1);
  EXPECT_EQ(Metric("stagger_client_fallback_decisions_total",
                   {{"call", "admit"}, {"verdict", "PROCEED"}}),
            0);
  // The next call still goes to the coordinator.
  d = client->Admit(AdmitOf("e", 0));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server_.service().admit_calls(), 2);
}

TEST_F(CoordinatorClientTest, BadInputIsAnErrorInFallbackToo) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  server_.service().FailEverything(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  ASSERT_TRUE(client->Admit(AdmitOf("e", 1)).ok());  // now considered down

  absl::StatusOr<ClientDecision> d = client->Admit(AdmitOf("", 1));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("endpoint"));
  d = client->Report(ReportOf("e", 1, Outcome::kRateLimited, absl::Seconds(-1)));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("retry_after"));
  d = client->Report(ReportOf("e", 1, static_cast<Outcome>(42)));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("outcome"));
}

TEST_F(CoordinatorClientTest, UnusableResponseFallsBack) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  // OK, but no decision in the response.
  server_.service().SetAdmit(
      [](const v1::AdmitRequest&, v1::AdmitResponse*) {
        return grpc::Status::OK;
      });
  absl::StatusOr<ClientDecision> d = client->Admit(AdmitOf("e", 1));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
  EXPECT_EQ(d->fallback_cause.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(Metric("stagger_client_coordinator_errors_total",
                   {{"code", "INTERNAL"}}),
            1);

  // An unknown verdict (a newer server?) is unusable as well.
  clock_.Advance(absl::Seconds(1));  // recheck
  server_.service().SetAdmit(
      [](const v1::AdmitRequest&, v1::AdmitResponse* resp) {
        resp->mutable_decision()->set_verdict(static_cast<v1::Verdict>(9));
        return grpc::Status::OK;
      });
  d = client->Admit(AdmitOf("e", 1));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
  EXPECT_EQ(Metric("stagger_client_coordinator_errors_total",
                   {{"code", "INTERNAL"}}),
            2);
}

TEST_F(CoordinatorClientTest, MetricsCountFallbacksAndErrors) {
  ClientOptions o = Options();
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  const std::string kFallback = "stagger_client_fallback_decisions_total";
  const std::string kErrors = "stagger_client_coordinator_errors_total";

  // Every series exists from the start, at zero; up=1.
  EXPECT_EQ(Metric(kFallback, {{"call", "admit"}, {"verdict", "PROCEED"}}), 0);
  EXPECT_EQ(Metric(kFallback, {{"call", "report"}, {"verdict", "GIVE_UP"}}), 0);
  EXPECT_EQ(Metric(kErrors, {{"code", "UNAVAILABLE"}}), 0);
  EXPECT_EQ(Metric(kErrors, {{"code", "DEADLINE_EXCEEDED"}}), 0);
  EXPECT_EQ(Metric("stagger_client_coordinator_up"), 1);

  // Coordinator answers are not fallbacks.
  ASSERT_TRUE(client->Admit(AdmitOf("e", 1)).ok());
  EXPECT_EQ(Metric(kFallback, {{"call", "admit"}, {"verdict", "PROCEED"}}), 0);

  // Down: one error (UNAVAILABLE), then local decisions are counted by call
  // and verdict.
  server_.service().FailEverything(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  ASSERT_TRUE(client->Admit(AdmitOf("e", 1)).ok());                         // PROCEED
  ASSERT_TRUE(client->Report(ReportOf("e", 1, Outcome::kRetryableFailure)).ok());
  ASSERT_TRUE(client->Report(ReportOf("e", 2, Outcome::kSuccess)).ok());     // DONE
  ASSERT_TRUE(client->Report(ReportOf("e", 1, Outcome::kNotRetryable)).ok());  // GIVE_UP
  EXPECT_EQ(Metric(kErrors, {{"code", "UNAVAILABLE"}}), 1);
  EXPECT_EQ(Metric(kFallback, {{"call", "admit"}, {"verdict", "PROCEED"}}), 1);
  EXPECT_EQ(Metric(kFallback, {{"call", "report"}, {"verdict", "PROCEED"}}), 1);
  EXPECT_EQ(Metric(kFallback, {{"call", "report"}, {"verdict", "DONE"}}), 1);
  EXPECT_EQ(Metric(kFallback, {{"call", "report"}, {"verdict", "GIVE_UP"}}), 1);
  EXPECT_EQ(Metric("stagger_client_coordinator_up"), 0);

  // A second client on the same registry joins the same families.
  auto second = MakeClient(o);
  ASSERT_NE(second, nullptr);
  for (const char* name : {"stagger_client_fallback_decisions_total",
                           "stagger_client_coordinator_errors_total",
                           "stagger_client_coordinator_up"}) {
    EXPECT_EQ(stagger::testing::FamilyCount(*registry_, name), 1) << name;
  }
  // No endpoint key ever appears as a label value.
  for (const prometheus::MetricFamily& f : registry_->Collect()) {
    for (const prometheus::ClientMetric& m : f.metric) {
      for (const prometheus::ClientMetric::Label& l : m.label) {
        EXPECT_NE(l.value, "e") << f.name;
      }
    }
  }
}

TEST_F(CoordinatorClientTest, PrivateRegistryWhenNoneIsGiven) {
  ClientOptions o = Options();
  o.registry = nullptr;
  auto client = MakeClient(o);
  ASSERT_NE(client, nullptr);
  ASSERT_NE(client->metrics_registry(), nullptr);
  EXPECT_EQ(MetricValue(*client->metrics_registry(),
                        "stagger_client_coordinator_up"),
            1);
}

TEST_F(CoordinatorClientTest, BatchesGoToTheCoordinatorOrFallBackWhole) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  std::vector<engine::AdmitInput> items(3);
  items[0].endpoint = "a";
  items[1].endpoint = "b";
  items[2].endpoint = "c";

  // Coordinator: one decision per item, in order.
  absl::StatusOr<std::vector<ClientDecision>> got = client->AdmitBatch(items);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  for (const ClientDecision& d : *got) {
    EXPECT_EQ(d.source, DecisionSource::kCoordinator);
  }

  // Down: decided locally, item by item.
  server_.service().FailEverything(
      grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"));
  got = client->AdmitBatch(items);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  for (const ClientDecision& d : *got) {
    EXPECT_EQ(d.source, DecisionSource::kLocalFallback);
    EXPECT_EQ(d.reason, Reason::kInitialJitter);
  }
  // A bad item fails the whole batch, naming it.
  items[1].endpoint = "";
  got = client->AdmitBatch(items);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("items[1].endpoint"));
  // So does an empty batch, in the server's own words.
  got = client->AdmitBatch({});
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(),
            "items: a batch holds 1..1000 items (limits.max_batch_size), "
            "got 0");

  std::vector<engine::ReportInput> reports(2);
  reports[0].endpoint = "a";
  reports[0].outcome = Outcome::kSuccess;
  reports[1].endpoint = "b";
  reports[1].outcome = Outcome::kRetryableFailure;
  absl::StatusOr<std::vector<ClientDecision>> rep =
      client->ReportBatch(reports);
  ASSERT_TRUE(rep.ok()) << rep.status();
  ASSERT_EQ(rep->size(), 2u);
  EXPECT_EQ((*rep)[0].verdict, Verdict::kDone);
  EXPECT_EQ((*rep)[1].verdict, Verdict::kProceed);
  EXPECT_EQ((*rep)[1].reason, Reason::kBackoff);
}

TEST(CoordinatorClientOptionsTest, CreateRejectsBadOptions) {
  ClientOptions o;
  o.target = "";
  o.call_deadline = absl::ZeroDuration();
  o.recheck_interval = absl::Seconds(-1);
  o.local_policy.default_policy.backoff.base = absl::Seconds(10);
  o.local_policy.default_policy.backoff.cap = absl::Seconds(1);
  auto c = CoordinatorClient::Create(o);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(c.status().message());
  EXPECT_THAT(msg, HasSubstr("target"));
  EXPECT_THAT(msg, HasSubstr("call_deadline"));
  EXPECT_THAT(msg, HasSubstr("recheck_interval"));
  EXPECT_THAT(msg, HasSubstr("local_policy.default_policy.backoff"));
}

TEST(CoordinatorClientOptionsTest, UnreachableTargetFallsBackAtOnce) {
  // Nothing listens on port 1 of loopback: connection refused, UNAVAILABLE
  // (or the deadline), and a local decision within the deadline + slack.
  ClientOptions o;
  o.target = "127.0.0.1:1";
  o.call_deadline = absl::Milliseconds(50);
  auto c = CoordinatorClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Time start = absl::Now();
  absl::StatusOr<ClientDecision> d = (*c)->Admit(AdmitOf("e", 1));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(50) + kSlack);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->source, DecisionSource::kLocalFallback);
  EXPECT_TRUE(d->fallback_cause.code() == absl::StatusCode::kUnavailable ||
              d->fallback_cause.code() == absl::StatusCode::kDeadlineExceeded)
      << d->fallback_cause;
}

}  // namespace
}  // namespace stagger::client
