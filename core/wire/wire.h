// The one wire boundary: stagger.v1 messages <-> the shared value types of
// core/engine/decision.h (and capacity_estimator.h's pace enums), used by
// the service (server side) and the client library alike.
//
// Contract:
//   * Duration/Timestamp conversion exists here only. Reading checks the
//     google.protobuf ranges and names the field in the error
//     (INVALID_ARGUMENT "deadline: not a valid Timestamp (...)"); writing
//     takes any finite value (seconds and nanos share the Duration's sign).
//   * Enum mappings exist here only; the engine enums are declared with the
//     proto's numbers and static_asserts in wire.cc keep them equal, so a
//     mapping is a cast that cannot drift. Reading refuses UNSPECIFIED and
//     unknown numbers (nullopt; the caller names the field).
//   * Request conversion is symmetric: what ToProto(AdmitInput) writes,
//     FromProto(AdmitRequest) reads back equal. An input's endpoint borrows
//     from the request it was read from.
//   * The batch checks (size, "items[i]." prefix) are the server's, used by
//     the client's local fallback too, so both say the same thing.
// Stateless; thread-safe.
#ifndef STAGGER_CORE_WIRE_WIRE_H_
#define STAGGER_CORE_WIRE_WIRE_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "core/engine/capacity_estimator.h"
#include "core/engine/decision.h"
#include "stagger/v1/coordinator.pb.h"

namespace stagger::wire {

// --- Times -----------------------------------------------------------------
absl::StatusOr<absl::Duration> FromProto(const google::protobuf::Duration& d,
                                         absl::string_view field);
absl::StatusOr<absl::Time> FromProto(const google::protobuf::Timestamp& t,
                                     absl::string_view field);
void ToProto(absl::Duration d, google::protobuf::Duration* out);
void ToProto(absl::Time t, google::protobuf::Timestamp* out);

// --- Enums -----------------------------------------------------------------
v1::Outcome ToProto(engine::Outcome o);
v1::Verdict ToProto(engine::Verdict v);
v1::Reason ToProto(engine::Reason r);
v1::BreakerState ToProto(engine::BreakerState s);
v1::PaceSource ToProto(engine::CapacityEstimator::Source s);
v1::PacePhase ToProto(engine::CapacityEstimator::Phase p);
std::optional<engine::Outcome> FromProto(v1::Outcome o);
std::optional<engine::Verdict> FromProto(v1::Verdict v);
std::optional<engine::Reason> FromProto(v1::Reason r);
std::optional<engine::BreakerState> FromProto(v1::BreakerState s);

// --- Requests --------------------------------------------------------------
// `in.endpoint` borrows from `req`, which must outlive the result.
absl::StatusOr<engine::AdmitInput> FromProto(const v1::AdmitRequest& req);
absl::StatusOr<engine::ReportInput> FromProto(const v1::ReportRequest& req);
// Unset times (InfiniteFuture deadline, InfinitePast first attempt) are
// left unset on the wire. An out-of-range outcome is passed through for the
// server to refuse.
void ToProto(const engine::AdmitInput& in, v1::AdmitRequest* out);
void ToProto(const engine::ReportInput& in, v1::ReportRequest* out);

// --- Decisions -------------------------------------------------------------
// `now` is the sender's clock reading: defer_for = defer_until - now.
void ToProto(const engine::Decision& d, absl::Time now, v1::Decision* out);
// The receiver's view: a DEFER's instant is `now` + defer_for (so the two
// clocks need not agree), else defer_until. Only the worker-facing fields
// (verdict, reason, delay >= 0, defer_until, attempt) are set. INTERNAL if
// the decision is unusable (unknown verdict, DEFER without a time, bad
// Duration/Timestamp).
absl::StatusOr<engine::Decision> FromProto(const v1::Decision& d,
                                           absl::Time now);

// --- Batches ---------------------------------------------------------------
// INVALID_ARGUMENT "items: a batch holds 1..max items
// (limits.max_batch_size), got n" unless 1 <= n <= max.
absl::Status CheckBatchSize(size_t n, int max);
// The status with "items[i]." before its message (a batch item's error).
absl::Status PrefixItem(const absl::Status& s, size_t index);

}  // namespace stagger::wire

#endif  // STAGGER_CORE_WIRE_WIRE_H_
