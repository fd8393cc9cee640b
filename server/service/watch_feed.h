// WatchFeed: writes the watch's events (watch_events.h) into a replica's
// change log (watch_log.h): each change of an endpoint's condition (as a
// ConditionSink of the engine's feed), each pause stored or removed (as
// the PauseTable's listener) and each pause that ran out (from the
// ConditionRefresher). Nothing is filtered: the watch sees every
// transition (the lease set's hysteresis is the lease set's own).
//
// OnConditionChange runs under the endpoint's shard lock: it builds the
// events and appends them (the log's lock, a leaf), nothing else.
// Thread-safe; `log` must outlive it.
#ifndef STAGGER_SERVER_SERVICE_WATCH_FEED_H_
#define STAGGER_SERVER_SERVICE_WATCH_FEED_H_

#include "core/engine/endpoint_condition.h"
#include "core/engine/pause_table.h"
#include "server/service/watch_log.h"

namespace stagger::service {

class WatchFeed : public engine::ConditionSink {
 public:
  explicit WatchFeed(WatchLog* log) : log_(log) {}

  void OnConditionChange(const engine::ConditionChange& c) override;
  void OnPause(const engine::Pause& p, bool removed);
  void OnPauseRanOut(const engine::Pause& p);

 private:
  WatchLog* const log_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_WATCH_FEED_H_
