// core/http/http_server: a real civetweb server on a free loopback port,
// spoken to over a raw socket: routes, 404, 405, HEAD, the raw query, the
// security headers, bad and busy addresses.
#include "core/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stagger::http {
namespace {

// Sends `request` to 127.0.0.1:port, returns everything the server sent
// until it closed (bounded by 10 s socket timeouts).
std::string Exchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) > 0) {
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, n);
  }
  close(fd);
  return out;
}

std::string Get(int port, const std::string& method, const std::string& target) {
  return Exchange(port, absl::StrCat(method, " ", target,
                                     " HTTP/1.1\r\nHost: x\r\n\r\n"));
}

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpRoutes routes;
    routes["/echo"] = [](absl::string_view query) {
      return HttpResponse{200, "text/plain", absl::StrCat("query=[", query, "]")};
    };
    routes["/teapot"] = [](absl::string_view) {
      return HttpResponse{400, "application/json", "{\"error\":\"no\"}"};
    };
    auto server = HttpServer::Start("status_address", "127.0.0.1:0", routes);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    ASSERT_GT(server_->port(), 0);
  }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, AnswersARouteWithItsBodyAndTheSecurityHeaders) {
  const std::string r = Get(server_->port(), "GET", "/echo?a=%3C1%3E&b");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "Content-Type: text/plain\r\n"));
  EXPECT_TRUE(absl::StrContains(r, "Content-Length: 19\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "X-Content-Type-Options: nosniff\r\n"));
  EXPECT_TRUE(absl::StrContains(r, "Cache-Control: no-store\r\n"));
  EXPECT_TRUE(absl::StrContains(
      r, "Content-Security-Policy: default-src 'none'; script-src 'self'"));
  EXPECT_TRUE(absl::EndsWith(r, "\r\n\r\nquery=[a=%3C1%3E&b]")) << r;
}

TEST_F(HttpServerTest, HandlersChooseTheirStatus) {
  const std::string r = Get(server_->port(), "GET", "/teapot");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 400 Bad Request\r\n")) << r;
  EXPECT_TRUE(absl::EndsWith(r, "{\"error\":\"no\"}"));
}

TEST_F(HttpServerTest, UnknownPathsAre404AndOnlyGetAndHeadAreServed) {
  std::string r = Get(server_->port(), "GET", "/echo/more");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 404 Not Found\r\n")) << r;
  EXPECT_TRUE(absl::StrContains(r, "{\"error\":\"no page at \\\"/echo/more\\\"\"}"));
  r = Exchange(server_->port(),
               "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 405 Method Not Allowed\r\n")) << r;
  r = Get(server_->port(), "HEAD", "/echo");
  EXPECT_TRUE(absl::StartsWith(r, "HTTP/1.1 200 OK\r\n")) << r;
  EXPECT_TRUE(absl::EndsWith(r, "\r\n\r\n")) << r;  // no body
}

TEST(HttpServerStartTest, RefusesAMalformedAddressNamingTheFlag) {
  for (const char* bad : {"nope", ":80", "127.0.0.1:99999", "127.0.0.1:x"}) {
    auto s = HttpServer::Start("status_address", bad, {});
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(s.status().message(), "status_address: "))
        << s.status();
  }
}

TEST(HttpServerStartTest, ABusyPortIsUnavailable) {
  auto first = HttpServer::Start("status_address", "127.0.0.1:0", {});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = HttpServer::Start(
      "status_address", absl::StrCat("127.0.0.1:", (*first)->port()), {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(second.status().message(), "cannot listen on"))
      << second.status();
}

}  // namespace
}  // namespace stagger::http
