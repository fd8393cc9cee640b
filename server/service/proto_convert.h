// Mapping between the stagger.v1 wire messages and engine values, and from
// absl::Status to grpc::Status. Validation that only the wire can get wrong
// (unknown enum numbers, malformed Duration/Timestamp) happens here, with
// the proto field name in the message; range checks that apply to every
// caller are the engine's (Engine::ValidateAdmit/ValidateReport).
// Stateless; thread-safe.
#ifndef STAGGER_SERVER_SERVICE_PROTO_CONVERT_H_
#define STAGGER_SERVER_SERVICE_PROTO_CONVERT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "server/engine/decision.h"
#include "server/engine/engine.h"
#include "stagger/v1/coordinator.pb.h"

namespace stagger::service {

// `in.endpoint` borrows from `req`, which must outlive the result.
absl::StatusOr<engine::AdmitInput> FromProto(const v1::AdmitRequest& req);
absl::StatusOr<engine::ReportInput> FromProto(const v1::ReportRequest& req);

// `now` is the server's clock reading, for defer_for.
void ToProto(const engine::Decision& d, absl::Time now, v1::Decision* out);
void ToProto(const engine::EndpointSnapshot& s, v1::EndpointState* out);

std::optional<engine::BreakerState> FromProto(v1::BreakerState s);

// The status with "items[i]." before its message (batch item errors).
absl::Status PrefixItem(const absl::Status& s, int index);

grpc::Status ToGrpcStatus(const absl::Status& s);

// Page tokens are the last key of the previous page, hex-encoded (keys are
// arbitrary bytes; tokens must be printable).
std::string EncodePageToken(absl::string_view last_key);
absl::StatusOr<std::string> DecodePageToken(absl::string_view token);

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_PROTO_CONVERT_H_
