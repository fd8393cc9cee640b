// EndpointCondition: the facts about one endpoint that say whether the
// fleet's central view is needed for it, and that operators watch:
//   * its breaker's state (an OPEN breaker past its time reads HALF_OPEN);
//   * whether a Retry-After window is in force;
//   * whether parked deliveries are being released at the learned pace;
//   * whether it is failing toward a trip (near_trip: CLOSED, and its
//     failures at or above kNearTripShare of a trip threshold:
//     CircuitBreaker::TripShare);
//   * whether it is disabled (EndpointState::disabled; disable_table.h).
// An endpoint is clear when none of these holds (pauses are not endpoint
// state: the pause table says those).
//
// The engine reports every change of a tracked endpoint's condition once,
// as a ConditionChange to the sink set with Engine::set_condition_sink:
// after each decision, operator action and late count, when a restored
// record is imported, when Engine::RefreshCondition finds a time-driven
// change (OPEN reads HALF_OPEN, a Retry-After window or a release ended),
// and when the state is forgotten (evicted or reset: `forgotten`, `to`
// clear). The condition last reported is one byte of EndpointState.
//
//   class Log : public ConditionSink {
//     void OnConditionChange(const ConditionChange& c) override {
//       if (!c.to.clear()) not_clear_.insert(std::string(c.endpoint));
//     }
//   };
//   engine.set_condition_sink(&log);  // before decisions start
#ifndef STAGGER_CORE_ENGINE_ENDPOINT_CONDITION_H_
#define STAGGER_CORE_ENGINE_ENDPOINT_CONDITION_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/disable_table.h"
#include "core/engine/endpoint_state.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {

// Failures at this share of a breaker trip threshold make an endpoint
// near_trip: decided centrally, so a trip leaks as little as possible.
inline constexpr double kNearTripShare = 0.5;

struct EndpointCondition {
  BreakerState breaker = BreakerState::kClosed;
  bool retry_after = false;
  bool releasing = false;
  bool near_trip = false;
  bool disabled = false;

  bool clear() const {
    return breaker == BreakerState::kClosed && !retry_after && !releasing &&
           !near_trip && !disabled;
  }
  bool operator==(const EndpointCondition& o) const {
    return Pack() == o.Pack();
  }
  bool operator!=(const EndpointCondition& o) const { return !(*this == o); }
  // Six bits (EndpointState::reported_condition); 0 is the clear one.
  uint8_t Pack() const;
  static EndpointCondition Unpack(uint8_t b);
};

// What an endpoint's condition is now (reads the breaker's window).
EndpointCondition ConditionOf(EndpointState& st, const PolicyParams& p,
                              absl::Time now);

// One change of one endpoint's condition, with what a watcher needs to
// describe the new one.
struct ConditionChange {
  absl::string_view endpoint;  // valid during the call only
  absl::Time at;
  EndpointCondition from;
  EndpointCondition to;
  // The state was dropped (evicted idle, or reset by an operator).
  bool forgotten = false;
  // to.breaker is OPEN: why, and until when.
  OpenCause open_cause = OpenCause::kNone;
  absl::Time open_until = absl::InfinitePast();
  // to.retry_after: the window's end.
  absl::Time retry_after_until = absl::InfinitePast();
  // The learned pace, deliveries per second, whenever the endpoint has one
  // (a release starting or finishing says the pace it ran at); else 0.
  double release_pace = 0;
  // to.disabled and not from.disabled: the disable (trigger, since, who,
  // why). from.disabled and not to.disabled: `enabled` says who ended it.
  // Null otherwise, and when the caller had none to give.
  const Disable* disabled = nullptr;
  const Enable* enabled = nullptr;
};

// What the caller of ReportCondition knows of a disable or an enable it
// just made (ConditionChange::disabled / enabled).
struct ConditionNotes {
  const Disable* disabled = nullptr;
  const Enable* enabled = nullptr;
};

class ConditionSink {
 public:
  // Runs under the endpoint's shard lock: record what is needed and
  // return; never call the engine from here.
  virtual void OnConditionChange(const ConditionChange& c) = 0;

 protected:
  ~ConditionSink() = default;
};

// Reports `st`'s condition to `sink` if it changed since it was last
// reported (and records it as reported). `sink` may be null: nothing.
void ReportCondition(EndpointState& st, const PolicyParams& p, absl::Time now,
                     ConditionSink* sink, ConditionNotes notes = {});
// Reports that `st` is being forgotten, if its last reported condition was
// not clear.
void ReportForgotten(const EndpointState& st, absl::Time now,
                     ConditionSink* sink);

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_ENDPOINT_CONDITION_H_
