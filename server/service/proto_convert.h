// The service's own conversions: endpoint state for GetEndpoint /
// ListEndpoints, absl::Status -> grpc::Status, page tokens. Requests,
// decisions, times, enums and batch checks are the shared wire boundary's
// (core/wire/wire.h), re-exported here for the service's handlers.
// Validation that only the wire can get wrong (unknown enum numbers,
// malformed Duration/Timestamp) happens there, with the proto field name in
// the message; range checks that apply to every caller are the engine's
// (Engine::ValidateAdmit/ValidateReport). Stateless; thread-safe.
#ifndef STAGGER_SERVER_SERVICE_PROTO_CONVERT_H_
#define STAGGER_SERVER_SERVICE_PROTO_CONVERT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "core/rpc/raw_unary.h"
#include "core/wire/wire.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "stagger/v1/coordinator.pb.h"

namespace stagger::service {

using wire::CheckBatchSize;
using wire::FromProto;
using wire::PrefixItem;
using wire::ToProto;

void ToProto(const engine::EndpointSnapshot& s, v1::EndpointState* out);
void ToProto(const engine::Disable& d, v1::EndpointDisable* out);

using rpc::ToGrpcStatus;

// Page tokens are the last key of the previous page, hex-encoded (keys are
// arbitrary bytes; tokens must be printable).
std::string EncodePageToken(absl::string_view last_key);
absl::StatusOr<std::string> DecodePageToken(absl::string_view token);

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_PROTO_CONVERT_H_
