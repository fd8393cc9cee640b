#include "client/internal/replica_call.h"

#include "absl/strings/str_cat.h"
#include "client/internal/local_decider.h"
#include "core/wire/wire.h"

namespace stagger::client {

void PrepareContext(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx->set_wait_for_ready(false);  // fail fast while disconnected
}

absl::Status ClassifyRpcError(Replica* r, const grpc::Status& s,
                              absl::Status* cause) {
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
    r->MarkUp();  // the coordinator answered: it is up, the request is bad
    return absl::InvalidArgumentError(s.error_message());
  }
  r->MarkDown(s.error_code());
  *cause = absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("coordinator: ", s.error_message()));
  return absl::OkStatus();
}

absl::StatusOr<ClientDecision> FromWire(const v1::Decision& d,
                                        absl::Time now) {
  absl::StatusOr<engine::Decision> e = wire::FromProto(d, now);
  if (!e.ok()) return e.status();
  ClientDecision out = ToClientDecision(*e, now, DecisionSource::kCoordinator,
                                        absl::OkStatus());
  out.wait_supported = d.wait_supported();
  return out;
}

}  // namespace stagger::client
