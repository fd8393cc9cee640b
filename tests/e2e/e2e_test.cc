// End-to-end: the real staggerd binary on a loopback port, driven through
// the client library (CoordinatorClient, RetryLoop) from several threads.
//
// One staggerd per test process (ctest runs each test as its own process),
// started with tests/e2e/testdata/e2e.textproto: embedded defaults, plus a
// fast breaker for endpoints under "e2e/fast/". Tests that stop or restart
// the server start their own. Endpoint keys are unique per test so tests
// never share state.
//
// Timing: the coordinator's clock is real. Assertions about when a retry may
// happen use the ordering of real instants only (a request sent at t0, a
// decision received at t1 >= the server's decision time), so they hold on
// any machine however slow; bounds about "promptly" carry generous slack.
// Calls expecting the coordinator's answer use a 10 s deadline, so that a
// loaded machine does not turn them into local fallbacks.
#include <algorithm>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "tests/testing/requests.h"
#include "client/retry_loop.h"
#include "client/wait.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "stagger/v1/coordinator.grpc.pb.h"
#include "tests/testing/make_client.h"
#include "tests/testing/staggerd_process.h"

#ifndef STAGGERD_PATH
#error "STAGGERD_PATH must name the staggerd binary (set by CMake)"
#endif
#ifndef E2E_CONFIG
#error "E2E_CONFIG must name tests/e2e/testdata/e2e.textproto (set by CMake)"
#endif

namespace stagger::e2e {
namespace {

using stagger::testing::AdmitOf;
using stagger::testing::ReportOf;
using client::ClientDecision;
using client::CoordinatorClient;
using client::DecisionSource;
using engine::Outcome;
using engine::Reason;
using engine::Verdict;
using stagger::testing::MakeClient;
using stagger::testing::StaggerdProcess;
using ::testing::HasSubstr;

constexpr absl::Duration kCoordinatorDeadline = absl::Seconds(10);
constexpr absl::Duration kRecheck = absl::Seconds(1);
constexpr absl::Duration kSlack = absl::Seconds(2);  // slow, noisy machines
// Embedded defaults (core/engine/engine_config.h) the tests rely on.
constexpr absl::Duration kInitialJitter = absl::Milliseconds(50);
constexpr absl::Duration kBase = absl::Milliseconds(200);
constexpr int kTripAfter = 20;  // breaker.consecutive_failures

// A staggerd on 127.0.0.1:<port> (0: the kernel picks one), up and
// listening. Metrics off, so parallel tests never fight over :9464.
absl::StatusOr<std::unique_ptr<StaggerdProcess>> StartStaggerd(
    int port = 0, bool with_config = true) {
  std::vector<std::string> args = {absl::StrCat("--address=127.0.0.1:", port),
                                   "--metrics_address="};
  if (with_config) args.insert(args.end(), {"--config", E2E_CONFIG});
  return StaggerdProcess::Start(STAGGERD_PATH, std::move(args),
                                /*timeout=*/absl::Seconds(30));
}

// Runs fn(0..n-1) on n threads and joins them.
void RunThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(fn, i);
  for (auto& t : threads) t.join();
}

// A decision with the client-side instant it was received.
struct Received {
  ClientDecision d;
  absl::Time at;
  absl::Time Until() const {  // PROCEED: when the retry may go; DEFER: when
    return d.verdict == Verdict::kDefer ? at + d.defer_for : at + d.delay;
  }
};

class E2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto s = StartStaggerd();
    if (s.ok()) {
      server_ = s->release();
    } else {
      start_error_ = new std::string(s.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) {
      absl::StatusOr<int> code = server_->Terminate(absl::Seconds(30));
      EXPECT_TRUE(code.ok() && *code == 0)
          << (code.ok() ? absl::StrCat("exit ", *code) : code.status().ToString());
      delete server_;
      server_ = nullptr;
    }
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr) << (start_error_ ? *start_error_ : "");
    client_ = MakeClient(server_->target(), kCoordinatorDeadline, kRecheck);
    ASSERT_NE(client_, nullptr);
    stub_ = v1::RetryCoordinator::NewStub(grpc::CreateChannel(
        server_->target(), grpc::InsecureChannelCredentials()));
  }

  // Read-only inspection of one endpoint.
  v1::EndpointState Inspect(const std::string& endpoint) {
    v1::GetEndpointRequest req;
    req.set_endpoint(endpoint);
    v1::GetEndpointResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kCoordinatorDeadline));
    grpc::Status s = stub_->GetEndpoint(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.state();
  }

  static StaggerdProcess* server_;
  static std::string* start_error_;
  std::unique_ptr<CoordinatorClient> client_;
  std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
};
StaggerdProcess* E2ETest::server_ = nullptr;
std::string* E2ETest::start_error_ = nullptr;

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}
absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

TEST_F(E2ETest, FirstAttemptsGetInitialJitter) {
  // 4 threads x 25 fresh endpoints, one shared client: every first attempt
  // is told PROCEED(INITIAL_JITTER) with a delay in [0, 50ms), and the
  // delays are spread, not equal.
  constexpr int kThreads = 4, kEach = 25;
  absl::Mutex mu;
  std::vector<absl::Duration> delays;
  RunThreads(kThreads, [&](int t) {
    for (int i = 0; i < kEach; ++i) {
      absl::StatusOr<ClientDecision> d =
          client_->Admit(AdmitOf(absl::StrCat("e2e/jitter/", t, "/", i), 1));
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->source, DecisionSource::kCoordinator);
      EXPECT_EQ(d->verdict, Verdict::kProceed);
      EXPECT_EQ(d->reason, Reason::kInitialJitter);
      EXPECT_EQ(d->attempt, 1);
      EXPECT_GE(d->delay, absl::ZeroDuration());
      EXPECT_LT(d->delay, kInitialJitter);
      absl::MutexLock l(&mu);
      delays.push_back(d->delay);
    }
  });
  ASSERT_EQ(delays.size(), static_cast<size_t>(kThreads * kEach));
  const std::set<absl::Duration> distinct(delays.begin(), delays.end());
  EXPECT_GT(distinct.size(), delays.size() / 2);
  const auto [lo, hi] = std::minmax_element(delays.begin(), delays.end());
  EXPECT_GT(*hi - *lo, absl::Milliseconds(10));  // spread over the window
}

TEST_F(E2ETest, FailuresGetSpreadDelays) {
  // A first failure on a fresh endpoint: decorrelated jitter from the base,
  // uniform in [200ms, 600ms]; 100 of them are spread over that range.
  constexpr int kThreads = 4, kEach = 25;
  absl::Mutex mu;
  std::vector<absl::Duration> delays;
  RunThreads(kThreads, [&](int t) {
    for (int i = 0; i < kEach; ++i) {
      const std::string key = absl::StrCat("e2e/backoff/", t, "/", i);
      ASSERT_TRUE(client_->Admit(AdmitOf(key, 1)).ok());
      absl::StatusOr<ClientDecision> d =
          client_->Report(ReportOf(key, 1, Outcome::kRetryableFailure));
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->source, DecisionSource::kCoordinator);
      EXPECT_EQ(d->verdict, Verdict::kProceed);
      EXPECT_EQ(d->reason, Reason::kBackoff);
      EXPECT_EQ(d->attempt, 2);
      EXPECT_GE(d->delay, kBase);
      EXPECT_LE(d->delay, 3 * kBase);
      absl::MutexLock l(&mu);
      delays.push_back(d->delay);
    }
  });
  const std::set<absl::Duration> distinct(delays.begin(), delays.end());
  EXPECT_GT(distinct.size(), delays.size() / 2);
  const auto [lo, hi] = std::minmax_element(delays.begin(), delays.end());
  EXPECT_GT(*hi - *lo, absl::Milliseconds(100));
}

TEST_F(E2ETest, BreakerOpensAfterConsecutiveFailuresAndDeferralsAreSpread) {
  // 4 workers report 12 failures each on one endpoint (48 > 20): the
  // breaker trips after 20 consecutive failures, and from then on every
  // failure is answered DEFER(CIRCUIT_OPEN): the parked delivery checks in
  // again at max(T, now + 0.5s) + uniform [0, 1s), T the half-open instant
  // (open_base 250ms +-20%), deferral.spread 1s (release_pacer.h).
  const std::string key = "e2e/breaker/default";
  constexpr int kThreads = 4, kEach = 12;
  absl::Mutex mu;
  std::vector<Received> got;
  const absl::Time start = absl::Now();
  RunThreads(kThreads, [&](int t) {
    for (int i = 0; i < kEach; ++i) {
      absl::StatusOr<ClientDecision> d =
          client_->Report(ReportOf(key, 1, Outcome::kRetryableFailure));
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->source, DecisionSource::kCoordinator);
      absl::MutexLock l(&mu);
      got.push_back({*d, absl::Now()});
    }
  });
  const absl::Time end = absl::Now();

  int proceeds = 0;
  std::vector<absl::Time> defer_until;
  for (const Received& r : got) {
    if (r.d.verdict == Verdict::kProceed) {
      ++proceeds;
      EXPECT_EQ(r.d.reason, Reason::kBackoff);
    } else {
      EXPECT_EQ(r.d.verdict, Verdict::kDefer);
      EXPECT_EQ(r.d.reason, Reason::kCircuitOpen);
      EXPECT_EQ(r.d.attempt, 2);  // the next attempt; none consumed
      defer_until.push_back(r.Until());
    }
  }
  // 19 failures below the threshold were answered with a backoff; the 20th
  // tripped the breaker.
  EXPECT_EQ(proceeds, kTripAfter - 1);
  ASSERT_EQ(defer_until.size(), got.size() - proceeds);
  for (absl::Time t : defer_until) {
    // Not before half the spread after the report (the worker's copy of
    // the instant is never before the server's).
    EXPECT_GE(t, start + absl::Milliseconds(500));
    // At most max(250ms + 20%, 0.5s) + the 1s spread, plus slack.
    EXPECT_LE(t, end + absl::Milliseconds(500) + absl::Seconds(1) + kSlack);
  }
  // Spread: parked deliveries come back at different instants.
  const std::set<absl::Time> distinct(defer_until.begin(), defer_until.end());
  EXPECT_GT(distinct.size(), defer_until.size() * 3 / 4);
  const auto [lo, hi] = std::minmax_element(defer_until.begin(),
                                            defer_until.end());
  EXPECT_GT(*hi - *lo, absl::Milliseconds(100));

  // Admit defers too, and the inspection RPC shows the breaker open.
  absl::StatusOr<ClientDecision> a = client_->Admit(AdmitOf(key, 2));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->verdict, Verdict::kDefer);
  EXPECT_EQ(a->reason, Reason::kCircuitOpen);
  EXPECT_EQ(Inspect(key).breaker_state(), v1::OPEN);
}

TEST_F(E2ETest, BreakerHalfOpensAndClosesAfterProbeSuccesses) {
  // "e2e/fast/" policy: trips after 5 consecutive failures, open ~200ms,
  // 3 fleet-wide probes, closes after 2 probe successes.
  const std::string key = "e2e/fast/breaker";
  // failures 1..4: backoff; failure 5: the breaker trips.
  for (int i = 1; i <= 5; ++i) {
    absl::StatusOr<ClientDecision> d =
        client_->Report(ReportOf(key, 1, Outcome::kRetryableFailure));
    ASSERT_TRUE(d.ok()) << d.status();
    if (i < 5) {
      EXPECT_EQ(d->verdict, Verdict::kProceed) << "failure " << i;
    } else {
      EXPECT_EQ(d->verdict, Verdict::kDefer) << "failure " << i;
      EXPECT_EQ(d->reason, Reason::kCircuitOpen);
    }
  }
  EXPECT_EQ(Inspect(key).breaker_state(), v1::OPEN);

  // Park as told and come back, like a worker; bounded. The first Admit
  // after the open period is a probe.
  client::Canceller never;
  const absl::Time give_up_at = absl::Now() + absl::Seconds(30);
  absl::StatusOr<ClientDecision> probe;
  while (absl::Now() < give_up_at) {
    probe = client_->Admit(AdmitOf(key, 2));
    ASSERT_TRUE(probe.ok()) << probe.status();
    if (probe->verdict != Verdict::kDefer) break;
    EXPECT_TRUE(probe->reason == Reason::kCircuitOpen ||
                probe->reason == Reason::kHalfOpenBusy)
        << engine::ReasonName(probe->reason);
    never.WaitFor(probe->defer_for);
  }
  ASSERT_EQ(probe->verdict, Verdict::kProceed);
  EXPECT_EQ(probe->reason, Reason::kHalfOpenProbe);
  EXPECT_EQ(Inspect(key).breaker_state(), v1::HALF_OPEN);

  // Probe 1 succeeds: still half-open (needs 2).
  absl::StatusOr<ClientDecision> d = client_->Report(ReportOf(key, 2, Outcome::kSuccess));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->verdict, Verdict::kDone);
  EXPECT_EQ(Inspect(key).breaker_state(), v1::HALF_OPEN);
  // Probe 2 (another delivery) succeeds: closed.
  probe = client_->Admit(AdmitOf(key, 3));
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(probe->reason, Reason::kHalfOpenProbe);
  d = client_->Report(ReportOf(key, 3, Outcome::kSuccess));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->verdict, Verdict::kDone);
  EXPECT_EQ(Inspect(key).breaker_state(), v1::CLOSED);
  // Closed: a retry is admitted without a probe.
  d = client_->Admit(AdmitOf(key, 2));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->verdict, Verdict::kProceed);
  EXPECT_EQ(d->reason, Reason::kAdmitted);
}

TEST_F(E2ETest, RetryAfterFromOneWorkerHoldsEveryWorker) {
  const std::string key = "e2e/retry-after";
  constexpr absl::Duration kRetryAfter = absl::Seconds(2);

  // Worker A is rate limited with "Retry-After: 2". Its own retry waits at
  // least that long.
  auto a = MakeClient(server_->target(), kCoordinatorDeadline, kRecheck);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->Admit(AdmitOf(key, 1)).ok());
  const absl::Time sent = absl::Now();  // before the server saw the report
  absl::StatusOr<ClientDecision> da =
      a->Report(ReportOf(key, 1, Outcome::kRateLimited, kRetryAfter));
  ASSERT_TRUE(da.ok()) << da.status();
  EXPECT_EQ(da->source, DecisionSource::kCoordinator);
  EXPECT_EQ(da->verdict, Verdict::kProceed);
  EXPECT_EQ(da->reason, Reason::kRetryAfter);
  EXPECT_GE(da->delay, kRetryAfter);
  const absl::Time window_end = sent + kRetryAfter;  // the earliest it can be

  // Four other workers (their own clients, as if other processes) fail on
  // the same endpoint: each retry is scheduled no earlier than A's window,
  // and an Admit for a retry is deferred to after it.
  constexpr int kWorkers = 4;
  absl::Mutex mu;
  std::vector<absl::Time> retry_at;
  RunThreads(kWorkers, [&](int w) {
    auto c = MakeClient(server_->target(), kCoordinatorDeadline, kRecheck);
    ASSERT_NE(c, nullptr);
    const std::string delivery = absl::StrCat("worker ", w);
    ASSERT_TRUE(c->Admit(AdmitOf(key, 1)).ok()) << delivery;  // first attempts go
    absl::StatusOr<ClientDecision> d =
        c->Report(ReportOf(key, 1, Outcome::kRetryableFailure));
    const absl::Time received = absl::Now();
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->verdict, Verdict::kProceed) << delivery;
    // RETRY_AFTER: the window set the delay. BACKOFF: the shared
    // decorrelated delay (grown by the fleet's failures) was already
    // longer than what was left of the window. Either way: not before it.
    EXPECT_TRUE(d->reason == Reason::kRetryAfter ||
                d->reason == Reason::kBackoff)
        << delivery << ": " << engine::ReasonName(d->reason);
    EXPECT_GE(received + d->delay, window_end) << delivery;

    absl::StatusOr<ClientDecision> admit = c->Admit(AdmitOf(key, 2));
    const absl::Time admit_received = absl::Now();
    ASSERT_TRUE(admit.ok()) << admit.status();
    if (admit_received < window_end) {
      EXPECT_EQ(admit->verdict, Verdict::kDefer) << delivery;
      EXPECT_EQ(admit->reason, Reason::kRetryAfterWindow) << delivery;
      EXPECT_GE(admit_received + admit->defer_for, window_end) << delivery;
    }
    absl::MutexLock l(&mu);
    retry_at.push_back(received + d->delay);
  });
  // The fleet's retries are spread after the window, not stacked on it.
  const std::set<absl::Time> distinct(retry_at.begin(), retry_at.end());
  EXPECT_EQ(distinct.size(), retry_at.size());
  // The endpoint's state shows the window.
  EXPECT_GE(FromProto(Inspect(key).retry_after_until()), window_end);
}

TEST_F(E2ETest, SuccessResetsTheBackoffState) {
  const std::string key = "e2e/reset";
  // Three consecutive failures of one delivery grow the shared state.
  absl::Duration last;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    absl::StatusOr<ClientDecision> d =
        client_->Report(ReportOf(key, attempt, Outcome::kRetryableFailure));
    ASSERT_TRUE(d.ok()) << d.status();
    ASSERT_EQ(d->verdict, Verdict::kProceed);
    EXPECT_EQ(d->reason, Reason::kBackoff);
    last = d->delay;
  }
  v1::EndpointState s = Inspect(key);
  EXPECT_EQ(FromProto(s.previous_delay()), last);  // prev = the last delay
  EXPECT_EQ(s.consecutive_failures(), 3);

  // Attempt 4 succeeds: DONE, and the state is back to the base.
  absl::StatusOr<ClientDecision> d = client_->Report(ReportOf(key, 4, Outcome::kSuccess));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->verdict, Verdict::kDone);
  EXPECT_EQ(d->reason, Reason::kSucceeded);
  s = Inspect(key);
  EXPECT_LE(FromProto(s.previous_delay()), kBase);
  EXPECT_EQ(s.consecutive_failures(), 0);
  // The next failure starts from the base again: [200ms, 600ms].
  d = client_->Report(ReportOf(key, 1, Outcome::kRetryableFailure));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->reason, Reason::kBackoff);
  EXPECT_GE(d->delay, kBase);
  EXPECT_LE(d->delay, 3 * kBase);
}

TEST_F(E2ETest, BadInputIsInvalidArgumentNamingTheField) {
  struct Case {
    std::string what;
    std::function<absl::StatusOr<ClientDecision>()> call;
    std::string field;
  };
  const std::string long_key(5000, 'k');
  const std::vector<Case> cases = {
      {"empty endpoint", [&] { return client_->Admit(AdmitOf("", 1)); }, "endpoint"},
      {"oversized endpoint", [&] { return client_->Admit(AdmitOf(long_key, 1)); },
       "endpoint"},
      {"attempt 0", [&] { return client_->Admit(AdmitOf("e2e/bad", 0)); }, "attempt"},
      {"negative attempt",
       [&] { return client_->Report(ReportOf("e2e/bad", -3, Outcome::kSuccess)); },
       "attempt"},
      {"unknown outcome",
       [&] {
         return client_->Report(ReportOf("e2e/bad", 1, static_cast<Outcome>(42)));
       },
       "outcome"},
      {"negative Retry-After",
       [&] {
         return client_->Report(ReportOf("e2e/bad", 1, Outcome::kRateLimited,
                                absl::Seconds(-1)));
       },
       "retry_after"},
      {"absurd Retry-After",
       [&] {
         return client_->Report(ReportOf("e2e/bad", 1, Outcome::kRateLimited,
                                absl::Hours(24 * 365)));
       },
       "retry_after"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ClientDecision> d = c.call();
    ASSERT_FALSE(d.ok()) << c.what;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(std::string(d.status().message()), HasSubstr(c.field))
        << c.what;
  }
  // An empty batch, too.
  absl::StatusOr<std::vector<ClientDecision>> b = client_->AdmitBatch({});
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  // The coordinator answered every one of them: the client stays on it.
  EXPECT_TRUE(client_->coordinator_up());
  absl::StatusOr<ClientDecision> ok = client_->Admit(AdmitOf("e2e/bad", 1));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->source, DecisionSource::kCoordinator);
}

TEST_F(E2ETest, RetryLoopDeliversThroughStaggerd) {
  // Four workers, each one delivery to its own endpoint that fails twice
  // and then succeeds; real waits (the coordinator's delays, ~0.2-2 s).
  constexpr int kWorkers = 4;
  client::Canceller canceller;
  std::vector<client::LoopResult> results(kWorkers);
  RunThreads(kWorkers, [&](int w) {
    client::RetryLoopOptions o;
    o.deadline = absl::Now() + absl::Minutes(2);
    o.on_decision = [&](const client::DecisionEvent& e) {
      EXPECT_EQ(e.decision.source, DecisionSource::kCoordinator);
    };
    client::RetryLoop loop(client_.get(), &canceller, o);
    results[w] = loop.Run(absl::StrCat("e2e/loop/", w), [&](const client::Attempt& a) {
      return client::AttemptResult{
          a.number < 3 ? Outcome::kRetryableFailure : Outcome::kSuccess,
          std::nullopt};
    });
  });
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(results[w].end, client::LoopEnd::kSucceeded)
        << "worker " << w << ": " << client::LoopEndName(results[w].end);
    EXPECT_EQ(results[w].attempts_made, 3) << "worker " << w;
  }
}

// --- Tests with their own staggerd -----------------------------------------

TEST(StaggerdLifecycleTest, SigtermDrainsAndExitsZero) {
  auto server = StartStaggerd(0, /*with_config=*/false);  // embedded defaults
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = MakeClient((*server)->target(), kCoordinatorDeadline, kRecheck);
  ASSERT_NE(c, nullptr);
  RunThreads(2, [&](int t) {
    for (int i = 0; i < 10; ++i) {
      absl::StatusOr<ClientDecision> d =
          c->Admit(AdmitOf(absl::StrCat("e2e/sigterm/", t), 1));
      ASSERT_TRUE(d.ok()) << d.status();
      EXPECT_EQ(d->source, DecisionSource::kCoordinator);
    }
  });
  absl::StatusOr<int> code = (*server)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

// Polls Admit until the coordinator answers it (a 50ms deadline may miss on a
// loaded machine: that is a local fallback, and we ask again), within
// `timeout`. Returns how long it took, or nullopt.
std::optional<absl::Duration> AwaitCoordinator(CoordinatorClient& c,
                                               const std::string& key,
                                               absl::Duration timeout) {
  client::Canceller never;
  const absl::Time start = absl::Now();
  while (absl::Now() - start < timeout) {
    absl::StatusOr<ClientDecision> d = c.Admit(AdmitOf(key, 1));
    if (d.ok() && d->source == DecisionSource::kCoordinator) {
      return absl::Now() - start;
    }
    never.WaitFor(absl::Milliseconds(20));
  }
  return std::nullopt;
}

TEST(StaggerdLifecycleTest, FallbackWhileStoppedThenBackAfterRestart) {
  constexpr absl::Duration kDeadline = absl::Milliseconds(50);
  auto server = StartStaggerd(0, /*with_config=*/false);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->grpc_port();
  auto c = MakeClient((*server)->target(), kDeadline,
                      /*recheck=*/absl::Milliseconds(200));
  ASSERT_NE(c, nullptr);

  // 1. Up: the coordinator answers.
  ASSERT_TRUE(AwaitCoordinator(*c, "e2e/fallback", absl::Seconds(30)));

  // 2. Stop it. Decisions keep coming from 4 threads, decided locally, each
  //    within the deadline + slack.
  absl::StatusOr<int> code = (*server)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  server->reset();
  absl::Mutex mu;
  absl::Duration slowest;
  int local = 0;
  RunThreads(4, [&](int t) {
    for (int i = 0; i < 25; ++i) {
      // One delivery per key: the local engine's breaker for a key that
      // failed 20 times would (rightly) defer, which is not this test.
      const std::string key = absl::StrCat("e2e/fallback/", t, "/", i);
      absl::Time t0 = absl::Now();
      absl::StatusOr<ClientDecision> a = c->Admit(AdmitOf(key, 1));
      const absl::Duration admit_took = absl::Now() - t0;
      t0 = absl::Now();
      absl::StatusOr<ClientDecision> r =
          c->Report(ReportOf(key, 1, Outcome::kRetryableFailure));
      const absl::Duration report_took = absl::Now() - t0;
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(a->source, DecisionSource::kLocalFallback);
      EXPECT_EQ(r->source, DecisionSource::kLocalFallback);
      EXPECT_EQ(a->verdict, Verdict::kProceed);  // the local engine's answer
      EXPECT_EQ(a->reason, Reason::kInitialJitter);
      EXPECT_LT(admit_took, kDeadline + kSlack);
      EXPECT_LT(report_took, kDeadline + kSlack);
      absl::MutexLock l(&mu);
      slowest = std::max({slowest, admit_took, report_took});
      local += 2;
    }
  });
  EXPECT_EQ(local, 200);
  EXPECT_FALSE(c->coordinator_up());
  std::fprintf(stderr, "slowest call while staggerd was down: %s\n",
               absl::FormatDuration(slowest).c_str());

  // 3. Restart it on the same port: the client goes back to it (the next
  //    probe after the 200ms recheck interval, once the channel reconnects).
  auto again = StartStaggerd(port, /*with_config=*/false);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ((*again)->grpc_port(), port);
  std::optional<absl::Duration> back =
      AwaitCoordinator(*c, "e2e/fallback", absl::Seconds(30));
  ASSERT_TRUE(back.has_value()) << "client never returned to the coordinator";
  std::fprintf(stderr, "back on the coordinator after %s\n",
               absl::FormatDuration(*back).c_str());
  EXPECT_TRUE(c->coordinator_up());
  code = (*again)->Terminate(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

}  // namespace
}  // namespace stagger::e2e
