// ConditionFanOut: the one ConditionSink staggerd gives its engine
// (Engine::set_condition_sink takes one), passing every change to each
// sink added: the watch's change log and its refresher (endpoint_watch.h),
// and the lease set of agents' streams. PauseFanOut does the same for the
// PauseTable's one listener.
//
// Add every sink before the engine's first change: before the state file
// is loaded (its import reports the restored conditions) and before the
// servers start. A sink added later misses what came before it.
// OnConditionChange runs under the endpoint's shard lock, as each sink's
// does. Thread-safe once the sinks are added.
//
//   ConditionFanOut fan_out;
//   fan_out.Add(&watch_feed);
//   fan_out.Add(&lease_set);
//   engine.set_condition_sink(&fan_out);
#ifndef STAGGER_SERVER_DAEMON_CONDITION_FAN_OUT_H_
#define STAGGER_SERVER_DAEMON_CONDITION_FAN_OUT_H_

#include <functional>
#include <vector>

#include "core/engine/endpoint_condition.h"
#include "core/engine/pause_table.h"

namespace stagger::daemon {

class ConditionFanOut : public engine::ConditionSink {
 public:
  void Add(engine::ConditionSink* sink) { sinks_.push_back(sink); }
  void OnConditionChange(const engine::ConditionChange& c) override {
    for (engine::ConditionSink* s : sinks_) s->OnConditionChange(c);
  }

 private:
  std::vector<engine::ConditionSink*> sinks_;
};

class PauseFanOut {
 public:
  void Add(engine::PauseTable::Listener l) { listeners_.push_back(std::move(l)); }
  // What to give PauseTable::set_listener.
  engine::PauseTable::Listener listener() {
    return [this](const engine::Pause& p, bool removed) {
      for (const engine::PauseTable::Listener& l : listeners_) l(p, removed);
    };
  }

 private:
  std::vector<engine::PauseTable::Listener> listeners_;
};

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_CONDITION_FAN_OUT_H_
