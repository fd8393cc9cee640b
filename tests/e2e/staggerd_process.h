// StaggerdProcess: runs the real staggerd binary as a child process for
// end-to-end tests.
//
// Start() forks and execs `binary --address 127.0.0.1:<port>
// --metrics_address= <extra args>` (port 0: the kernel picks one; metrics
// off so parallel tests never fight over :9464), forwards the child's stderr
// to ours line by line (prefixed, so test logs show the server's side), and
// returns once the child prints "listening on <host>:<port>" -- with the
// port it really bound -- or fails if it exits or stays silent past the
// start timeout. The child gets SIGKILL if the test process dies
// (PR_SET_PDEATHSIG), so no server outlives its test.
//
// Terminate() sends SIGTERM and waits (bounded) for the exit status;
// the destructor SIGKILLs a child that is still running and reaps it.
// A reaper thread blocks in waitpid(): exits are noticed without polling.
//
// Thread-safe: port()/target() are immutable after Start; Terminate and the
// destructor must not race each other.
#ifndef STAGGER_TESTS_E2E_STAGGERD_PROCESS_H_
#define STAGGER_TESTS_E2E_STAGGERD_PROCESS_H_

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace stagger::testing {

class StaggerdProcess {
 public:
  struct Options {
    std::string binary;                   // path to staggerd
    int port = 0;                         // 0: ephemeral
    std::vector<std::string> extra_args;  // e.g. {"--config", path}
    absl::Duration start_timeout = absl::Seconds(30);  // slow machines
  };

  static absl::StatusOr<std::unique_ptr<StaggerdProcess>> Start(
      const Options& options) {
    std::unique_ptr<StaggerdProcess> p(new StaggerdProcess);
    if (absl::Status s = p->Spawn(options); !s.ok()) return s;
    return p;
  }

  ~StaggerdProcess() {
    if (!exited_.HasBeenNotified()) {
      kill(pid_, SIGKILL);
    }
    if (reaper_.joinable()) reaper_.join();
    if (reader_.joinable()) reader_.join();
  }

  int port() const {
    absl::MutexLock l(&mu_);
    return port_;
  }
  std::string target() const { return absl::StrCat("127.0.0.1:", port()); }
  pid_t pid() const { return pid_; }

  // SIGTERM, then the exit code (0 = clean). An error if the child was
  // killed by a signal or did not exit within `timeout`.
  absl::StatusOr<int> Terminate(absl::Duration timeout) {
    if (!exited_.HasBeenNotified()) kill(pid_, SIGTERM);
    return WaitForExit(timeout);
  }
  // SIGKILL: a crash, as far as clients can tell.
  void Kill() {
    if (!exited_.HasBeenNotified()) kill(pid_, SIGKILL);
    (void)WaitForExit(absl::Seconds(30));
  }
  absl::StatusOr<int> WaitForExit(absl::Duration timeout) {
    if (!exited_.WaitForNotificationWithTimeout(timeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "staggerd (pid ", pid_, ") did not exit within ",
          absl::FormatDuration(timeout)));
    }
    if (WIFEXITED(wait_status_)) return WEXITSTATUS(wait_status_);
    if (WIFSIGNALED(wait_status_)) {
      return absl::InternalError(absl::StrCat(
          "staggerd killed by signal ", WTERMSIG(wait_status_)));
    }
    return absl::InternalError("staggerd ended oddly");
  }

 private:
  StaggerdProcess() = default;

  absl::Status Spawn(const Options& o) {
    std::vector<std::string> args = {
        o.binary, absl::StrCat("--address=127.0.0.1:", o.port),
        "--metrics_address="};
    args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
    }
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) {
      return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
    }
    if (pid_ == 0) {
      // Child: async-signal-safe calls only.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      dup2(fds[1], STDERR_FILENO);  // dup2 clears O_CLOEXEC on fd 2
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    reaper_ = std::thread([this] {
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      wait_status_ = status;
      exited_.Notify();
    });
    reader_ = std::thread([this, fd = fds[0]] { ReadStderr(fd); });

    // Ready, exited, or silent for too long.
    const absl::Time deadline = absl::Now() + o.start_timeout;
    absl::MutexLock l(&mu_);
    auto ready_or_eof = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return port_ > 0 || stderr_closed_;
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready_or_eof), deadline);
    if (port_ > 0) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat(
        "staggerd did not report \"listening on\" (",
        stderr_closed_ ? "it exited" : "timed out", "); last output: ",
        last_line_));
  }

  void ReadStderr(int fd) {
    FILE* f = fdopen(fd, "r");
    char buf[4096];
    while (f != nullptr && std::fgets(buf, sizeof buf, f) != nullptr) {
      std::string line(buf);
      std::fprintf(stderr, "[staggerd %d] %s", static_cast<int>(pid_),
                   line.c_str());
      absl::MutexLock l(&mu_);
      last_line_ = line;
      if (port_ == 0) port_ = ParseListeningPort(line);
    }
    if (f != nullptr) std::fclose(f);
    absl::MutexLock l(&mu_);
    stderr_closed_ = true;
  }

  // "staggerd: listening on 127.0.0.1:43211 (metrics disabled)" -> 43211.
  static int ParseListeningPort(absl::string_view line) {
    const size_t at = line.find("listening on ");
    if (at == absl::string_view::npos) return 0;
    absl::string_view rest = line.substr(at + 13);
    rest = rest.substr(0, rest.find_first_of(" \n"));
    const size_t colon = rest.rfind(':');
    int port = 0;
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(rest.substr(colon + 1), &port)) {
      return 0;
    }
    return port;
  }

  pid_t pid_ = -1;
  std::thread reaper_;
  std::thread reader_;
  absl::Notification exited_;
  int wait_status_ = 0;  // written before exited_ is notified

  mutable absl::Mutex mu_;
  int port_ ABSL_GUARDED_BY(mu_) = 0;
  bool stderr_closed_ ABSL_GUARDED_BY(mu_) = false;
  std::string last_line_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_E2E_STAGGERD_PROCESS_H_
