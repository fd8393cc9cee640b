// AgentStatusPage: stagger-agent's live status page for operators, on its
// own address (--status_address), read-only: the page (assets/index.html,
// agent_status.css, agent_status.js, compiled into the binary) and the
// JSON it polls (agent_status_api.h), on one HttpServer (core/http).
// docs/STATUS_PAGE.md, "stagger-agent's page", describes it.
//
// Start(): InvalidArgument / Unavailable from HttpServer::Start, naming
// --status_address. The destructor stops the server (requests in flight
// finish first). `tally` and `clock` must outlive it; `leases` must stay
// callable until it is destroyed.
#ifndef STAGGER_AGENT_STATUS_AGENT_STATUS_PAGE_H_
#define STAGGER_AGENT_STATUS_AGENT_STATUS_PAGE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/status/agent_status_api.h"
#include "agent/status/decision_tally.h"
#include "core/engine/clock.h"
#include "core/http/http_server.h"

namespace stagger::status {
// The page's files, generated from assets/ (see CMakeLists.txt).
extern const http::EmbeddedAsset kAgentStatusAssets[];
extern const size_t kAgentStatusAssets_count;
}  // namespace stagger::status

namespace stagger::agent {

class AgentStatusPage {
 public:
  static absl::StatusOr<std::unique_ptr<AgentStatusPage>> Start(
      const std::string& address, AgentInfo info, LeaseSource leases,
      const DecisionTally* tally, const engine::Clock* clock);
  AgentStatusPage(const AgentStatusPage&) = delete;
  AgentStatusPage& operator=(const AgentStatusPage&) = delete;

  int port() const { return http_->port(); }

 private:
  explicit AgentStatusPage(AgentStatusApi api) : api_(std::move(api)) {}

  const AgentStatusApi api_;
  std::unique_ptr<http::HttpServer> http_;  // stopped first
};

}  // namespace stagger::agent

#endif  // STAGGER_AGENT_STATUS_AGENT_STATUS_PAGE_H_
