// WatchEvents: what the watch (proto/stagger/v1/watch.proto) says of one
// change the engine reports. Pure functions, no clock: the log stamps and
// numbers the events.
//
//  - EventsOf(change): one event per facet of the endpoint's condition
//    that changed, in this order: breaker (OPENED with its cause and end,
//    HALF_OPEN, CLOSED), Retry-After window (SET with its end, ENDED),
//    release (STARTED, FINISHED, with the learned pace), disable
//    (DISABLED with trigger, reason and who; ENABLED with who). near_trip
//    is the lease set's business: no event. A forgotten state's events
//    say `forgotten`.
//  - PauseEvent(pause, kind): PAUSED or RESUMED for an operator's pause
//    (its own endpoint, or a prefix: `endpoint` empty, pause.target
//    says which); ran_out for a pause that reached its end. A pause's
//    events carry its pause_id as their operation_id: the same on every
//    replica an operator's command reached.
#ifndef STAGGER_SERVER_SERVICE_WATCH_EVENTS_H_
#define STAGGER_SERVER_SERVICE_WATCH_EVENTS_H_

#include <string>
#include <vector>

#include "core/engine/endpoint_condition.h"
#include "core/engine/pause_table.h"
#include "stagger/v1/watch.pb.h"

namespace stagger::service {

std::vector<v1::WatchEvent> EventsOf(const engine::ConditionChange& c);

enum class PauseChange { kPaused, kResumed, kRanOut };
v1::WatchEvent PauseEvent(const engine::Pause& p, PauseChange change);

// The proto's Pause for an engine pause (admin.proto).
void ToProto(const engine::Pause& p, v1::Pause* out);

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_WATCH_EVENTS_H_
