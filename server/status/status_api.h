// StatusApi: the status page's JSON endpoints, read-only, over the engine's
// own inspection calls (the ones ListEndpoints and GetEndpoint use, under
// the same short shard locks), never touching the decision path's state.
//
//   GET /api/summary    {"now", "replica", "replicas": [{"name", "self",
//                       "address", "health", "detail", "checked_at"}],
//                       "total_tracked", "breakers": {state: count},
//                       "evicted_total"}
//   GET /api/endpoints  ?filter=not_clear|all&page_size=1..1000&page_token=T
//                       ListEndpointsResponse's JSON (`staggerctl list
//                       --json`'s fields: endpoints, next_page_token,
//                       total_tracked) plus "filter", "page_size",
//                       "scanned" (endpoints after the token the scan
//                       examined), "matched" (those that pass the filter)
//                       and "left_out" (matched but not on this page: on
//                       the next pages).
//                       not_clear (the default): Engine::ListNotClear;
//                       all: Engine::List. page_size as ListEndpoints'
//                       (default kDefaultPageSize, at most kMaxPageSize);
//                       page tokens are ListEndpoints' too.
//   GET /api/endpoint   ?key=K: GetEndpointResponse's JSON, as
//                       `staggerctl get K --json`
//   GET /api/decisions  {"last_second": Unix s, "seconds": 600, "verdicts":
//                       {"PROCEED": [600 counts, oldest first], "DEFER",
//                       "GIVE_UP", "DONE"}} from the DecisionRing
//
// Each answers 200 with its document, or {"error": message} with 400 (a
// query it refuses: status/query_string.h, or a key the engine refuses) or
// 404 (/api/endpoint of an untracked key). Messages via core/status/json.h.
//
// Thread-safe; `engine`, `peers`, `ring` and `clock` must outlive it.
#ifndef STAGGER_SERVER_STATUS_STATUS_API_H_
#define STAGGER_SERVER_STATUS_STATUS_API_H_

#include "absl/strings/string_view.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "core/status/decision_ring.h"
#include "core/status/http_server.h"
#include "server/status/peer_health.h"

namespace stagger::status {

class StatusApi {
 public:
  StatusApi(const engine::Engine* engine, const PeerHealth* peers,
            const DecisionRing* ring, const engine::Clock* clock)
      : engine_(engine), peers_(peers), ring_(ring), clock_(clock) {}

  HttpResponse Summary(absl::string_view query) const;
  HttpResponse Endpoints(absl::string_view query) const;
  HttpResponse Endpoint(absl::string_view query) const;
  HttpResponse Decisions(absl::string_view query) const;

  // The routes above, for HttpServer.
  void AddRoutes(HttpRoutes* routes) const;

 private:
  const engine::Engine* const engine_;
  const PeerHealth* const peers_;
  const DecisionRing* const ring_;
  const engine::Clock* const clock_;
};

}  // namespace stagger::status

#endif  // STAGGER_SERVER_STATUS_STATUS_API_H_
