// The status page step of staggerd (--status_address, --status_peers;
// server/status/status_page.h, docs/STATUS_PAGE.md).
//
// CheckStatusPage runs with the other flag checks, before anything starts:
// --status_peers must parse and name only other members of --replicas
// (status/peer_health.h, ParseStatusPeers), and is refused without
// --status_address (it would do nothing). InvalidArgument naming the flag;
// staggerd then exits kExitBadConfig.
//
// StartStatusPage: with an empty address (the default) the page is off:
// returns nullptr. Otherwise serves it and logs "status page on port N".
// Errors are the HTTP server's (the address malformed or taken, naming
// --status_address); staggerd then exits kExitStartupFailure. `engine`
// must outlive it.
//
// HookStatusPage: `metrics` counts every decision it records into the
// page's chart from now on (nothing if `page` is null). The page must
// outlive `metrics`: staggerd starts it first, before the metrics.
#ifndef STAGGER_SERVER_DAEMON_STATUS_PAGE_STEP_H_
#define STAGGER_SERVER_DAEMON_STATUS_PAGE_STEP_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/engine/engine.h"
#include "server/metrics/server_metrics.h"
#include "server/service/ownership.h"
#include "server/service/watch_log.h"
#include "server/status/status_page.h"

namespace stagger::daemon {

absl::StatusOr<status::StatusPageOptions> CheckStatusPage(
    const std::string& address, const std::string& peers,
    const std::optional<service::Ownership>& ownership);

// `log`: the watch's change log, for the page's live feed (nullable).
absl::StatusOr<std::unique_ptr<status::StatusPage>> StartStatusPage(
    const status::StatusPageOptions& options, const engine::Engine* engine,
    service::WatchLog* log = nullptr);

void HookStatusPage(status::StatusPage* page, metrics::ServerMetrics* metrics);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_STATUS_PAGE_STEP_H_
