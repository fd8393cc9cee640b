// SIGTERM drain, as Kubernetes does it: the pod is sent SIGTERM, the
// readiness probe (grpc.health.v1) must turn NOT_SERVING at once so the
// pod leaves the Service's endpoints, staggerd keeps answering for
// --drain_grace while clients move away, then finishes in-flight calls and
// exits 0. No call that started before SIGTERM may fail.
//
// Timing: only the order of real instants is asserted (a call started
// before we sent SIGTERM; staggerd exited, and a call failed, no earlier
// than drain_grace after we sent it), never how long something took on
// this machine.
#include <atomic>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/rpc_helpers.h"
#include "tests/testing/staggerd_process.h"

#ifndef STAGGERD_PATH
#error "STAGGERD_PATH must name the staggerd binary (set by CMake)"
#endif

namespace stagger::server_test {
namespace {

using stagger::testing::PollUntil;
using stagger::testing::StaggerdProcess;

constexpr char kService[] = "stagger.v1.RetryCoordinator";
constexpr absl::Duration kGrace = absl::Seconds(2);

struct CallRecord {
  absl::Time start;
  absl::Time end;
  grpc::Status status;
  v1::Verdict verdict = v1::VERDICT_UNSPECIFIED;
};

// Admit calls back to back from one thread until stopped; every call's
// start instant and result is kept.
class AdmitLoop {
 public:
  AdmitLoop(std::shared_ptr<grpc::Channel> channel, std::string endpoint)
      : stub_(v1::RetryCoordinator::NewStub(std::move(channel))),
        endpoint_(std::move(endpoint)),
        thread_([this] { Run(); }) {}
  ~AdmitLoop() { Stop(); }

  void Stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }
  std::vector<CallRecord> calls() const {
    absl::MutexLock l(&mu_);
    return calls_;
  }
  int failures() const {
    absl::MutexLock l(&mu_);
    int n = 0;
    for (const CallRecord& c : calls_) n += !c.status.ok();
    return n;
  }
  int successes_started_after(absl::Time t) const {
    absl::MutexLock l(&mu_);
    int n = 0;
    for (const CallRecord& c : calls_) n += c.status.ok() && c.start > t;
    return n;
  }

 private:
  void Run() {
    while (!stop_.load()) {
      CallRecord r;
      r.start = absl::Now();
      v1::Decision d;
      r.status = Admit(*stub_, endpoint_, 1, &d);
      r.verdict = d.verdict();
      r.end = absl::Now();
      const bool failed = !r.status.ok();
      {
        absl::MutexLock l(&mu_);
        calls_.push_back(r);
      }
      // Once the server is gone every call fails at once; do not spin.
      if (failed) absl::SleepFor(absl::Milliseconds(10));
    }
  }

  std::unique_ptr<Coordinator> stub_;
  const std::string endpoint_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  std::vector<CallRecord> calls_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after the members above exist
};

// A grpc.health.v1 Watch stream, read on its own thread; every status
// received is kept with its arrival time.
class HealthWatch {
 public:
  HealthWatch(std::shared_ptr<grpc::Channel> channel, std::string service)
      : stub_(grpc::health::v1::Health::NewStub(std::move(channel))) {
    req_.set_service(std::move(service));
    thread_ = std::thread([this] { Run(); });
  }
  ~HealthWatch() { Cancel(); }

  // Ends the stream (so it does not hold up the server's shutdown).
  void Cancel() {
    ctx_.TryCancel();
    if (thread_.joinable()) thread_.join();
  }
  // The first time `status` was received after `after`, if it was.
  std::optional<absl::Time> Seen(HealthCheckResponse::ServingStatus status,
                                 absl::Time after = absl::InfinitePast()) const {
    absl::MutexLock l(&mu_);
    for (const auto& [s, t] : seen_) {
      if (s == status && t >= after) return t;
    }
    return std::nullopt;
  }

 private:
  void Run() {
    auto reader = stub_->Watch(&ctx_, req_);
    HealthCheckResponse resp;
    while (reader->Read(&resp)) {
      absl::MutexLock l(&mu_);
      seen_.emplace_back(resp.status(), absl::Now());
    }
    (void)reader->Finish();
  }

  std::unique_ptr<Health> stub_;
  grpc::health::v1::HealthCheckRequest req_;
  grpc::ClientContext ctx_;
  mutable absl::Mutex mu_;
  std::vector<std::pair<HealthCheckResponse::ServingStatus, absl::Time>> seen_
      ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

TEST(DrainTest, SigtermTurnsHealthNotServingKeepsServingThroughGraceExitsZero) {
  auto spawned = StaggerdProcess::Spawn(
      STAGGERD_PATH,
      {"--address=127.0.0.1:0", "--metrics_address=",
       absl::StrCat("--drain_grace=", absl::FormatDuration(kGrace)),
       "--drain_timeout=10s"});
  ASSERT_TRUE(spawned.ok()) << spawned.status();
  std::unique_ptr<StaggerdProcess> d = *std::move(spawned);
  ASSERT_TRUE(d->WaitUntilListening().ok()) << d->output();
  std::shared_ptr<grpc::Channel> channel = Channel(d->target());
  auto health = grpc::health::v1::Health::NewStub(channel);

  // Serving: Watch says so first, for the service and for the server.
  HealthWatch watch_service(channel, kService);
  HealthWatch watch_server(channel, "");
  ASSERT_TRUE(PollUntil([&] {
    return watch_service.Seen(HealthCheckResponse::SERVING).has_value() &&
           watch_server.Seen(HealthCheckResponse::SERVING).has_value();
  })) << "the health Watch streams never said SERVING";

  // Two workers keep a stream of Admit calls going.
  AdmitLoop worker_a(channel, "https://drain.example/a");
  AdmitLoop worker_b(Channel(d->target()), "https://drain.example/b");
  ASSERT_TRUE(PollUntil([&] {
    return worker_a.successes_started_after(absl::InfinitePast()) >= 20 &&
           worker_b.successes_started_after(absl::InfinitePast()) >= 20;
  })) << "the workers' calls do not succeed before SIGTERM";

  // SIGTERM.
  const absl::Time sigterm = absl::Now();
  d->Signal(SIGTERM);

  // Both health names flip to NOT_SERVING; the Watch streams see it.
  ASSERT_TRUE(PollUntil([&] {
    return watch_service.Seen(HealthCheckResponse::NOT_SERVING, sigterm) &&
           watch_server.Seen(HealthCheckResponse::NOT_SERVING, sigterm);
  })) << "health did not turn NOT_SERVING after SIGTERM";
  const absl::Time flipped =
      *watch_service.Seen(HealthCheckResponse::NOT_SERVING, sigterm);
  EXPECT_TRUE(d->WaitForOutput("SIGTERM: draining"));
  // Watch streams are long-lived calls, and gRPC 1.51 does not end them on
  // Shutdown: a client that keeps one open holds staggerd's exit for the
  // whole --drain_timeout (measured: 10 s here). Kubernetes' probes use
  // Check; close ours so the exit below is the drain's, not the timeout's.
  watch_service.Cancel();
  watch_server.Cancel();

  // During the grace period staggerd still answers calls: Check (a probe
  // answered NOT_SERVING is itself a call served during the drain) ...
  for (const char* name : {"", kService}) {
    HealthCheckResponse::ServingStatus status{};
    grpc::Status s = HealthCheck(*health, name, &status);
    if (s.ok()) {
      EXPECT_EQ(status, HealthCheckResponse::NOT_SERVING) << "'" << name << "'";
    } else {
      // Only acceptable if this machine is so slow that the grace was over
      // by the time we asked.
      EXPECT_GE(absl::Now() - sigterm, kGrace)
          << "Check('" << name << "') failed during the grace: " << s;
    }
  }

  // ... and the workers' Admit calls that started after the flip succeed.
  // (PollUntil ends as soon as each worker has one; the grace is 2 s.)
  EXPECT_TRUE(PollUntil([&] {
    return worker_a.successes_started_after(flipped) >= 1 &&
           worker_b.successes_started_after(flipped) >= 1;
  })) << "no Admit call succeeded after health turned NOT_SERVING";

  // Then it exits 0, and not before the grace period has passed.
  absl::StatusOr<int> code = d->WaitForExit();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  EXPECT_GE(d->exit_time() - sigterm, kGrace)
      << "exited before --drain_grace was over";
  EXPECT_TRUE(d->WaitForOutput("drained, exiting"));

  // The loops run on until each has seen the end of service.
  EXPECT_TRUE(PollUntil([&] {
    return worker_a.failures() >= 1 && worker_b.failures() >= 1;
  }));
  worker_a.Stop();
  worker_b.Stop();

  // Every call that started before SIGTERM succeeded with a clean answer.
  // A call may fail only once the grace is over (staggerd calls Shutdown
  // no earlier than drain_grace after we sent SIGTERM, so a failure cannot
  // end before that), and only as the server closing or gone: UNAVAILABLE,
  // or CANCELLED for a call that reached the server just as it shut down
  // (gRPC cancels calls not yet handed to the service at that instant).
  int before = 0;
  for (const AdmitLoop* w : {&worker_a, &worker_b}) {
    for (const CallRecord& c : w->calls()) {
      const std::string when = absl::StrCat(
          "a call from ", absl::FormatDuration(c.start - sigterm), " to ",
          absl::FormatDuration(c.end - sigterm),
          " after SIGTERM; staggerd exited ",
          absl::FormatDuration(d->exit_time() - sigterm), " after it");
      if (c.start < sigterm) {
        ++before;
        EXPECT_TRUE(c.status.ok()) << c.status << " (" << when << ")";
      }
      if (c.status.ok()) {
        EXPECT_EQ(c.verdict, v1::PROCEED) << when;
        continue;
      }
      EXPECT_GE(c.end - sigterm, kGrace)
          << "failed during the grace period: " << c.status << " (" << when
          << ")";
      EXPECT_THAT(c.status.error_code(),
                  ::testing::AnyOf(grpc::StatusCode::UNAVAILABLE,
                                   grpc::StatusCode::CANCELLED))
          << c.status << " (" << when << ")";
    }
  }
  EXPECT_GE(before, 40);
}

}  // namespace
}  // namespace stagger::server_test
