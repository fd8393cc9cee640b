// stagger-waiting-memory: what holding waiting Admits (AdmitRequest.wait)
// costs, measured on the real binaries.
//
//   stagger-waiting-memory --staggerd BIN [--agent BIN] [--calls 100000]
//                          [--channels 200]
//
// Starts staggerd (and, with --agent, a stagger-agent in front of it) on
// loopback, opens its breaker on one endpoint for ten minutes, then sends
// --calls waiting Admits (wait 55 s) over --channels connections of their
// own, and waits until staggerd says they are all held
// (stagger_waiting_calls). It prints, as `key value` lines: the resident
// memory each process gained per waiting call (VmRSS before and after), the
// client's too, and then, after SIGTERM to staggerd, how long its drain took
// to answer every call (each must be answered: none may be lost). The
// staggerd runs with room for the calls: --max_waiting_calls and
// --max_agent_held_calls above --calls (the agent's --max_waiting_calls
// too), and a gRPC memory quota of 8 GiB (each call's state counts
// against it).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/cli/usage.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/coordinator.grpc.pb.h"

ABSL_FLAG(std::string, staggerd, "", "the staggerd binary");
ABSL_FLAG(std::string, agent, "", "a stagger-agent binary to put in front");
ABSL_FLAG(int, calls, 100000, "waiting calls to hold");
ABSL_FLAG(int, channels, 200, "connections to spread them over");

namespace {

constexpr char kEp[] = "https://held.example";

// A child process whose stderr is read for its "listening on" line.
struct Child {
  pid_t pid = -1;
  std::string line;  // the "listening on" line
};

Child Spawn(const std::vector<std::string>& argv) {
  int fds[2];
  if (pipe(fds) != 0) std::abort();
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(fds[1], 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  FILE* err = fdopen(fds[0], "r");
  char buf[4096];
  while (fgets(buf, sizeof(buf), err) != nullptr) {
    if (std::string(buf).find("listening on") != std::string::npos) {
      c.line = buf;
      break;
    }
  }
  std::thread([err] {
    char b[4096];
    while (fgets(b, sizeof(b), err) != nullptr) {
    }
    fclose(err);
  }).detach();
  return c;
}

int64_t RssBytes(pid_t pid) {
  std::ifstream f(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(f, line)) {
    int64_t kb = 0;
    if (line.rfind("VmRSS:", 0) == 0 &&
        absl::SimpleAtoi(line.substr(6, line.size() - 9), &kb)) {
      return kb * 1024;
    }
  }
  return -1;
}

std::string Match(const std::string& text, const std::string& re) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(re)) ? m[1].str() : "";
}

std::shared_ptr<grpc::Channel> OwnChannel(const std::string& target, int i) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("stagger.bench.channel", i);  // no sharing between channels
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

// Waiting calls in flight and their answers.
struct Calls {
  struct One {
    grpc::ClientContext ctx;
    stagger::v1::AdmitRequest req;
    stagger::v1::AdmitResponse resp;
  };
  std::vector<std::unique_ptr<One>> all;
  std::atomic<int> answered{0};
  std::atomic<int> failed{0};
};

void SendWaiting(const std::string& target, int n, int channels, Calls* calls) {
  std::vector<std::unique_ptr<stagger::v1::RetryCoordinator::Stub>> stubs;
  for (int i = 0; i < channels; ++i) {
    stubs.push_back(stagger::v1::RetryCoordinator::NewStub(OwnChannel(target, i)));
  }
  for (int i = 0; i < n; ++i) {
    auto one = std::make_unique<Calls::One>();
    one->req.set_endpoint(kEp);
    one->req.set_attempt(2);
    one->req.mutable_wait()->set_seconds(55);
    one->ctx.set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(60));
    Calls::One* p = one.get();
    calls->all.push_back(std::move(one));
    stubs[i % channels]->async()->Admit(
        &p->ctx, &p->req, &p->resp, [calls](grpc::Status s) {
          (s.ok() ? calls->answered : calls->failed).fetch_add(1);
        });
  }
}

}  // namespace

namespace {

// stagger_waiting_calls on staggerd's /metrics (-1 if unreadable).
double WaitingCalls(const std::string& metrics_port) {
  std::string cmd = absl::StrCat("curl -s http://127.0.0.1:", metrics_port,
                                 "/metrics");
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  double v = -1;
  while (fgets(buf, sizeof(buf), p) != nullptr) {
    double x;
    std::string line(buf);
    if (line.rfind("stagger_waiting_calls ", 0) == 0 &&
        absl::SimpleAtod(line.substr(22, line.size() - 23), &x)) {
      v = x;
    }
  }
  pclose(p);
  return v;
}

void Trip(const std::string& target) {
  auto stub = stagger::v1::RetryCoordinator::NewStub(
      grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    stagger::v1::ReportRequest r;
    r.set_endpoint(kEp);
    r.set_attempt(1);
    r.set_outcome(stagger::v1::RETRYABLE_FAILURE);
    stagger::v1::ReportResponse resp;
    stub->Report(&ctx, r, &resp);
  }
}

bool PollFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (absl::Now() < until) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return done();
}

}  // namespace

int main(int argc, char** argv) {
  // --help lists this program's flags (bench/waiting/).
  stagger::cli::InstallUsage(
      "Holds --calls waiting Admits on a staggerd of its own (or through a "
      "stagger-agent, --agent) and prints the resident memory each costs; "
      "see docs/PERFORMANCE.md, \"Waiting calls\".\n"
      "  stagger-waiting-memory --staggerd=build/bin/staggerd "
      "--calls=100000",
      "bench/waiting");
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_calls);
  const std::string dir = absl::StrCat("/tmp/stagger-waiting-", getpid());
  std::system(absl::StrCat("mkdir -p ", dir).c_str());
  const std::string config = dir + "/config.textproto";
  std::ofstream(config) << "default_policy { breaker { consecutive_failures: 3 "
                           "open_base { seconds: 600 } open_max { seconds: 600 } } }\n";
  Child sd = Spawn({absl::GetFlag(FLAGS_staggerd), "--address=127.0.0.1:0",
                    "--metrics_address=127.0.0.1:0", "--config=" + config,
                    absl::StrCat("--max_waiting_calls=", n + 1000),
                    absl::StrCat("--max_agent_held_calls=", n + 1000),
                    "--memory_quota_bytes=8589934592", "--drain_timeout=60s"});
  const std::string port = Match(sd.line, "listening on 127.0.0.1:(\\d+)");
  const std::string metrics = Match(sd.line, "metrics on port (\\d+)");
  std::string target = "127.0.0.1:" + port;
  Trip(target);
  Child agent;
  if (!absl::GetFlag(FLAGS_agent).empty()) {
    agent = Spawn({absl::GetFlag(FLAGS_agent), "--listen=unix:" + dir + "/a.sock",
                   "--coordinator=" + target, "--metrics_address=",
                   absl::StrCat("--max_waiting_calls=", n + 1000)});
    target = "unix:" + dir + "/a.sock";
  }
  const int64_t sd0 = RssBytes(sd.pid);
  const int64_t agent0 = agent.pid > 0 ? RssBytes(agent.pid) : 0;
  const int64_t self0 = RssBytes(getpid());
  Calls calls;
  SendWaiting(target, n, absl::GetFlag(FLAGS_channels), &calls);
  const bool held = PollFor([&] { return WaitingCalls(metrics) >= n; },
                            absl::Seconds(50));
  std::printf("held %d\n", static_cast<int>(WaitingCalls(metrics)));
  std::printf("staggerd_bytes_per_waiting_call %.0f\n",
              double(RssBytes(sd.pid) - sd0) / n);
  if (agent.pid > 0) {
    std::printf("agent_bytes_per_waiting_call %.0f\n",
                double(RssBytes(agent.pid) - agent0) / n);
  }
  std::printf("client_bytes_per_waiting_call %.0f\n",
              double(RssBytes(getpid()) - self0) / n);
  const absl::Time drain = absl::Now();
  kill(sd.pid, SIGTERM);
  PollFor([&] { return calls.answered + calls.failed >= n; }, absl::Seconds(90));
  std::printf("drain_answered %d\ndrain_failed %d\ndrain_s %.2f\n",
              calls.answered.load(), calls.failed.load(),
              absl::ToDoubleSeconds(absl::Now() - drain));
  waitpid(sd.pid, nullptr, 0);
  if (agent.pid > 0) kill(agent.pid, SIGKILL);
  std::system(absl::StrCat("rm -rf ", dir).c_str());
  return held && calls.answered == n ? 0 : 1;
}
