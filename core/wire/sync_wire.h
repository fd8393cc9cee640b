// The lease stream's wire boundary: stagger.v1 sync messages
// (proto/stagger/v1/sync.proto) <-> the plain values of
// core/lease/sync_messages.h, used by staggerd's AgentSync service and the
// client's sync session alike.
//
// Reading checks what the proto's comments promise (the per-message limits,
// valid Timestamps and Durations) and names the field in an
// INVALID_ARGUMENT ("counts.endpoints[3].buckets: at most 64, got 65").
// Endpoint keys are not checked here: the receiver runs the engine's key
// check. Writing takes any value. Stateless; thread-safe.
#ifndef STAGGER_CORE_WIRE_SYNC_WIRE_H_
#define STAGGER_CORE_WIRE_SYNC_WIRE_H_

#include "absl/status/statusor.h"
#include "core/lease/sync_messages.h"
#include "stagger/v1/sync.pb.h"

namespace stagger::wire {

absl::StatusOr<lease::CountReport> FromProto(const v1::CountReport& r);
void ToProto(const lease::CountReport& r, v1::CountReport* out);

absl::StatusOr<lease::LeaseGrant> FromProto(const v1::LeaseGrant& g);
void ToProto(const lease::LeaseGrant& g, v1::LeaseGrant* out);

lease::LeaseRevoke FromProto(const v1::LeaseRevoke& r);
void ToProto(const lease::LeaseRevoke& r, v1::LeaseRevoke* out);

lease::LeaseAck FromProto(const v1::LeaseAck& a);
void ToProto(const lease::LeaseAck& a, v1::LeaseAck* out);

// The list limits of one SyncUp message (everything but the counts'
// contents, which FromProto(CountReport) checks).
absl::Status CheckSyncUpLimits(const v1::SyncUp& up);

}  // namespace stagger::wire

#endif  // STAGGER_CORE_WIRE_SYNC_WIRE_H_
