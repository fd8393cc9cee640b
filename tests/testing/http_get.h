// HttpGet: a minimal blocking HTTP/1.0 GET of http://127.0.0.1:PORT/PATH
// (the server closes the connection after the body), for scraping /metrics
// in tests without libcurl. The whole answer comes within `timeout` or the
// call fails; any status is an answer (HttpResponse.status), a connection
// refused or a malformed answer is an error.
#ifndef STAGGER_TESTS_TESTING_HTTP_GET_H_
#define STAGGER_TESTS_TESTING_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace stagger::testing {

struct HttpResponse {
  int status = 0;     // e.g. 200
  std::string body;   // after the blank line
};

// GET http://127.0.0.1:`port``path`, whole response within `timeout`.
inline absl::StatusOr<HttpResponse> HttpGet(int port, absl::string_view path,
                                            absl::Duration timeout =
                                                absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(absl::StrCat("connect 127.0.0.1:", port, ": ",
                                               strerror(errno)));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
  }
  std::string raw;
  char buf[8192];
  for (;;) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return absl::DeadlineExceededError("HTTP GET timed out");
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left_ms));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return absl::DeadlineExceededError("HTTP GET timed out");
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", strerror(errno)));
    if (n == 0) break;  // HTTP/1.0: the server closes after the body
    raw.append(buf, static_cast<size_t>(n));
  }
  HttpResponse out;
  const size_t sp = raw.find(' ');
  const size_t head_end = raw.find("\r\n\r\n");
  if (sp == std::string::npos || head_end == std::string::npos ||
      !absl::SimpleAtoi(raw.substr(sp + 1, 3), &out.status)) {
    return absl::DataLossError(absl::StrCat("bad HTTP response: ", raw.substr(0, 200)));
  }
  out.body = raw.substr(head_end + 4);
  return out;
}

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_HTTP_GET_H_
