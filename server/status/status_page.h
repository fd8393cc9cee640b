// StatusPage: staggerd's live status page for operators, on its own
// address (--status_address), read-only: the page itself (index.html,
// status.css, status.js from assets/, compiled into the binary) and the
// JSON it polls (status_api.h), on one HttpServer (core/http). It owns
// what only the page needs: the DecisionRing the chart reads (ring(): the
// caller has the decisions counted into it, staggerd by ServerMetrics) and
// the PeerHealth checker. docs/STATUS_PAGE.md describes the page.
//
// Start(): InvalidArgument / Unavailable from HttpServer::Start (naming
// --status_address). The destructor stops the server, then the peer
// checks. `engine` and `clock` must outlive it.
#ifndef STAGGER_SERVER_STATUS_STATUS_PAGE_H_
#define STAGGER_SERVER_STATUS_STATUS_PAGE_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "core/http/http_server.h"
#include "core/status/decision_ring.h"
#include "server/status/peer_health.h"
#include "server/status/status_api.h"

namespace stagger::status {

// The page's files, generated from assets/ (see CMakeLists.txt).
extern const http::EmbeddedAsset kStatusAssets[];
extern const size_t kStatusAssets_count;

struct StatusPageOptions {
  std::string address;                         // --status_address
  std::vector<std::string> members;            // --replicas; empty: one
  std::string self;                            // this replica's name
  std::map<std::string, std::string> peers;    // ParseStatusPeers
};

class StatusPage {
 public:
  // `log`: the watch's change log for the live feed (null: none).
  static absl::StatusOr<std::unique_ptr<StatusPage>> Start(
      const StatusPageOptions& options, const engine::Engine* engine,
      const engine::Clock* clock, service::WatchLog* log = nullptr);
  ~StatusPage();
  StatusPage(const StatusPage&) = delete;
  StatusPage& operator=(const StatusPage&) = delete;

  int port() const { return http_->port(); }
  DecisionRing* ring() { return &ring_; }

 private:
  StatusPage(const StatusPageOptions& options, const engine::Engine* engine,
             const engine::Clock* clock, service::WatchLog* log);

  DecisionRing ring_;
  PeerHealth peers_;
  StatusApi api_;
  std::unique_ptr<http::HttpServer> http_;
};

}  // namespace stagger::status

#endif  // STAGGER_SERVER_STATUS_STATUS_PAGE_H_
