// StateRecord: an engine::EndpointRecord (core/engine/endpoint_record.h)
// to and from its wire form, stagger.v1.state.Endpoint, and an operator's
// engine::Pause to and from stagger.v1.state.Pause, and a disabled
// endpoint's engine::Disable to and from stagger.v1.state.Disabled
// (proto/stagger/v1/snapshot.proto). Field for field; instants stay
// absolute Unix time. Reading is lenient where the engine clamps anyway
// (an unknown breaker state or pace phase reads as the default); it never
// fails: whether a key is acceptable is the engine's call at import.
#ifndef STAGGER_SERVER_STATE_STATE_RECORD_H_
#define STAGGER_SERVER_STATE_STATE_RECORD_H_

#include "core/engine/disable_table.h"
#include "core/engine/endpoint_record.h"
#include "core/engine/pause_table.h"
#include "stagger/v1/snapshot.pb.h"

namespace stagger::state {

// Overwrites `out` (reusing its allocations).
void ToProto(const engine::EndpointRecord& in, v1::state::Endpoint* out);
engine::EndpointRecord FromProto(const v1::state::Endpoint& in);

// An operator's pause; its instants as Unix nanoseconds (0 reads as
// InfinitePast, a pause that has ended).
void ToProto(const engine::Pause& in, v1::state::Pause* out);
engine::Pause FromProto(const v1::state::Pause& in);

// A disabled endpoint; an unknown trigger reads as kOperator.
void ToProto(const engine::Disable& in, v1::state::Disabled* out);
engine::Disable FromProto(const v1::state::Disabled& in);

}  // namespace stagger::state

#endif  // STAGGER_SERVER_STATE_STATE_RECORD_H_
