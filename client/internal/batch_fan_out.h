// FanOutBatch: one AdmitBatch/ReportBatch call split by the replica each
// key routes to (coordinator_client.h, "a batch is split by owner").
//   * A batch whose items all go to one place is sent whole (so the server
//     checks it), or decided locally whole.
//   * Otherwise the server's checks run here first (a bad item fails the
//     whole batch before any part is sent), every part is sent at once
//     with send(stub, ctx, req, resp, done), the answers are put back in
//     request order, and a part whose replica fails is decided locally.
// Each replica's TryUse is asked at most once per batch (it may claim a
// down replica's probe). Blocks until every part is answered.
#ifndef STAGGER_CLIENT_INTERNAL_BATCH_FAN_OUT_H_
#define STAGGER_CLIENT_INTERNAL_BATCH_FAN_OUT_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/coordinator_client.h"
#include "client/internal/local_decider.h"
#include "client/internal/membership.h"
#include "client/internal/replica_call.h"
#include "core/wire/wire.h"

namespace stagger::client {

// What a batch needs beyond its items: the RPC (whole batch, blocking),
// its async form for parts, the local decider, the call deadline and the
// clock DEFERs are converted on.
template <typename Req, typename Resp>
struct BatchCall {
  using Stub = v1::RetryCoordinator::Stub;
  grpc::Status (Stub::*rpc)(grpc::ClientContext*, const Req&, Resp*);
  std::function<void(Stub*, grpc::ClientContext*, const Req*, Resp*,
                     std::function<void(grpc::Status)>)>
      send;
  absl::Duration timeout;
  const engine::Clock* clock;
};

// The replica index each item routes to (v.replicas.size(): local).
template <typename In>
std::vector<size_t> RouteItems(const Membership::View& v,
                               absl::Span<const In> items) {
  const size_t n = v.replicas.size();
  std::vector<int> tried(n, -1);  // each replica's TryUse, asked once
  const Membership::Usable usable = [&](size_t r, bool serving_only) {
    if (serving_only && !v.replicas[r]->serving()) return false;
    if (tried[r] < 0) tried[r] = v.replicas[r]->TryUse() ? 1 : 0;
    return tried[r] == 1;
  };
  std::vector<size_t> owner(items.size(), n);
  for (size_t i = 0; i < items.size(); ++i) {
    owner[i] = Membership::Pick(v, items[i].endpoint, usable);
  }
  return owner;
}

// The items bound for one replica (or, at index n, for the local decider)
// and their call.
template <typename Req, typename Resp, typename In>
struct BatchPart {
  std::vector<size_t> index;  // into the batch
  std::vector<In> inputs;
  Req req;
  Resp resp;
  grpc::ClientContext ctx;
  grpc::Status status;
};
template <typename Req, typename Resp, typename In>
using BatchParts = std::vector<std::unique_ptr<BatchPart<Req, Resp, In>>>;

// Sends every replica's part at once and waits for all the answers.
template <typename Req, typename Resp, typename In>
void SendParts(const Membership::View& v, const BatchCall<Req, Resp>& call,
               BatchParts<Req, Resp, In>& parts) {
  absl::Mutex mu;
  int pending = 0;
  for (size_t r = 0; r < v.replicas.size(); ++r) {
    if (parts[r] == nullptr) continue;
    BatchPart<Req, Resp, In>& p = *parts[r];
    for (const In& in : p.inputs) wire::ToProto(in, p.req.add_items());
    PrepareContext(&p.ctx, call.timeout);
    {
      absl::MutexLock l(&mu);
      ++pending;
    }
    call.send(v.replicas[r]->stub(), &p.ctx, &p.req, &p.resp,
              [&mu, &pending, &p](grpc::Status s) {
                absl::MutexLock l(&mu);
                p.status = std::move(s);
                --pending;
              });
  }
  absl::MutexLock l(&mu);
  mu.Await(absl::Condition(+[](int* left) { return *left == 0; }, &pending));
}

// One part's decisions: its replica's answer, or local(cause) when it has
// none (the local part, a failed replica). INVALID_ARGUMENT from a replica
// is the batch's error.
template <typename Req, typename Resp, typename In, typename Local>
absl::StatusOr<std::vector<ClientDecision>> PartDecisions(
    Replica* rep, BatchPart<Req, Resp, In>& p, const engine::Clock& clock,
    Local& local) {
  absl::Status cause = absl::UnavailableError(kConsideredDown);
  if (rep != nullptr) {
    if (p.status.ok()) {
      absl::StatusOr<std::vector<ClientDecision>> got =
          FromBatchResponse(p.resp, p.inputs.size(), clock.Now());
      if (got.ok()) {
        rep->MarkUp();
        return got;
      }
      rep->MarkDown(grpc::StatusCode::INTERNAL);
      cause = got.status();
    } else if (absl::Status err = ClassifyRpcError(rep, p.status, &cause);
               !err.ok()) {
      return err;  // checked here already: the replicas' limits differ
    }
  }
  return local(absl::Span<const In>(p.inputs), cause);
}

template <typename Req, typename Resp, typename In, typename Local>
absl::StatusOr<std::vector<ClientDecision>> FanOutBatch(
    const Membership::View& v, absl::Span<const In> items,
    const BatchCall<Req, Resp>& call, const LocalDecider& checks,
    Local local) {
  const size_t n = v.replicas.size();
  const std::vector<size_t> owner = RouteItems(v, items);
  if (items.empty() ||
      std::all_of(owner.begin(), owner.end(),
                  [&](size_t o) { return o == owner.front(); })) {
    return CallOrFallback<std::vector<ClientDecision>>(
        items.empty() || owner.front() == n ? nullptr
                                            : v.replicas[owner.front()],
        call.timeout, call.rpc,
        [&](Req* req) {
          for (const In& in : items) wire::ToProto(in, req->add_items());
        },
        [&](const Resp& resp) {
          return FromBatchResponse(resp, items.size(), call.clock->Now());
        },
        [&](absl::Status cause) { return local(items, std::move(cause)); });
  }
  if (absl::Status s = checks.ValidateBatch(items); !s.ok()) return s;
  BatchParts<Req, Resp, In> parts(n + 1);
  for (size_t i = 0; i < items.size(); ++i) {
    auto& part = parts[owner[i]];
    if (part == nullptr) part = std::make_unique<BatchPart<Req, Resp, In>>();
    part->index.push_back(i);
    part->inputs.push_back(items[i]);
  }
  SendParts(v, call, parts);
  std::vector<ClientDecision> out(items.size());
  for (size_t r = 0; r <= n; ++r) {
    if (parts[r] == nullptr) continue;
    absl::StatusOr<std::vector<ClientDecision>> got = PartDecisions(
        r < n ? v.replicas[r].get() : nullptr, *parts[r], *call.clock, local);
    if (!got.ok()) return got.status();
    for (size_t j = 0; j < parts[r]->index.size(); ++j) {
      out[parts[r]->index[j]] = std::move((*got)[j]);
    }
  }
  return out;
}

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_BATCH_FAN_OUT_H_
