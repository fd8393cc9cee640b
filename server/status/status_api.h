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
//   GET /api/pauses     ListPausesResponse's JSON (`staggerctl list
//                       --state=PAUSED --json`): every pause in force,
//                       tracked endpoint or not, prefix pauses as their own
//   GET /api/disabled   ListDisabledResponse's JSON: every disabled endpoint
//   GET /api/events     ?after=N&limit=1..1000&incarnation=I: the watch's
//                       events (watch.proto's WatchEvent JSON) numbered
//                       > N (default 0: the oldest held), at most `limit`
//                       (default 100), with "replica", "incarnation" (a
//                       decimal string), "oldest", "next" (the `after` of
//                       the next poll: the last number examined),
//                       "restarted" (an `incarnation` given that is not
//                       this one: the events come from the oldest held)
//                       and "missed_from"/"missed_to" (events after N no
//                       longer held; 0 if none). 404 without a log.
//
// Each answers 200 with its document, or {"error": message} with 400 (a
// query it refuses: status/query_string.h, or a key the engine refuses) or
// 404 (/api/endpoint of an untracked key). Messages via core/http/json.h.
//
// Thread-safe; `engine`, `peers`, `ring` and `clock` must outlive it.
#ifndef STAGGER_SERVER_STATUS_STATUS_API_H_
#define STAGGER_SERVER_STATUS_STATUS_API_H_

#include "absl/strings/string_view.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "core/http/http_server.h"
#include "core/status/decision_ring.h"
#include "server/service/watch_log.h"
#include "server/status/peer_health.h"

namespace stagger::status {

class StatusApi {
 public:
  // `log` may be null (no events).
  StatusApi(const engine::Engine* engine, const PeerHealth* peers,
            const DecisionRing* ring, const engine::Clock* clock,
            service::WatchLog* log = nullptr)
      : engine_(engine), peers_(peers), ring_(ring), clock_(clock), log_(log) {}

  http::HttpResponse Summary(absl::string_view query) const;
  http::HttpResponse Endpoints(absl::string_view query) const;
  http::HttpResponse Endpoint(absl::string_view query) const;
  http::HttpResponse Decisions(absl::string_view query) const;
  http::HttpResponse Pauses(absl::string_view query) const;
  http::HttpResponse Disabled(absl::string_view query) const;
  http::HttpResponse Events(absl::string_view query) const;

  // The routes above, for HttpServer.
  void AddRoutes(http::HttpRoutes* routes) const;

 private:
  const engine::Engine* const engine_;
  const PeerHealth* const peers_;
  const DecisionRing* const ring_;
  const engine::Clock* const clock_;
  service::WatchLog* const log_;
};

}  // namespace stagger::status

#endif  // STAGGER_SERVER_STATUS_STATUS_API_H_
