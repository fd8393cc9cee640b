#include "server/daemon/status_page_step.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/engine/clock.h"
#include "server/daemon/log.h"
#include "server/status/peer_health.h"

namespace stagger::daemon {

absl::StatusOr<status::StatusPageOptions> CheckStatusPage(
    const std::string& address, const std::string& peers,
    const std::optional<service::Ownership>& ownership) {
  status::StatusPageOptions options;
  options.address = address;
  if (ownership.has_value()) {
    options.members = ownership->members().names();
    options.self = ownership->self();
  }
  if (address.empty() && !peers.empty()) {
    return absl::InvalidArgumentError(
        "status_peers: needs --status_address (the page that shows them)");
  }
  absl::StatusOr<std::map<std::string, std::string>> parsed =
      status::ParseStatusPeers(peers, options.members, options.self);
  if (!parsed.ok()) return parsed.status();
  options.peers = *std::move(parsed);
  return options;
}

absl::StatusOr<std::unique_ptr<status::StatusPage>> StartStatusPage(
    const status::StatusPageOptions& options, const engine::Engine* engine,
    service::WatchLog* log) {
  if (options.address.empty()) return nullptr;
  absl::StatusOr<std::unique_ptr<status::StatusPage>> page =
      status::StatusPage::Start(options, engine,
                                engine->clock(), log);
  if (page.ok()) {
    Log(absl::StrCat("status page on port ", (*page)->port()));
  }
  return page;
}

void HookStatusPage(status::StatusPage* page,
                    metrics::ServerMetrics* metrics) {
  if (page != nullptr && metrics != nullptr) {
    metrics->set_decision_ring(page->ring());
  }
}

}  // namespace stagger::daemon
