// The lease stream's wire boundary: stagger.v1 sync messages
// (proto/stagger/v1/sync.proto, protocol 2) <-> the plain values of
// core/lease/messages.h, used by staggerd's AgentSync service and the
// client's sync session alike.
//
// Reading checks what the proto's comments promise (the per-message limits,
// valid Timestamps and Durations, known enum values, a policy table the
// engine accepts) and names the field in an INVALID_ARGUMENT
// ("counts.endpoints[3].buckets: at most 64, got 65"). Endpoint keys are
// not checked here: the receiver runs the engine's key check. Held calls
// (holds, drops, returns, answers) are not converted: their owners read
// the protos. Writing takes any value. Stateless; thread-safe.
#ifndef STAGGER_CORE_WIRE_SYNC_WIRE_H_
#define STAGGER_CORE_WIRE_SYNC_WIRE_H_

#include "absl/status/statusor.h"
#include "core/lease/messages.h"
#include "stagger/v1/sync.pb.h"

namespace stagger::wire {

// The lease parts of a message up: hello, number, acknowledgement,
// resync, counts; and the list limits of the held-call parts.
absl::StatusOr<lease::Up> FromProto(const v1::SyncUp& up);
void ToProto(const lease::Up& up, v1::SyncUp* out);

// The lease parts of a message down.
absl::StatusOr<lease::Down> FromProto(const v1::SyncDown& down);
void ToProto(const lease::Down& down, v1::SyncDown* out);

// Exposed for tests and the fuzz target.
absl::StatusOr<lease::CountReport> FromProto(const v1::CountReport& r);
void ToProto(const lease::CountReport& r, v1::CountReport* out);

}  // namespace stagger::wire

#endif  // STAGGER_CORE_WIRE_SYNC_WIRE_H_
