#include "server/status/status_page.h"

#include <utility>

namespace stagger::status {

using http::AssetHandler;
using http::HttpRoutes;
using http::HttpServer;

StatusPage::StatusPage(const StatusPageOptions& options,
                       const engine::Engine* engine,
                       const engine::Clock* clock, service::WatchLog* log)
    : ring_(clock),
      peers_(options.members, options.self, options.peers),
      api_(engine, &peers_, &ring_, clock, log) {}

absl::StatusOr<std::unique_ptr<StatusPage>> StatusPage::Start(
    const StatusPageOptions& options, const engine::Engine* engine,
    const engine::Clock* clock, service::WatchLog* log) {
  std::unique_ptr<StatusPage> page(new StatusPage(options, engine, clock, log));
  HttpRoutes routes;
  for (size_t i = 0; i < kStatusAssets_count; ++i) {
    routes[kStatusAssets[i].path] = AssetHandler(kStatusAssets[i]);
  }
  routes["/"] = routes["/index.html"];
  page->api_.AddRoutes(&routes);
  absl::StatusOr<std::unique_ptr<HttpServer>> http =
      HttpServer::Start("status_address", options.address, std::move(routes));
  if (!http.ok()) return http.status();
  page->http_ = *std::move(http);
  page->peers_.Start();
  return page;
}

StatusPage::~StatusPage() {
  http_.reset();
  peers_.Stop();
}

}  // namespace stagger::status
