// Small utilities for tests that look at a running staggerd from outside
// (tests/server), alongside staggerd_process.h:
//   HttpGet       a tiny HTTP/1.0 GET on 127.0.0.1 (for /metrics)
//   MetricValue   one series' value in a Prometheus text exposition
//   ScrapeMetric  both: scrape /metrics and read one series
//   ScratchDir    a fresh temporary directory, removed when destroyed
//   WriteFile     write a file whole
//   BusyPort      a loopback TCP listener holding a free port busy
// Everything is synchronous and bounded (sockets have 10 s timeouts).
#ifndef STAGGER_TESTS_TESTING_BLACKBOX_UTIL_H_
#define STAGGER_TESTS_TESTING_BLACKBOX_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace stagger::testing {

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
                                    "/stagger_test.XXXXXX");
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

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_BLACKBOX_UTIL_H_
