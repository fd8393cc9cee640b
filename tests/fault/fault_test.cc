// Fault tests: the real staggerd binary on a loopback port, killed, stalled
// and crowded while worker threads drive the client library
// (CoordinatorClient) at load.
//
//   KillUnderLoad    kill -9 mid-load: every call returns within its
//                    deadline + slack, deliveries go on deciding locally and
//                    none is lost (every delivery admitted is reported DONE,
//                    no call errors), and after a restart on the same port
//                    the client is back on the coordinator within its
//                    recheck interval + slack.
//   StallUnderLoad   SIGSTOP (a coordinator that accepts bytes but never
//                    answers): only the calls in flight and one probe per
//                    recheck interval pay the deadline; the rest decide
//                    locally at once. Prints the client's decision latency
//                    percentiles while stalled.
//   IdleConnections  1000 idle HTTP/2 connections held open: each is
//                    accepted (the server's SETTINGS arrives) and a normal
//                    client is served meanwhile. The test raises its own
//                    RLIMIT_NOFILE (up to the hard limit) and fails, saying
//                    what it needs, if the hard limit is too low.
//
// Robust on a slow, shared machine: bounds are deadline + 2 s, counts, and
// polls with long timeouts; nothing asserts speed. Each test starts its own
// staggerd (metrics off) and ends by itself.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <functional>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "gtest/gtest.h"
#include "tests/testing/make_client.h"
#include "tests/testing/staggerd_process.h"

#ifndef STAGGERD_PATH
#error "STAGGERD_PATH must name the staggerd binary (set by CMake)"
#endif

namespace stagger::fault {
namespace {

using client::ClientDecision;
using client::CoordinatorClient;
using client::DecisionSource;
using engine::Outcome;
using engine::Verdict;
using testing::MakeClient;
using testing::StaggerdProcess;

constexpr absl::Duration kSlack = absl::Seconds(2);  // slow, noisy machines
constexpr int kWorkers = 4;

absl::StatusOr<std::unique_ptr<StaggerdProcess>> StartStaggerd(int port = 0) {
  return StaggerdProcess::Start(
      STAGGERD_PATH,
      {absl::StrCat("--address=127.0.0.1:", port), "--metrics_address="},
      absl::Seconds(30));
}

// One client call as the worker saw it.
struct Call {
  absl::Time start;
  absl::Duration took;
  DecisionSource source;
  bool paid;  // tried the coordinator and failed (not "considered down")
};

// Workers delivering until stopped: each delivery is Admit(attempt 1) then,
// once it may proceed, Report(SUCCESS) -> DONE. Records every call.
class Load {
 public:
  Load(CoordinatorClient* c, const std::string& prefix) : c_(c) {
    for (int w = 0; w < kWorkers; ++w) {
      threads_.emplace_back([this, prefix, w] { Work(absl::StrCat(prefix, w)); });
    }
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  std::vector<Call> calls() const {
    absl::MutexLock l(&mu_);
    return calls_;
  }
  int started() const { absl::MutexLock l(&mu_); return started_; }
  int done() const { absl::MutexLock l(&mu_); return done_; }
  std::vector<std::string> errors() const {
    absl::MutexLock l(&mu_);
    return errors_;
  }
  // Whether any call that started at or after `t` was answered by the
  // coordinator; when the first such call started.
  std::optional<absl::Time> FirstCoordinatorCallAfter(absl::Time t) const {
    absl::MutexLock l(&mu_);
    std::optional<absl::Time> first;
    for (const Call& c : calls_) {
      if (c.start >= t && c.source == DecisionSource::kCoordinator &&
          (!first || c.start < *first)) {
        first = c.start;
      }
    }
    return first;
  }

 private:
  absl::StatusOr<ClientDecision> Timed(
      const std::function<absl::StatusOr<ClientDecision>()>& call) {
    const absl::Time start = absl::Now();
    absl::StatusOr<ClientDecision> d = call();
    const absl::Duration took = absl::Now() - start;
    absl::MutexLock l(&mu_);
    if (!d.ok()) {
      errors_.push_back(d.status().ToString());
      return d;
    }
    const bool paid = d->source == DecisionSource::kLocalFallback &&
                      !absl::IsUnavailable(d->fallback_cause);
    calls_.push_back({start, took, d->source, paid});
    return d;
  }

  // Between deliveries a worker sleeps 0.5 ms (the "sending"): load, not a
  // spin on two shared cores.
  void Work(const std::string& prefix) {
    for (int i = 0; !stop_.load(); ++i) {
      if (i > 0) absl::SleepFor(absl::Microseconds(500));
      // A key per delivery: the fleet's state is not this test's subject.
      const std::string key = absl::StrCat(prefix, "/", i % 50);
      absl::StatusOr<ClientDecision> a =
          Timed([&] {
            client::AdmitRequest in;
            in.endpoint = key;
            return c_->Admit(in);
          });
      if (!a.ok()) continue;
      if (a->verdict != Verdict::kProceed) {
        absl::MutexLock l(&mu_);
        errors_.push_back(absl::StrCat("Admit of a first attempt: ",
                                       engine::VerdictName(a->verdict)));
        continue;
      }
      { absl::MutexLock l(&mu_); ++started_; }
      absl::StatusOr<ClientDecision> r =
          Timed([&] {
            client::ReportRequest in;
            in.endpoint = key;
            in.outcome = Outcome::kSuccess;
            return c_->Report(in);
          });
      if (r.ok() && r->verdict == Verdict::kDone) {
        absl::MutexLock l(&mu_);
        ++done_;
      } else if (r.ok()) {
        absl::MutexLock l(&mu_);
        errors_.push_back(absl::StrCat("Report(SUCCESS): ",
                                       engine::VerdictName(r->verdict)));
      }
    }
  }

  CoordinatorClient* c_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  mutable absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  int started_ ABSL_GUARDED_BY(mu_) = 0;
  int done_ ABSL_GUARDED_BY(mu_) = 0;
};

// Waits (real time) while the load runs: the phases of these tests are
// lengths of load, not bounds on anything.
void RunFor(absl::Duration d) { absl::SleepFor(d); }

std::vector<Call> Between(const std::vector<Call>& calls, absl::Time from,
                          absl::Time to) {
  std::vector<Call> out;
  for (const Call& c : calls) {
    if (c.start >= from && c.start < to) out.push_back(c);
  }
  return out;
}

absl::Duration Percentile(std::vector<absl::Duration> v, double p) {
  if (v.empty()) return absl::ZeroDuration();
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

std::string Percentiles(const std::vector<Call>& calls) {
  std::vector<absl::Duration> took;
  for (const Call& c : calls) took.push_back(c.took);
  return absl::StrCat(
      calls.size(), " calls: p50 ", absl::FormatDuration(Percentile(took, 0.5)),
      ", p90 ", absl::FormatDuration(Percentile(took, 0.9)), ", p99 ",
      absl::FormatDuration(Percentile(took, 0.99)), ", max ",
      absl::FormatDuration(Percentile(took, 1.0)));
}

TEST(FaultTest, KillUnderLoad) {
  constexpr absl::Duration kDeadline = absl::Milliseconds(100);
  constexpr absl::Duration kRecheck = absl::Milliseconds(500);
  auto server = StartStaggerd();
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->grpc_port();
  auto c = MakeClient((*server)->target(), kDeadline, kRecheck);
  ASSERT_NE(c, nullptr);

  Load load(c.get(), "fault/kill/");
  RunFor(absl::Seconds(1));
  const absl::Time killed = absl::Now();
  (*server)->Kill();
  ASSERT_TRUE(testing::PollUntil([&] { return (*server)->exited(); }));
  RunFor(absl::Seconds(2));
  const absl::Time restarting = absl::Now();
  auto again = StartStaggerd(port);
  ASSERT_TRUE(again.ok()) << again.status();
  const absl::Time listening = absl::Now();
  ASSERT_TRUE(testing::PollUntil(
      [&] { return load.FirstCoordinatorCallAfter(listening).has_value(); },
      absl::Seconds(30)))
      << "the client never went back to the restarted coordinator";
  const absl::Time back = *load.FirstCoordinatorCallAfter(listening);
  RunFor(absl::Milliseconds(500));
  load.Stop();

  const std::vector<Call> calls = load.calls();
  const std::vector<Call> down = Between(calls, killed, restarting);
  std::fprintf(stderr,
               "kill -9: %s while down (%d local), restarted in %s, back on "
               "the coordinator %s after it listened; %d deliveries, %d done\n",
               Percentiles(down).c_str(),
               static_cast<int>(std::count_if(
                   down.begin(), down.end(),
                   [](const Call& x) {
                     return x.source == DecisionSource::kLocalFallback;
                   })),
               absl::FormatDuration(listening - restarting).c_str(),
               absl::FormatDuration(back - listening).c_str(), load.started(),
               load.done());
  EXPECT_TRUE(load.errors().empty()) << load.errors().front();
  for (const Call& x : calls) {
    EXPECT_LE(x.took, kDeadline + kSlack);
  }
  // Deliveries went on while it was down, decided locally.
  EXPECT_GT(std::count_if(down.begin(), down.end(),
                          [](const Call& x) {
                            return x.source == DecisionSource::kLocalFallback;
                          }),
            20);
  // None lost: every delivery admitted was reported and DONE.
  EXPECT_EQ(load.started(), load.done());
  EXPECT_GT(load.done(), 100);
  EXPECT_LE(back - listening, kRecheck + kSlack);
}

TEST(FaultTest, StallUnderLoad) {
  constexpr absl::Duration kDeadline = absl::Milliseconds(100);
  constexpr absl::Duration kRecheck = absl::Seconds(1);
  constexpr absl::Duration kStall = absl::Seconds(3);
  auto server = StartStaggerd();
  ASSERT_TRUE(server.ok()) << server.status();
  auto c = MakeClient((*server)->target(), kDeadline, kRecheck);
  ASSERT_NE(c, nullptr);

  Load load(c.get(), "fault/stall/");
  RunFor(absl::Seconds(1));
  const absl::Time stopped = absl::Now();
  (*server)->Signal(SIGSTOP);
  RunFor(kStall);
  const absl::Time resumed = absl::Now();
  (*server)->Signal(SIGCONT);
  RunFor(absl::Milliseconds(500));
  load.Stop();

  const std::vector<Call> stalled = Between(load.calls(), stopped, resumed);
  const int paid = static_cast<int>(std::count_if(
      stalled.begin(), stalled.end(), [](const Call& x) { return x.paid; }));
  std::fprintf(stderr,
               "SIGSTOP for %s: %s; %d of them paid the deadline (tried the "
               "stalled coordinator)\n",
               absl::FormatDuration(resumed - stopped).c_str(),
               Percentiles(stalled).c_str(), paid);
  EXPECT_TRUE(load.errors().empty()) << load.errors().front();
  EXPECT_EQ(load.started(), load.done());
  for (const Call& x : stalled) EXPECT_LE(x.took, kDeadline + kSlack);
  // Who pays: the calls in flight when it stalled (one per worker), then
  // one probe per recheck interval (however long the stall really was).
  const int probes = static_cast<int>((resumed - stopped) / kRecheck) + 1;
  EXPECT_LE(paid, kWorkers + probes);
  EXPECT_GE(paid, 1);
  // The rest decided locally without calling it: most of the calls.
  EXPECT_GT(static_cast<int>(stalled.size()) - paid, 10 * paid);
  ASSERT_TRUE((*server)->Terminate().ok());
}

// A TCP connection to 127.0.0.1:port that speaks the HTTP/2 client preface
// and an empty SETTINGS frame, then stays silent. -1 on failure.
int IdleHttp2Connection(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  static constexpr char kPreface[] =
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
      "\x00\x00\x00\x04\x00\x00\x00\x00\x00";  // SETTINGS, empty
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      send(fd, kPreface, sizeof(kPreface) - 1, MSG_NOSIGNAL) !=
          static_cast<ssize_t>(sizeof(kPreface) - 1)) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the server wrote to `fd` (its SETTINGS) within `timeout` and has
// not closed it.
bool ServerAnswered(int fd, absl::Duration timeout) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) {
    return false;
  }
  char buf[256];
  return recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0;
}

// Raises this process's soft RLIMIT_NOFILE to `want` open files, or as
// close to it as the hard limit allows (never lowers it); a staggerd started
// afterwards inherits the limit. An error saying what is needed if even the
// hard limit is below `need`: the test fails then, it never skips.
absl::Status RaiseOpenFileLimit(rlim_t need, rlim_t want) {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0) {
    return absl::InternalError(
        absl::StrCat("getrlimit(RLIMIT_NOFILE): ", std::strerror(errno)));
  }
  if (files.rlim_cur < want) {
    files.rlim_cur = std::min(files.rlim_max, want);
    if (setrlimit(RLIMIT_NOFILE, &files) != 0) {
      return absl::InternalError(
          absl::StrCat("setrlimit(RLIMIT_NOFILE, ", files.rlim_cur,
                       "): ", std::strerror(errno)));
    }
  }
  if (files.rlim_cur < need) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "RLIMIT_NOFILE: this test needs at least ", need,
        " open files per process, and the hard limit is ", files.rlim_max,
        ". Raise the hard limit to ", want, " or more for the test run "
        "(as root: ulimit -Hn ", want, "; systemd: LimitNOFILE=", want,
        "; docker run --ulimit nofile=", want, ":", want, ")"));
  }
  return absl::OkStatus();
}

TEST(FaultTest, ThousandIdleConnectionsDoNotStopOthers) {
  constexpr int kIdle = 1000;
  // This process holds kIdle client sockets, and the staggerd it starts
  // (which inherits the limit) kIdle server sockets, each beside ~200 of
  // its own descriptors.
  const absl::Status files = RaiseOpenFileLimit(kIdle + 200, 2 * kIdle + 200);
  ASSERT_TRUE(files.ok()) << files.message();
  auto server = StartStaggerd();
  ASSERT_TRUE(server.ok()) << server.status();

  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    const int fd = IdleHttp2Connection((*server)->grpc_port());
    ASSERT_GE(fd, 0) << "connection " << i << ": " << std::strerror(errno);
    idle.push_back(fd);
  }
  int accepted = 0;
  for (int fd : idle) accepted += ServerAnswered(fd, absl::Seconds(30)) ? 1 : 0;
  EXPECT_EQ(accepted, kIdle) << "connections the server never answered";

  // A normal client is served while they are all open.
  auto c = MakeClient((*server)->target(), absl::Seconds(10), absl::Seconds(1));
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 20; ++i) {
    const std::string key = absl::StrCat("fault/idle/", i);
    client::AdmitRequest in;
    in.endpoint = key;
    absl::StatusOr<ClientDecision> d = c->Admit(in);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->source, DecisionSource::kCoordinator);
  }
  for (int fd : idle) close(fd);
  ASSERT_TRUE((*server)->Terminate().ok());
}

}  // namespace
}  // namespace stagger::fault
