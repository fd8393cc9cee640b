// ReplicaCall: one RPC to one coordinator replica, and what its outcome
// means for the caller and for the replica (coordinator_client.h, "Every
// RPC has a deadline", "INVALID_ARGUMENT", "Any other failure"):
//   * a usable answer marks the replica up and is the result;
//   * INVALID_ARGUMENT is the caller's bug: the replica is up, the error is
//     returned with the server's message (never masked by a fallback);
//   * any other status, or an answer with no usable decision (INTERNAL),
//     marks the replica down and becomes the cause of a local decision.
// Thread-safe (stateless apart from the replica's own state).
#ifndef STAGGER_CLIENT_INTERNAL_REPLICA_CALL_H_
#define STAGGER_CLIENT_INTERNAL_REPLICA_CALL_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/coordinator_client.h"
#include "client/internal/replica.h"
#include "grpcpp/client_context.h"
#include "stagger/v1/coordinator.pb.h"

namespace stagger::client {

// The message of a local decision made without calling a replica.
inline constexpr absl::string_view kConsideredDown =
    "coordinator considered down (recheck interval not over); not called";

// A call's deadline (real time, `timeout` from now); fail fast while the
// channel is disconnected.
void PrepareContext(grpc::ClientContext* ctx, absl::Duration timeout);

// A failed RPC `s` to `r`: INVALID_ARGUMENT is returned as the error (the
// replica answered: marked up); anything else marks it down, sets *cause
// and returns OK (decide locally).
absl::Status ClassifyRpcError(Replica* r, const grpc::Status& s,
                              absl::Status* cause);

// A decision received at `now`; INTERNAL if it is unusable.
absl::StatusOr<ClientDecision> FromWire(const v1::Decision& d, absl::Time now);
// The decision of a unary response; INTERNAL if it has none.
template <typename Resp>
absl::StatusOr<ClientDecision> FromResponse(const Resp& resp, absl::Time now) {
  if (!resp.has_decision()) {
    return absl::InternalError("coordinator answered no decision");
  }
  return FromWire(resp.decision(), now);
}
// The decisions of a batch response of `n` items.
template <typename Resp>
absl::StatusOr<std::vector<ClientDecision>> FromBatchResponse(
    const Resp& resp, size_t n, absl::Time now) {
  if (static_cast<size_t>(resp.decisions_size()) != n) {
    return absl::InternalError(
        "coordinator answered a batch of the wrong size");
  }
  std::vector<ClientDecision> out;
  out.reserve(n);
  for (int i = 0; i < resp.decisions_size(); ++i) {
    absl::StatusOr<ClientDecision> d = FromWire(resp.decisions(i), now);
    if (!d.ok()) return d.status();
    out.push_back(*std::move(d));
  }
  return out;
}

// Calls `rpc` on `r` (if non-null) with the request fill(&req) and a
// deadline of `timeout`; convert(resp) gives the result. Falls back to
// local(cause) when there is no replica or the call fails (see the top).
template <typename Result, typename Req, typename Resp, typename Fill,
          typename Convert, typename Local>
absl::StatusOr<Result> CallOrFallback(
    const std::shared_ptr<Replica>& r, absl::Duration timeout,
    grpc::Status (v1::RetryCoordinator::Stub::*rpc)(grpc::ClientContext*,
                                                    const Req&, Resp*),
    Fill fill, Convert convert, Local local) {
  absl::Status cause = absl::UnavailableError(kConsideredDown);
  if (r != nullptr) {
    Req req;
    fill(&req);
    Resp resp;
    grpc::ClientContext ctx;
    PrepareContext(&ctx, timeout);
    const grpc::Status s = (r->stub()->*rpc)(&ctx, req, &resp);
    if (s.ok()) {
      absl::StatusOr<Result> d = convert(resp);
      if (d.ok()) {
        r->MarkUp();
        return d;
      }
      r->MarkDown(grpc::StatusCode::INTERNAL);
      cause = d.status();
    } else if (absl::Status err = ClassifyRpcError(r.get(), s, &cause);
               !err.ok()) {
      return err;
    }
  }
  return local(std::move(cause));
}

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_REPLICA_CALL_H_
