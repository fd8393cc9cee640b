// Small utilities for tests that look at a running staggerd from outside
// (tests/server), alongside staggerd_process.h:
//   MetricValue   one series' value in a Prometheus text exposition
//   ScrapeMetric  scrape /metrics (http_get.h) and read one series
//   BusyPort      a loopback TCP listener holding a free port busy
// Everything is synchronous and bounded. Scratch directories and file
// writes are in files.h.
#ifndef STAGGER_TESTS_TESTING_BLACKBOX_UTIL_H_
#define STAGGER_TESTS_TESTING_BLACKBOX_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "tests/testing/http_get.h"

namespace stagger::testing {

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

// Scrapes /metrics and reads one series; nullopt if the scrape fails, is
// not a 200, or lacks the series.
inline std::optional<double> ScrapeMetric(int metrics_port,
                                          absl::string_view series) {
  absl::StatusOr<HttpResponse> r = HttpGet(metrics_port, "/metrics");
  if (!r.ok() || r->status != 200) return std::nullopt;
  return MetricValue(r->body, series);
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
