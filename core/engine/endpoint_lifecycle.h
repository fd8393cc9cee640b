// Endpoint lifecycle: the policy's disable triggers (engine_config.h,
// DisableParams), as functions of one endpoint's state under its shard
// lock. The engine applies what they return (Engine::Disable's path: the
// DisableTable entry, EndpointState::disabled, the condition feed).
//
//  - after_unavailable: the breaker has stayed away from CLOSED that long.
//    TrackUnavailable keeps EndpointRelease::unavailable_since_ns in step
//    with the breaker (set when it is first seen away from CLOSED, cleared
//    when it is CLOSED); the engine calls it before and after every
//    decision. UnavailableTrigger fires once the span reaches the
//    threshold: at a decision, or at Engine::RefreshCondition (so an
//    endpoint with no traffic is disabled within the refresh delay).
//  - permanent_failures: PERMANENT_FAILURE reports that the endpoint
//    answered (the Report's own answer was NOT_RETRYABLE: not while paused
//    or disabled), counted in the DisableTable; a SUCCESS report forgets
//    them. CountPermanentFailure fires on the n-th within the window.
//  - RestartTriggers: after an Enable both start from zero, so a breaker
//    still OPEN does not disable the endpoint again at once.
//
// A trigger never fires on a disabled endpoint, nor with its threshold 0.
// after_unavailable never fires with breaker.enabled false (the breaker
// stays CLOSED).
#ifndef STAGGER_CORE_ENGINE_ENDPOINT_LIFECYCLE_H_
#define STAGGER_CORE_ENGINE_ENDPOINT_LIFECYCLE_H_

#include <optional>

#include "absl/time/time.h"
#include "core/engine/disable_table.h"
#include "core/engine/endpoint_state.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {

void TrackUnavailable(EndpointState& st, absl::Time now);

// The disable the after_unavailable trigger makes now, if it fires.
std::optional<Disable> UnavailableTrigger(const EndpointState& st,
                                          const PolicyParams& p,
                                          absl::Time now);

// One PERMANENT_FAILURE the endpoint answered: counted if the policy
// counts them; the disable the trigger makes, if this one fires it.
std::optional<Disable> CountPermanentFailure(EndpointState& st,
                                             const PolicyParams& p,
                                             absl::Time now,
                                             DisableTable& table);

// A SUCCESS: the permanent failures counted so far no longer count.
void ForgetPermanentFailures(EndpointState& st, DisableTable& table);

// After an Enable: both triggers count from `now`.
void RestartTriggers(EndpointState& st, absl::Time now, DisableTable& table);

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_ENDPOINT_LIFECYCLE_H_
