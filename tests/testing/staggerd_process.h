// StaggerdProcess: the real staggerd binary as a child process, for tests
// that look at it from outside (tests/e2e, tests/server). The one helper for
// that; see blackbox_util.h for HTTP /metrics, scratch dirs and busy ports.
//
// Contract:
//  - Spawn(binary, args) forks and execs `binary` with exactly `args` as
//    argv[1..] (no implicit flags: callers say which ports and files the
//    server uses) and returns at once. It fails only if the process cannot
//    be created; a staggerd that exits at once is still returned, so tests
//    of refused start-ups can wait for the exit code and read its stderr.
//    The child starts with an empty signal mask (staggerd relies on
//    sigwait() with its own).
//  - Every line the child writes to stderr is kept (output()) and forwarded
//    to the test's stderr prefixed "[staggerd PID] ", so a failing test's
//    log shows the server's side.
//  - WaitUntilListening(timeout) returns once the child prints
//    "staggerd: listening on HOST:PORT (metrics on port N|metrics
//    disabled)"; grpc_port() and metrics_port() are then the ports it
//    really bound (so ":0" works). It fails, with the child's whole stderr,
//    if the child exits or stays silent past the deadline.
//    Start(binary, args, timeout) is Spawn + WaitUntilListening.
//  - WaitForExit(timeout) gives the exit code (0 = clean), or an error if
//    the child was killed by a signal or is still running at the deadline;
//    after an exit it also waits (bounded) for stderr to be read to its end.
//    Signal(sig) sends any signal; Terminate(timeout) is SIGTERM +
//    WaitForExit; Kill() is SIGKILL (a crash, as far as clients can tell).
//  - The destructor SIGKILLs a child that is still running and reaps it.
//    The child also gets SIGKILL if the test process dies
//    (PR_SET_PDEATHSIG), so a killed test leaves no server running.
//  - A reaper thread blocks in waitpid(): exits are noticed without polling.
//
// Also here: the suites' timeouts and PollUntil, the only way these tests
// wait (poll a condition with a generous deadline, never sleep for a fixed
// time and assume).
//
// Thread-safety: all StaggerdProcess methods may be called from any thread.
#ifndef STAGGER_TESTS_TESTING_STAGGERD_PROCESS_H_
#define STAGGER_TESTS_TESTING_STAGGERD_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace stagger::testing {

// Generous: these tests share two cores with the rest of the suite.
inline constexpr absl::Duration kStartTimeout = absl::Seconds(30);
inline constexpr absl::Duration kPollTimeout = absl::Seconds(20);
inline constexpr absl::Duration kExitTimeout = absl::Seconds(30);

// Calls `done` every 20 ms until it returns true (-> true) or `timeout`
// passes (-> false, after one last call).
inline bool PollUntil(const std::function<bool()>& done,
                      absl::Duration timeout = kPollTimeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return done();
}

class StaggerdProcess {
 public:
  // Starts `binary` with `args` (argv[1..]); does not wait for it.
  static absl::StatusOr<std::unique_ptr<StaggerdProcess>> Spawn(
      std::string binary, std::vector<std::string> args) {
    std::unique_ptr<StaggerdProcess> p(new StaggerdProcess);
    args.insert(args.begin(), std::move(binary));
    if (absl::Status s = p->Fork(std::move(args)); !s.ok()) return s;
    return p;
  }
  // Spawn, then WaitUntilListening(timeout). On failure the child, if any,
  // is killed and reaped.
  static absl::StatusOr<std::unique_ptr<StaggerdProcess>> Start(
      std::string binary, std::vector<std::string> args,
      absl::Duration timeout = kStartTimeout) {
    absl::StatusOr<std::unique_ptr<StaggerdProcess>> p =
        Spawn(std::move(binary), std::move(args));
    if (!p.ok()) return p;
    if (absl::Status s = (*p)->WaitUntilListening(timeout); !s.ok()) return s;
    return p;
  }

  ~StaggerdProcess() {
    Signal(SIGKILL);
    if (reaper_.joinable()) reaper_.join();
    if (reader_.joinable()) reader_.join();
  }
  StaggerdProcess(const StaggerdProcess&) = delete;
  StaggerdProcess& operator=(const StaggerdProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Waits for "staggerd: listening on HOST:PORT (...)". Error if the child
  // exits or stays silent past `timeout`.
  absl::Status WaitUntilListening(absl::Duration timeout = kStartTimeout) {
    absl::MutexLock l(&mu_);
    auto ready_or_eof = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return grpc_port_ > 0 || eof_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready_or_eof), timeout);
    if (grpc_port_ > 0) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        "staggerd did not report \"listening on\" (",
        eof_ ? "it exited" : "timed out", "); its stderr:\n", output_));
  }
  // 0 until the child reported "listening on".
  int grpc_port() const {
    absl::MutexLock l(&mu_);
    return grpc_port_;
  }
  int metrics_port() const {  // 0: metrics disabled (or not listening yet)
    absl::MutexLock l(&mu_);
    return metrics_port_;
  }
  std::string target() const { return absl::StrCat("127.0.0.1:", grpc_port()); }

  // Everything the child wrote to stderr so far.
  std::string output() const {
    absl::MutexLock l(&mu_);
    return output_;
  }
  size_t output_size() const {
    absl::MutexLock l(&mu_);
    return output_.size();
  }
  // Waits until stderr, from byte `from` on, contains `needle`.
  bool WaitForOutput(absl::string_view needle, size_t from = 0,
                     absl::Duration timeout = kPollTimeout) {
    absl::MutexLock l(&mu_);
    auto found_or_eof = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return eof_ || OutputFrom(from).find(needle) != absl::string_view::npos;
    };
    mu_.AwaitWithTimeout(absl::Condition(&found_or_eof), timeout);
    return OutputFrom(from).find(needle) != absl::string_view::npos;
  }
  // stderr from byte `from` on.
  std::string output_from(size_t from) const {
    absl::MutexLock l(&mu_);
    return std::string(OutputFrom(from));
  }

  void Signal(int sig) {
    // pid_ > 0: never kill(-1, ...) after a failed fork.
    if (pid_ > 0 && !exited_.HasBeenNotified()) kill(pid_, sig);
  }
  bool exited() const { return exited_.HasBeenNotified(); }

  // The exit code once the child exits (0 = clean); an error if it was
  // killed by a signal or is still running after `timeout`. After an exit
  // this also waits (bounded) for stderr to be read to its end.
  absl::StatusOr<int> WaitForExit(absl::Duration timeout = kExitTimeout) {
    if (!exited_.WaitForNotificationWithTimeout(timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("staggerd (pid ", pid_, ") still running after ",
                       absl::FormatDuration(timeout)));
    }
    {
      absl::MutexLock l(&mu_);
      auto eof = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return eof_; };
      mu_.AwaitWithTimeout(absl::Condition(&eof), absl::Seconds(10));
    }
    if (WIFEXITED(wait_status_)) return WEXITSTATUS(wait_status_);
    if (WIFSIGNALED(wait_status_)) {
      return absl::InternalError(
          absl::StrCat("staggerd killed by signal ", WTERMSIG(wait_status_)));
    }
    return absl::InternalError("staggerd ended oddly");
  }
  // SIGTERM, then WaitForExit(timeout).
  absl::StatusOr<int> Terminate(absl::Duration timeout = kExitTimeout) {
    Signal(SIGTERM);
    return WaitForExit(timeout);
  }
  // SIGKILL, then wait (bounded) for the exit.
  void Kill() {
    Signal(SIGKILL);
    (void)WaitForExit();
  }
  // When the reaper saw the exit (valid once exited()).
  absl::Time exit_time() const {
    absl::MutexLock l(&mu_);
    return exit_time_;
  }

 private:
  StaggerdProcess() = default;

  absl::string_view OutputFrom(size_t from) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::string_view all = output_;
    return from >= all.size() ? absl::string_view() : all.substr(from);
  }

  // args[0] is the binary.
  absl::Status Fork(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
    }
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
      const std::string e = strerror(errno);
      close(fds[0]);
      close(fds[1]);
      return absl::InternalError(absl::StrCat("fork: ", e));
    }
    if (pid == 0) {
      // Child: async-signal-safe calls only. Signals blocked in the parent
      // must not stay blocked for staggerd, which relies on sigwait() with
      // its own mask.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      dup2(fds[1], STDERR_FILENO);  // dup2 clears O_CLOEXEC on fd 2
      execv(argv[0], argv.data());
      _exit(127);
    }
    pid_ = pid;
    close(fds[1]);
    reaper_ = std::thread([this] {
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      {
        absl::MutexLock l(&mu_);
        exit_time_ = absl::Now();
      }
      wait_status_ = status;
      exited_.Notify();
    });
    reader_ = std::thread([this, fd = fds[0]] { ReadStderr(fd); });
    return absl::OkStatus();
  }

  void ReadStderr(int fd) {
    FILE* f = fdopen(fd, "r");
    char buf[4096];
    while (f != nullptr && std::fgets(buf, sizeof buf, f) != nullptr) {
      std::fprintf(stderr, "[staggerd %d] %s", static_cast<int>(pid_), buf);
      absl::MutexLock l(&mu_);
      output_ += buf;
      if (grpc_port_ == 0) ParseListening(buf);
    }
    if (f != nullptr) std::fclose(f);
    absl::MutexLock l(&mu_);
    eof_ = true;
  }

  // "staggerd: listening on 127.0.0.1:43211 (metrics on port 40001)" or
  // "... (metrics disabled)".
  void ParseListening(absl::string_view line) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t at = line.find("listening on ");
    if (at == absl::string_view::npos) return;
    absl::string_view rest = line.substr(at + 13);
    absl::string_view hostport = rest.substr(0, rest.find_first_of(" \n"));
    const size_t colon = hostport.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(hostport.substr(colon + 1), &port)) {
      return;
    }
    const size_t m = rest.find("metrics on port ");
    if (m != absl::string_view::npos) {
      absl::string_view n = rest.substr(m + 16);
      n = n.substr(0, n.find(')'));
      (void)absl::SimpleAtoi(n, &metrics_port_);
    }
    grpc_port_ = port;
  }

  pid_t pid_ = -1;  // set once, before the threads start
  std::thread reaper_;
  std::thread reader_;
  absl::Notification exited_;
  int wait_status_ = 0;  // written before exited_ is notified

  mutable absl::Mutex mu_;
  std::string output_ ABSL_GUARDED_BY(mu_);
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
  int grpc_port_ ABSL_GUARDED_BY(mu_) = 0;
  int metrics_port_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time exit_time_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_STAGGERD_PROCESS_H_
