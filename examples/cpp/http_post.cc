#include "examples/cpp/http_post.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace stagger::examples {
namespace {

// Sends the whole buffer; false on error or timeout (errno says which).
bool SendAll(int fd, const std::string& data) {
  for (size_t sent = 0; sent < data.size();) {
    const ssize_t n =
        send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// The status line and Retry-After of a response read until the peer
// closed (the request said Connection: close).
void ParseResponse(absl::string_view raw, HttpResponse* r) {
  const size_t end = raw.find("\r\n\r\n");
  std::vector<absl::string_view> lines =
      absl::StrSplit(raw.substr(0, end), "\r\n");
  std::vector<absl::string_view> status_line =
      absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/1.") ||
      !absl::SimpleAtoi(status_line[1], &r->status)) {
    r->status = 0;  // not HTTP: as no response
    return;
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(lines[i], absl::MaxSplits(':', 1));
    if (absl::EqualsIgnoreCase(kv.first, "retry-after")) {
      r->retry_after = std::string(kv.second);  // ParseRetryAfter trims
    }
  }
}

}  // namespace

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

absl::StatusOr<HttpUrl> ParseHttpUrl(absl::string_view url) {
  if (!absl::ConsumePrefix(&url, "http://")) {
    return absl::InvalidArgumentError("--url: expected http://host:port/path");
  }
  const size_t slash = url.find('/');
  absl::string_view authority = url.substr(0, slash);
  HttpUrl u;
  u.path =
      slash == absl::string_view::npos ? "/" : std::string(url.substr(slash));
  const size_t colon = authority.rfind(':');
  u.host = std::string(authority.substr(0, colon));
  u.port = colon == absl::string_view::npos
               ? "80"
               : std::string(authority.substr(colon + 1));
  if (u.host.empty()) return absl::InvalidArgumentError("--url: no host");
  return u;
}

HttpResponse Post(const HttpUrl& url, const std::string& body,
                  absl::Duration timeout, absl::string_view content_type) {
  HttpResponse r;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  if (getaddrinfo(url.host.c_str(), url.port.c_str(), &hints, &addrs) != 0) {
    return r;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owned(addrs, freeaddrinfo);
  const int fd = socket(addrs->ai_family, addrs->ai_socktype, 0);
  if (fd < 0) return r;
  // Bounds connect (Linux: SO_SNDTIMEO), every send and every receive.
  const timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string request = absl::StrCat(
      "POST ", url.path, " HTTP/1.1\r\nHost: ", url.host, ":", url.port,
      "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(),
      "\r\nConnection: close\r\n\r\n", body);
  std::string raw;
  if (connect(fd, addrs->ai_addr, addrs->ai_addrlen) != 0 ||
      !SendAll(fd, request)) {
    r.timed_out =
        errno == EAGAIN || errno == EWOULDBLOCK || errno == EINPROGRESS;
    close(fd);
    return r;
  }
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      raw.append(buf, static_cast<size_t>(n));
      if (raw.size() > (1 << 20)) break;  // a broken peer; parse what came
      continue;
    }
    if (n < 0) r.timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
    break;
  }
  close(fd);
  if (!r.timed_out) ParseResponse(raw, &r);
  return r;
}

}  // namespace stagger::examples
