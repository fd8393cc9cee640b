#include "agent/status/agent_status_page.h"

#include <utility>

namespace stagger::agent {

absl::StatusOr<std::unique_ptr<AgentStatusPage>> AgentStatusPage::Start(
    const std::string& address, AgentInfo info, LeaseSource leases,
    const DecisionTally* tally, const engine::Clock* clock) {
  std::unique_ptr<AgentStatusPage> page(new AgentStatusPage(
      AgentStatusApi(std::move(info), std::move(leases), tally, clock)));
  http::HttpRoutes routes;
  for (size_t i = 0; i < status::kAgentStatusAssets_count; ++i) {
    routes[status::kAgentStatusAssets[i].path] =
        http::AssetHandler(status::kAgentStatusAssets[i]);
  }
  routes["/"] = routes["/index.html"];
  page->api_.AddRoutes(&routes);
  absl::StatusOr<std::unique_ptr<http::HttpServer>> http =
      http::HttpServer::Start("status_address", address, std::move(routes));
  if (!http.ok()) return http.status();
  page->http_ = *std::move(http);
  return page;
}

}  // namespace stagger::agent
