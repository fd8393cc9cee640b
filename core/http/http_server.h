// HttpServer: a small read-only HTTP/1.1 server for operator pages
// (civetweb, the HTTP server prometheus-cpp's /metrics exposer runs on).
// staggerd's status page serves on it; nothing in it is staggerd's, so
// stagger-agent can serve the same page the same way.
//
// Contract:
//  - Start(flag, address, routes) listens on `address` ("host:port"; port
//    0: any free port, see port()) and answers GET and HEAD for each route
//    path exactly (no prefix matching, no files from disk). A path with no
//    route gets 404, another method 405; a handler's answer is sent as it
//    returns it. Errors name `flag`: InvalidArgument for a malformed
//    address, Unavailable when it cannot be bound.
//  - Handlers run on the server's kThreads worker threads, so at most
//    kThreads requests are handled at once (more wait for a thread); a
//    client that sends nothing for kRequestTimeout is dropped. Handlers
//    get the raw query string (after '?', not decoded; "" if none) and
//    must be thread-safe.
//  - Every answer carries Cache-Control: no-store, X-Content-Type-Options:
//    nosniff, X-Frame-Options: DENY, Referrer-Policy: no-referrer and a
//    Content-Security-Policy allowing only the server's own scripts,
//    styles and fetches (no inline script, nothing from elsewhere).
//  - Destroying the server stops it: requests in flight finish first.
#ifndef STAGGER_CORE_HTTP_HTTP_SERVER_H_
#define STAGGER_CORE_HTTP_HTTP_SERVER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

struct mg_context;
struct mg_connection;

namespace stagger::http {

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(absl::string_view query)>;
// Path ("/", "/api/summary") -> handler.
using HttpRoutes = std::map<std::string, HttpHandler, std::less<>>;

// A file compiled into the binary (embed_assets.cmake generates them).
struct EmbeddedAsset {
  const char* path;  // "/status.js"
  const char* content_type;
  const unsigned char* data;
  size_t size;
};
// A route answering `asset`'s bytes.
HttpHandler AssetHandler(const EmbeddedAsset& asset);

class HttpServer {
 public:
  static constexpr int kThreads = 4;
  static constexpr absl::Duration kRequestTimeout = absl::Seconds(10);

  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      absl::string_view flag, absl::string_view address, HttpRoutes routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

 private:
  explicit HttpServer(HttpRoutes routes) : routes_(std::move(routes)) {}
  static int Handle(mg_connection* conn, void* self);
  HttpResponse Answer(absl::string_view method, absl::string_view path,
                      absl::string_view query) const;

  const HttpRoutes routes_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace stagger::http

#endif  // STAGGER_CORE_HTTP_HTTP_SERVER_H_
