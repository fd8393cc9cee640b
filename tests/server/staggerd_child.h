// StaggerdChild and friends: what the server tests need to run the real
// staggerd binary and look at it from outside, the way an operator and
// Kubernetes do.
//
// StaggerdChild::Spawn(args) forks and execs STAGGERD_PATH with exactly
// `args` (no implicit flags: each test says which ports and files it uses),
// keeps every line the child writes to stderr (and forwards each one to the
// test's stderr, prefixed, so a failing test's log shows the server's side),
// and reaps the child on a thread blocked in waitpid(). Unlike
// tests/e2e/staggerd_process.h it does not require the child to come up:
// tests of refused start-ups spawn, then wait for the exit code and read the
// whole stderr. The child gets SIGKILL if the test process dies
// (PR_SET_PDEATHSIG); the destructor SIGKILLs a child still running.
//
// Also here: PollUntil (the only way these tests wait: poll a condition with
// a generous deadline, never sleep for a fixed time and assume), a tiny
// HTTP/1.0 GET for /metrics, a Prometheus text-format value lookup, a
// scratch directory, and a TCP listener that holds a port busy.
//
// Thread-safety: all StaggerdChild methods may be called from any thread.
#ifndef STAGGER_TESTS_SERVER_STAGGERD_CHILD_H_
#define STAGGER_TESTS_SERVER_STAGGERD_CHILD_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#ifndef STAGGERD_PATH
#error "STAGGERD_PATH must name the staggerd binary (set by CMake)"
#endif

namespace stagger::server_test {

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

class StaggerdChild {
 public:
  // Starts STAGGERD_PATH with `args` (argv[1..]). Fails only if the process
  // cannot be created; a staggerd that exits at once is still returned.
  static absl::StatusOr<std::unique_ptr<StaggerdChild>> Spawn(
      std::vector<std::string> args) {
    std::unique_ptr<StaggerdChild> c(new StaggerdChild);
    if (absl::Status s = c->Fork(std::move(args)); !s.ok()) return s;
    return c;
  }

  ~StaggerdChild() {
    if (!exited_.HasBeenNotified()) kill(pid_, SIGKILL);
    if (reaper_.joinable()) reaper_.join();
    if (reader_.joinable()) reader_.join();
  }
  StaggerdChild(const StaggerdChild&) = delete;
  StaggerdChild& operator=(const StaggerdChild&) = delete;

  pid_t pid() const { return pid_; }

  // Waits for "staggerd: listening on HOST:PORT (metrics on port N|metrics
  // disabled)". Error if the child exits or stays silent past `timeout`.
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
    if (!exited_.HasBeenNotified()) kill(pid_, sig);
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
  // When the reaper saw the exit (valid once exited()).
  absl::Time exit_time() const {
    absl::MutexLock l(&mu_);
    return exit_time_;
  }

 private:
  StaggerdChild() = default;

  absl::string_view OutputFrom(size_t from) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::string_view all = output_;
    return from >= all.size() ? absl::string_view() : all.substr(from);
  }

  absl::Status Fork(std::vector<std::string> args) {
    args.insert(args.begin(), STAGGERD_PATH);
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
      // Child: async-signal-safe calls only. Signals blocked in the parent
      // (none here, but be sure) must not stay blocked for staggerd, which
      // relies on sigwait() with its own mask.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      dup2(fds[1], STDERR_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
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

  // "staggerd: listening on 127.0.0.1:43211 (metrics on port 40001)".
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

  pid_t pid_ = -1;
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

// GET http://127.0.0.1:<port><path> (HTTP/1.0, the server closes the
// connection). Returns the body of a 200 answer.
inline absl::StatusOr<std::string> HttpGet(int port, absl::string_view path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(strerror(errno));
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const std::string e = strerror(errno);
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect :", port, ": ", e));
  }
  const std::string req =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("send failed");
  }
  std::string resp;
  char buf[8192];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      resp.append(buf, n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  close(fd);
  const size_t body = resp.find("\r\n\r\n");
  if (body == std::string::npos) {
    return absl::UnavailableError(absl::StrCat("no HTTP answer: ", resp));
  }
  if (!absl::StartsWith(resp, "HTTP/1.1 200") &&
      !absl::StartsWith(resp, "HTTP/1.0 200")) {
    return absl::UnavailableError(resp.substr(0, resp.find("\r\n")));
  }
  return resp.substr(body + 4);
}

// The value of the series written exactly as `series` (e.g.
// `stagger_config_reloads_total{result="success"}`) in a Prometheus text
// exposition; nullopt if absent.
inline std::optional<double> MetricValue(absl::string_view exposition,
                                         absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) {
      continue;
    }
    double v = 0;
    if (absl::SimpleAtod(line.substr(0, line.find(' ')), &v)) return v;
  }
  return std::nullopt;
}

// Scrapes /metrics and reads one series; nullopt if either fails.
inline std::optional<double> ScrapeMetric(int metrics_port,
                                          absl::string_view series) {
  absl::StatusOr<std::string> body = HttpGet(metrics_port, "/metrics");
  if (!body.ok()) return std::nullopt;
  return MetricValue(*body, series);
}

// A fresh directory, removed with everything in it when destroyed.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = absl::StrCat(base != nullptr && *base ? base : "/tmp",
                                    "/stagger_server_test.XXXXXX");
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~ScratchDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  std::string operator/(absl::string_view name) const {
    return absl::StrCat(path_, "/", name);
  }

 private:
  std::string path_;
};

inline bool WriteFile(const std::string& path, absl::string_view text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  return f.good();
}

// A TCP socket bound and listening on 127.0.0.1:<free port> without
// SO_REUSEPORT, so that nothing else can bind that port while it lives.
class BusyPort {
 public:
  BusyPort() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 ||
        bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(fd_, 1) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    port_ = ntohs(addr.sin_port);
  }
  ~BusyPort() {
    if (fd_ >= 0) close(fd_);
  }
  BusyPort(const BusyPort&) = delete;
  BusyPort& operator=(const BusyPort&) = delete;
  int port() const { return port_; }  // 0: could not bind

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace stagger::server_test

#endif  // STAGGER_TESTS_SERVER_STAGGERD_CHILD_H_
