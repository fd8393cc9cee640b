// Waiting admission end to end: the real staggerd holds waiting Admits
// (AdmitRequest.wait) and the client library's RetryLoop uses them. Parked
// deliveries are recalled when the breaker's probe succeeds, not at their
// drawn check-in times; a staggerd killed with calls waiting leaves the
// loops to the fallback, which releases none before the coordinator's
// deferral ends (docs/CLIENT_CONTRACT.md), with nothing lost; a drain answers every
// waiting call before the port closes; a worker that cancels frees its
// place. Real time on loopback; no upper bound on any latency is asserted.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/retry_loop.h"
#include "client/wait.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"
#include "tests/testing/http_get.h"
#include "tests/testing/make_client.h"
#include "tests/testing/prom_text.h"
#include "tests/testing/staggerd_process.h"

namespace stagger::client {
namespace {

using engine::Outcome;
using engine::Reason;
using engine::Verdict;
using stagger::testing::MakeClient;
using stagger::testing::PollUntil;
using stagger::testing::StaggerdProcess;

constexpr char kEp[] = "https://waited.example";

// A staggerd whose breaker trips on 3 failures and stays open `open_for`.
absl::StatusOr<std::unique_ptr<StaggerdProcess>> StartStaggerd(
    const std::string& dir, absl::Duration open_for, int port = 0) {
  const std::string config = dir + "/config.textproto";
  const int64_t s = absl::ToInt64Seconds(open_for);
  EXPECT_TRUE(stagger::testing::WriteFile(
      config, absl::StrCat("default_policy { breaker { consecutive_failures: 3 "
                           "half_open_probes: 1 close_after_successes: 1 "
                           "open_base { seconds: ", s, " } open_max { seconds: ",
                           s, " } } }\n")));
  return StaggerdProcess::Start(
      STAGGERD_PATH,
      {absl::StrCat("--address=127.0.0.1:", port), "--metrics_address=127.0.0.1:0",
       "--config=" + config, "--drain_timeout=30s"},
      absl::Seconds(30));
}

void Trip(CoordinatorClient& c) {
  for (int i = 0; i < 3; ++i) {
    ReportRequest r;
    r.endpoint = kEp;
    r.outcome = Outcome::kRetryableFailure;
    ASSERT_TRUE(c.Report(r).ok());
  }
}

// stagger_waiting_calls on the server's /metrics (-1 if unreadable).
double Waiting(const StaggerdProcess& s) {
  absl::StatusOr<stagger::testing::HttpResponse> page =
      stagger::testing::HttpGet(s.metrics_port(), "/metrics");
  if (!page.ok()) return -1;
  return stagger::testing::PromText(page->body).Value("stagger_waiting_calls");
}

// Runs `n` deliveries of attempt 2 (parked) through RetryLoop on `c`, each
// attempt answered by `endpoint_up()`; returns the reasons of the Admits
// that let each attempt go.
struct Runs {
  std::vector<LoopResult> results;
  std::vector<Reason> go_reasons;
  int local_answers = 0;  // decisions the fallback made
  absl::Mutex mu;
};
void Deliver(CoordinatorClient& c, int n, const Canceller& cancel,
             const std::function<bool()>& endpoint_up, Runs* out) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&] {
      RetryLoopOptions o;
      o.first_attempt = 2;
      o.on_decision = [&](const DecisionEvent& e) {
        absl::MutexLock l(&out->mu);
        if (e.call == Call::kAdmit && e.decision.verdict == Verdict::kProceed) {
          out->go_reasons.push_back(e.decision.reason);
        }
        if (e.decision.source == DecisionSource::kLocalFallback) {
          ++out->local_answers;
        }
      };
      RetryLoop loop(&c, &cancel, o);
      LoopResult r = loop.Run(kEp, [&](const Attempt&) {
        return AttemptResult{endpoint_up() ? Outcome::kSuccess
                                           : Outcome::kRetryableFailure,
                             std::nullopt};
      });
      absl::MutexLock l(&out->mu);
      out->results.push_back(std::move(r));
    });
  }
  for (auto& t : threads) t.join();
}

TEST(WaitingE2ETest, ParkedDeliveriesAreRecalledWhenTheProbeSucceeds) {
  stagger::testing::ScratchDir dir;
  auto server = StartStaggerd(dir.path(), absl::Seconds(3));
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = MakeClient((*server)->target(), absl::Seconds(10), absl::Seconds(1));
  Trip(*c);
  Canceller never;
  Runs runs;
  std::thread deliveries([&] { Deliver(*c, 20, never, [] { return true; }, &runs); });
  // They wait at the coordinator, not in sleeps.
  EXPECT_TRUE(PollUntil([&] { return Waiting(**server) >= 19; }));
  deliveries.join();
  ASSERT_EQ(runs.results.size(), 20u);
  for (const LoopResult& r : runs.results) {
    EXPECT_EQ(r.end, LoopEnd::kSucceeded) << LoopEndName(r.end);
  }
  // One probe, then releases of held calls (or, for a call that re-asked
  // after its wait ran out while the probe was out, ADMITTED on arrival);
  // none went on a PACED check-in time it slept out.
  int probes = 0, released = 0, admitted = 0;
  std::string reasons;
  for (Reason r : runs.go_reasons) {
    probes += r == Reason::kHalfOpenProbe;
    released += r == Reason::kReleased;
    admitted += r == Reason::kAdmitted;
    absl::StrAppend(&reasons, ReasonName(r), " ");
  }
  EXPECT_EQ(probes, 1) << reasons;
  EXPECT_EQ(probes + released + admitted, 20) << reasons;
  // How many are RELEASED rather than ADMITTED on a re-ask depends on the
  // machine's timing (the pace grows per round; a slow machine lets more
  // waits run out first): at least one release shows the recall.
  EXPECT_GE(released, 1) << reasons;
  EXPECT_EQ(Waiting(**server), 0);
}

TEST(WaitingE2ETest, AStaggerdKilledWithCallsWaitingReleasesNoneAndLosesNone) {
  stagger::testing::ScratchDir dir;
  auto server = StartStaggerd(dir.path(), absl::Minutes(10));
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions o;
  o.target = (*server)->target();
  o.call_deadline = absl::Seconds(10);
  auto c = MakeClient(o);
  Trip(*c);
  Canceller stop;
  Runs runs;
  std::atomic<int> sent{0};
  std::thread deliveries([&] {
    Deliver(*c, 10, stop, [&] { return ++sent > 0; }, &runs);
  });
  EXPECT_TRUE(PollUntil([&] { return Waiting(**server) >= 10; }));
  (*server)->Kill();
  // Every waiting call fails over to the client's fallback, which knows
  // nothing of the outage and would admit each delivery at once; the loop
  // first sleeps the rest of the coordinator's deferral (the breaker's ten
  // minutes): no herd on the endpoint the coordinator held back.
  EXPECT_TRUE(PollUntil([&] {
    absl::MutexLock l(&runs.mu);
    return runs.local_answers >= 10;
  }));
  stop.Cancel();  // shutdown: every owed sleep ends at once
  deliveries.join();
  EXPECT_EQ(sent.load(), 0);
  ASSERT_EQ(runs.results.size(), 10u);
  for (const LoopResult& r : runs.results) {
    EXPECT_EQ(r.end, LoopEnd::kCancelled) << LoopEndName(r.end);
    EXPECT_EQ(r.next_attempt, 2) << "nothing lost: it resumes where it was";
  }
}

TEST(WaitingE2ETest, DestroyingAClientEndsItsWaitingCallsFirst) {
  // A client destroyed with a waiting call held by staggerd cancels the
  // call and returns once gRPC has let go of it: the callback runs before
  // the client is gone, not on a destroyed one, and not a minute later.
  stagger::testing::ScratchDir dir;
  auto server = StartStaggerd(dir.path(), absl::Minutes(10));
  ASSERT_TRUE(server.ok()) << server.status();
  ClientOptions o;
  o.target = (*server)->target();
  o.call_deadline = absl::Seconds(10);
  auto c = MakeClient(o);
  Trip(*c);
  AdmitRequest in;
  in.endpoint = kEp;
  in.attempt = 2;
  in.wait = absl::Seconds(60);
  absl::Notification answered;
  c->AdmitWaitingAsync(in, nullptr, [&](absl::StatusOr<ClientDecision>) {
    answered.Notify();
  });
  ASSERT_TRUE(PollUntil([&] { return Waiting(**server) >= 1; }));
  const absl::Time start = absl::Now();
  c.reset();
  EXPECT_TRUE(answered.HasBeenNotified());
  // Cancelled, not waited out (the wait is 60 s).
  EXPECT_LT(absl::Now() - start, absl::Seconds(50));
  EXPECT_TRUE(PollUntil([&] { return Waiting(**server) == 0; }));
}

TEST(WaitingE2ETest, ADrainAnswersEveryWaitingCallBeforeThePortCloses) {
  stagger::testing::ScratchDir dir;
  auto server = StartStaggerd(dir.path(), absl::Minutes(10));
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = MakeClient((*server)->target(), absl::Seconds(10), absl::Seconds(1));
  Trip(*c);
  std::vector<absl::StatusOr<ClientDecision>> answers(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < answers.size(); ++i) {
    threads.emplace_back([&, i] {
      AdmitRequest in;
      in.endpoint = kEp;
      in.attempt = 2;
      in.wait = absl::Seconds(50);
      answers[i] = c->AdmitWaiting(in, nullptr);
    });
  }
  EXPECT_TRUE(PollUntil([&] { return Waiting(**server) >= 8; }));
  absl::StatusOr<int> exit = (*server)->Terminate();
  for (auto& t : threads) t.join();
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_EQ(*exit, 0);
  // Answered by staggerd itself (as an Admit then: still open), not by the
  // client's fallback after the port closed.
  for (const auto& a : answers) {
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->source, DecisionSource::kCoordinator);
    EXPECT_EQ(a->verdict, Verdict::kDefer);
    EXPECT_EQ(a->reason, Reason::kCircuitOpen);
  }
}

TEST(WaitingE2ETest, AWorkerThatCancelsFreesItsPlace) {
  stagger::testing::ScratchDir dir;
  auto server = StartStaggerd(dir.path(), absl::Minutes(10));
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = MakeClient((*server)->target(), absl::Seconds(10), absl::Seconds(1));
  Trip(*c);
  Canceller cancel;
  Runs runs;
  std::thread deliveries([&] { Deliver(*c, 5, cancel, [] { return true; }, &runs); });
  EXPECT_TRUE(PollUntil([&] { return Waiting(**server) >= 5; }));
  cancel.Cancel();
  deliveries.join();
  for (const LoopResult& r : runs.results) {
    EXPECT_EQ(r.end, LoopEnd::kCancelled) << LoopEndName(r.end);
  }
  EXPECT_TRUE(PollUntil([&] { return Waiting(**server) == 0; }));
}

}  // namespace
}  // namespace stagger::client
