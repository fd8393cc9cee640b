#include "core/http/http_server.h"

#include <civetweb.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/http/json.h"

namespace stagger::http {
namespace {

constexpr char kSecurityHeaders[] =
    "Cache-Control: no-store\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "X-Frame-Options: DENY\r\n"
    "Referrer-Policy: no-referrer\r\n"
    "Content-Security-Policy: default-src 'none'; script-src 'self'; "
    "style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'\r\n";

// "host:port" with a non-empty host and a port in 0..65535.
absl::Status ValidateAddress(absl::string_view flag,
                             absl::string_view address) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": want host:port with a port in 0..65535 (e.g. "
              "127.0.0.1:8080), got \"",
        address, "\""));
  }
  return absl::OkStatus();
}

const char* ReasonPhrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return status < 500 ? "Client Error" : "Server Error";
  }
}

void Send(mg_connection* conn, const HttpResponse& r, bool head) {
  const std::string header = absl::StrCat(
      "HTTP/1.1 ", r.status, " ", ReasonPhrase(r.status),
      "\r\nContent-Type: ", r.content_type,
      "\r\nContent-Length: ", r.body.size(), "\r\n", kSecurityHeaders,
      "Connection: close\r\n\r\n");
  mg_write(conn, header.data(), header.size());
  if (!head) mg_write(conn, r.body.data(), r.body.size());
}

}  // namespace

HttpHandler AssetHandler(const EmbeddedAsset& asset) {
  return [&asset](absl::string_view) {
    return HttpResponse{
        200, asset.content_type,
        std::string(reinterpret_cast<const char*>(asset.data), asset.size)};
  };
}

HttpResponse HttpServer::Answer(absl::string_view method,
                                absl::string_view path,
                                absl::string_view query) const {
  if (method != "GET" && method != "HEAD") {
    return {405, "application/json",
            JsonError(absl::StrCat("method ", JsonString(method),
                                   ": this server is read-only (GET)"))};
  }
  auto it = routes_.find(path);
  if (it == routes_.end()) {
    return {404, "application/json",
            JsonError(absl::StrCat("no page at ", JsonString(path)))};
  }
  return it->second(query);
}

int HttpServer::Handle(mg_connection* conn, void* self) {
  const mg_request_info* info = mg_get_request_info(conn);
  const char* path = info->local_uri != nullptr ? info->local_uri : "";
  const char* query = info->query_string != nullptr ? info->query_string : "";
  const absl::string_view method = info->request_method;
  const HttpResponse r =
      static_cast<const HttpServer*>(self)->Answer(method, path, query);
  Send(conn, r, method == "HEAD");
  return r.status;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    absl::string_view flag, absl::string_view address, HttpRoutes routes) {
  if (absl::Status s = ValidateAddress(flag, address); !s.ok()) return s;
  mg_init_library(0);  // reference-counted; prometheus-cpp calls it too
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(routes)));
  const std::string ports(address);
  const std::string threads = absl::StrCat(kThreads);
  const std::string timeout =
      absl::StrCat(absl::ToInt64Milliseconds(kRequestTimeout));
  const char* options[] = {"listening_ports", ports.c_str(),
                           "num_threads", threads.c_str(),
                           "request_timeout_ms", timeout.c_str(),
                           "enable_keep_alive", "no",
                           nullptr};
  mg_callbacks callbacks{};
  mg_init_data init{&callbacks, nullptr, options};
  char text[256] = {};
  unsigned code = 0;
  mg_error_data error{&code, text, sizeof(text)};
  server->context_ = mg_start2(&init, &error);
  if (server->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        flag, ": cannot listen on ", address, " (port already in use?): ",
        text[0] != '\0' ? text : "civetweb refused to start"));
  }
  mg_set_request_handler(server->context_, "/", &HttpServer::Handle,
                         server.get());
  mg_server_port bound[4] = {};
  if (mg_get_server_ports(server->context_, 4, bound) < 1) {
    return absl::UnavailableError(
        absl::StrCat(flag, ": no listening port after binding ", address));
  }
  server->port_ = bound[0].port;
  return server;
}

HttpServer::~HttpServer() {
  if (context_ != nullptr) mg_stop(context_);
  mg_exit_library();
}

}  // namespace stagger::http
