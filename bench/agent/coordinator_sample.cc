#include "bench/agent/coordinator_sample.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace stagger::bench {
namespace {

// A connected TCP socket to host:port, or -1.
int Dial(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{10, 0};  // a stuck server fails the sample, not the run
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  return fd;
}

// The body of GET /metrics on `address` (host:port), HTTP/1.0: the server
// answers with the whole page and closes.
absl::StatusOr<std::string> GetMetricsPage(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address \"", address, "\": want host:port"));
  }
  const int fd = Dial(address.substr(0, colon), address.substr(colon + 1));
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: bench\r\n\r\n";
  std::string reply;
  if (send(fd, request.data(), request.size(), 0) ==
      static_cast<ssize_t>(request.size())) {
    char buf[16384];
    for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) {
      reply.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  const size_t body = reply.find("\r\n\r\n");
  if (!absl::StartsWith(reply, "HTTP/1.") || body == std::string::npos ||
      reply.find(" 200 ") > body) {
    return absl::UnavailableError(absl::StrCat(
        "GET http://", address, "/metrics: no 200 answer (got ",
        reply.size(), " bytes)"));
  }
  return reply.substr(body + 4);
}

}  // namespace

double SumMetric(absl::string_view page, absl::string_view name,
                 absl::string_view label) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (line.empty() || line[0] == '#' || !absl::StartsWith(line, name)) {
      continue;
    }
    const absl::string_view rest = line.substr(name.size());
    if (rest.empty() || (rest[0] != '{' && rest[0] != ' ')) continue;
    if (!label.empty() && !absl::StrContains(rest, label)) continue;
    double v = 0;
    if (absl::SimpleAtod(rest.substr(rest.rfind(' ') + 1), &v)) sum += v;
  }
  return sum;
}

absl::StatusOr<double> ProcessCpuSeconds(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command may hold spaces
  if (paren == std::string::npos) {
    return absl::NotFoundError(absl::StrCat("no process ", pid));
  }
  // After ")": field 3 (state) on; utime and stime are fields 14 and 15.
  std::istringstream fields(stat.substr(paren + 1));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::strtod(f.c_str(), nullptr);
    if (i == 15) stime = std::strtod(f.c_str(), nullptr);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

absl::StatusOr<double> CpuOf(const std::vector<int>& pids) {
  double sum = 0;
  for (int pid : pids) {
    absl::StatusOr<double> s = ProcessCpuSeconds(pid);
    if (!s.ok()) return s.status();
    sum += *s;
  }
  return sum;
}

absl::StatusOr<CoordinatorSample> SampleCoordinator(
    const std::string& metrics_address, int pid) {
  CoordinatorSample s;
  if (pid > 0) {
    absl::StatusOr<double> cpu = ProcessCpuSeconds(pid);
    if (!cpu.ok()) return cpu.status();
    s.cpu_seconds = *cpu;
  }
  absl::StatusOr<std::string> page = GetMetricsPage(metrics_address);
  if (!page.ok()) return page.status();
  s.rpcs = SumMetric(*page, "stagger_rpc_duration_seconds_count");
  s.sync_in = SumMetric(*page, "stagger_sync_messages_total",
                        "direction=\"in\"");
  s.sync_out = SumMetric(*page, "stagger_sync_messages_total",
                         "direction=\"out\"");
  s.decisions = SumMetric(*page, "stagger_decisions_total");
  return s;
}

}  // namespace stagger::bench
