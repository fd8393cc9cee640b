// EndpointWatch: staggerd's watch step (proto/stagger/v1/watch.proto,
// docs/API.md "The watch"). It owns this replica's change log, the feed
// that writes the engine's changes and the operators' pauses into it, the
// refresher that finds the changes time alone makes (and pauses running
// out), and the EndpointWatch service that streams the log.
//
//   CheckWatchFlags   with the other flags: --watch_history_events,
//                     --watch_history_age (InvalidArgument naming the
//                     flag; staggerd exits kExitBadConfig).
//   EndpointWatch     right after the engine, before the state file is
//                     loaded (so the restored conditions are in the log):
//                     becomes the engine's condition sink (a
//                     ConditionFanOut: fan_out() takes more sinks, e.g.
//                     the lease set, until Start) and its pause listener.
//   HookMetrics       once the metrics exist, before Start.
//   Start             the refresher's thread and the service.
//   StopRefresher     before any sink added through fan_out() or
//                     pause_fan_out() is destroyed: the refresher's thread
//                     calls every sink. Idempotent.
//   service()         for the gRPC port; Shutdown() before the port closes
//                     (every stream ends UNAVAILABLE).
// The destructor stops the refresher too, which is too late for sinks that
// die before the watch. `engine` (and the metrics) outlive
// it; it outlives the gRPC server.
#ifndef STAGGER_SERVER_DAEMON_ENDPOINT_WATCH_H_
#define STAGGER_SERVER_DAEMON_ENDPOINT_WATCH_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "core/engine/engine.h"
#include "server/daemon/condition_fan_out.h"
#include "server/metrics/server_metrics.h"
#include "server/service/condition_refresher.h"
#include "server/service/watch_feed.h"
#include "server/service/watch_log.h"
#include "server/service/watch_service.h"

namespace stagger::daemon {

absl::Status CheckWatchFlags(const service::WatchLog::Options& options);

class EndpointWatch {
 public:
  EndpointWatch(engine::Engine* engine, service::WatchLog::Options options);
  ~EndpointWatch();
  EndpointWatch(const EndpointWatch&) = delete;
  EndpointWatch& operator=(const EndpointWatch&) = delete;

  ConditionFanOut& fan_out() { return fan_out_; }
  PauseFanOut& pause_fan_out() { return pause_fan_out_; }
  service::WatchLog& log() { return log_; }

  void HookMetrics(metrics::ServerMetrics* metrics);
  void Start();
  void StopRefresher();
  service::WatchService* service() { return service_.get(); }
  void Shutdown();

 private:
  engine::Engine* const engine_;
  service::WatchLog log_;
  service::WatchFeed feed_;
  service::ConditionRefresher refresher_;
  ConditionFanOut fan_out_;
  PauseFanOut pause_fan_out_;
  metrics::ServerMetrics* metrics_ = nullptr;
  std::unique_ptr<service::WatchService> service_;
};

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_ENDPOINT_WATCH_H_
