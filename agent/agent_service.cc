#include "agent/agent_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/rpc/raw_unary.h"
#include "core/wire/wire.h"

namespace stagger::agent {
namespace {

using client::ClientDecision;

void ToWire(const ClientDecision& d, absl::Time now, v1::Decision* out) {
  engine::Decision e;
  e.verdict = d.verdict;
  e.reason = d.reason;
  e.delay = d.delay;
  e.defer_until = d.defer_until;
  e.attempt = d.attempt;
  e.admission = d.admission;
  wire::ToProto(e, now, out);
  out->set_wait_supported(d.wait_supported);
}

// A waiting Admit held here without holding a thread: the coordinator has an
// entry for it in its waiting line (over the lease stream; a waiting call
// of its own while the stream is down), and the call is finished when the
// coordinator answers (or the client's fallback decides). Its wait is
// min(wait, the worker's deadline - kDeadlineMargin); it is answered by
// min(wait + 250 ms, the worker's deadline - kAnswerMargin) whatever the
// coordinator does; the worker cancelling it drops the coordinator's entry
// too.
// An Admit's or Report's answer; `ctx` (may be null) gets its source as
// initial metadata (kSourceHeader: "lease", "coordinator" or "local").
template <typename Response>
grpc::Status Answer(const absl::StatusOr<ClientDecision>& d, absl::Time now,
                    DecisionTally* tally, Response* resp,
                    grpc::CallbackServerContext* ctx) {
  if (!d.ok()) return rpc::ToGrpcStatus(d.status());
  if (tally != nullptr) tally->Record(*d);
  if (ctx != nullptr) {
    ctx->AddInitialMetadata(AgentService::kSourceHeader,
                            client::DecisionSourceName(d->source));
  }
  ToWire(*d, now, resp->mutable_decision());
  return grpc::Status::OK;
}

class WaitingAdmitReactor final : public grpc::ServerUnaryReactor {
 public:
  // The call's wait ends this long before the worker's deadline...
  static constexpr absl::Duration kDeadlineMargin = absl::Milliseconds(150);
  // ...and it is answered at the latest this long before it, whatever the
  // coordinator does (by the fallback then; SyncSession::kHeldGrace after
  // the wait).
  static constexpr absl::Duration kAnswerMargin = absl::Milliseconds(100);

  // `held` counts the calls held; this one is in it until OnDone.
  WaitingAdmitReactor(client::CoordinatorClient* client, DecisionTally* tally,
                      grpc::CallbackServerContext* ctx, grpc::ByteBuffer* resp,
                      v1::AdmitRequest request, absl::Time deadline,
                      std::atomic<int64_t>* held)
      : client_(client),
        tally_(tally),
        ctx_(ctx),
        resp_(resp),
        request_(std::move(request)),
        deadline_(deadline),
        held_(held) {}

  // `in` borrows from request_ once converted. A wait over the maximum is
  // left for the coordinator to refuse, as it would refuse it directly.
  void Start() {
    absl::StatusOr<engine::AdmitInput> in = wire::FromProto(request_);
    if (!in.ok()) return Finish(rpc::ToGrpcStatus(in.status()));
    if (in->wait <= engine::kMaxWait) {
      in->wait = std::max(
          std::min(in->wait, deadline_ - absl::Now() - kDeadlineMargin),
          absl::Milliseconds(1));
    }
    client_->AdmitWaitingAsync(
        *in, &cancel_,
        [this](absl::StatusOr<ClientDecision> d) {
          v1::AdmitResponse response;
          grpc::Status s =
              Answer(d, client_->clock().Now(), tally_, &response, ctx_);
          bool own = false;
          if (s.ok()) {
            s = grpc::SerializationTraits<v1::AdmitResponse>::Serialize(
                response, resp_, &own);
          }
          Finish(s);
        },
        deadline_ - kAnswerMargin);
  }
  void OnCancel() override { cancel_.Cancel(); }
  void OnDone() override {
    held_->fetch_sub(1, std::memory_order_relaxed);
    delete this;
  }
  // Short reactions, run inline (see server/service/wait_room.h's
  // WaitingCall: the same reason).
  bool InternalInlineable() override { return true; }

 private:
  client::CoordinatorClient* const client_;
  DecisionTally* const tally_;
  grpc::CallbackServerContext* const ctx_;
  grpc::ByteBuffer* const resp_;
  const v1::AdmitRequest request_;
  const absl::Time deadline_;  // the worker's
  std::atomic<int64_t>* const held_;
  client::Canceller cancel_;
};


template <typename Response>
grpc::Status AnswerBatch(
    const absl::StatusOr<std::vector<ClientDecision>>& ds, absl::Time now,
    DecisionTally* tally, Response* resp) {
  if (!ds.ok()) return rpc::ToGrpcStatus(ds.status());
  for (const ClientDecision& d : *ds) {
    if (tally != nullptr) tally->Record(d);
    ToWire(d, now, resp->add_decisions());
  }
  return grpc::Status::OK;
}

// Every item of a batch request converted as staggerd converts them: the
// size first, then each item (a wire-level error names its item:
// "items[3].deadline: ...").
template <typename Input, typename Request>
absl::StatusOr<std::vector<Input>> BatchInputs(const Request& req,
                                               int max_batch_size) {
  if (absl::Status s = wire::CheckBatchSize(req.items_size(), max_batch_size);
      !s.ok()) {
    return s;
  }
  std::vector<Input> inputs;
  inputs.reserve(req.items_size());
  for (int i = 0; i < req.items_size(); ++i) {
    absl::StatusOr<Input> in = wire::FromProto(req.items(i));
    if (!in.ok()) return wire::PrefixItem(in.status(), i);
    inputs.push_back(*in);
  }
  return inputs;
}

grpc::ServerUnaryReactor* NotHere(grpc::CallbackServerContext* ctx) {
  return rpc::FinishWith(
      ctx, grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                        "stagger-agent serves decisions (Admit, Report and "
                        "their batches); ask a coordinator for endpoint "
                        "state (staggerctl --address <coordinator>)"));
}

}  // namespace

AgentService::AgentService(client::CoordinatorClient* client, WorkPool* pool,
                           DecisionTally* tally, int64_t max_waiting)
    : client_(client), pool_(pool), tally_(tally), max_waiting_(max_waiting) {}

template <typename Request, typename Response, typename Inline,
          typename Pooled>
grpc::ServerUnaryReactor* AgentService::Serve(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* req,
                                              grpc::ByteBuffer* resp,
                                              Inline try_inline,
                                              Pooled pooled) {
  auto request = std::make_shared<Request>();
  if (!rpc::ParseRequest(*req, request.get())) {
    return rpc::FinishUnparsable<Request>(ctx, *req);
  }
  return ServeParsed<Request, Response>(ctx, std::move(request), resp,
                                        std::move(try_inline),
                                        std::move(pooled));
}

template <typename Request, typename Response, typename Inline,
          typename Pooled>
grpc::ServerUnaryReactor* AgentService::ServeParsed(
    grpc::CallbackServerContext* ctx, std::shared_ptr<const Request> request,
    grpc::ByteBuffer* resp, Inline try_inline, Pooled pooled) {
  const auto finish = [resp](grpc::ServerUnaryReactor* reactor,
                             grpc::Status status, const Response& response) {
    if (status.ok()) {
      bool own_buffer = false;
      status = grpc::SerializationTraits<Response>::Serialize(response, resp,
                                                              &own_buffer);
    }
    reactor->Finish(status);
  };
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  Response response;
  if (std::optional<grpc::Status> s = try_inline(*request, &response)) {
    finish(reactor, *s, response);
    return reactor;
  }
  const bool queued = pool_->Submit([request, reactor, pooled, finish] {
    Response response;
    const grpc::Status status = pooled(*request, &response);
    finish(reactor, status, response);
  });
  if (!queued) {
    reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 "stagger-agent: too many calls waiting for "
                                 "a coordinator"));
  }
  return reactor;
}

grpc::ServerUnaryReactor* AgentService::MaybeHold(
    grpc::CallbackServerContext* ctx, v1::AdmitRequest* request,
    grpc::ByteBuffer* resp) {
  if (!request->has_wait() ||
      (request->wait().seconds() <= 0 && request->wait().nanos() <= 0)) {
    return nullptr;
  }
  if (waiting_.fetch_add(1, std::memory_order_relaxed) >= max_waiting_) {
    // Full: answered as an Admit without a wait.
    waiting_.fetch_sub(1, std::memory_order_relaxed);
    overflows_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  auto* call = new WaitingAdmitReactor(client_, tally_, ctx, resp, std::move(*request),
                                absl::FromChrono(ctx->deadline()), &waiting_);
  call->Start();
  return call;
}

// Parsed once: held if it waits and there is room, else answered.
grpc::ServerUnaryReactor* AgentService::Admit(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* req,
                                              grpc::ByteBuffer* resp) {
  using Req = v1::AdmitRequest;
  using Resp = v1::AdmitResponse;
  auto request = std::make_shared<Req>();
  if (!rpc::ParseRequest(*req, request.get())) {
    return rpc::FinishUnparsable<Req>(ctx, *req);
  }
  if (grpc::ServerUnaryReactor* held = MaybeHold(ctx, request.get(), resp)) {
    return held;
  }
  return ServeParsed<Req, Resp>(
      ctx, std::move(request), resp,
      [this, ctx](const Req& r, Resp* out) -> std::optional<grpc::Status> {
        absl::StatusOr<engine::AdmitInput> in = wire::FromProto(r);
        if (!in.ok()) return rpc::ToGrpcStatus(in.status());
        std::optional<ClientDecision> d = client_->AdmitUnderLease(*in);
        if (!d.has_value()) return std::nullopt;
        return Answer(*d, client_->clock().Now(), tally_, out, ctx);
      },
      [this, ctx](const Req& r, Resp* out) {
        absl::StatusOr<engine::AdmitInput> in = wire::FromProto(r);
        if (!in.ok()) return rpc::ToGrpcStatus(in.status());
        // A wait here is one the agent had no room to hold: not passed on
        // (a wait out of range still reaches the coordinator's check).
        if (in->wait > absl::ZeroDuration() && in->wait <= engine::kMaxWait) {
          in->wait = absl::ZeroDuration();
        }
        return Answer(client_->Admit(*in), client_->clock().Now(), tally_,
                      out, ctx);
      });
}

grpc::ServerUnaryReactor* AgentService::Report(grpc::CallbackServerContext* ctx,
                                               const grpc::ByteBuffer* req,
                                               grpc::ByteBuffer* resp) {
  using Req = v1::ReportRequest;
  using Resp = v1::ReportResponse;
  return Serve<Req, Resp>(
      ctx, req, resp,
      [this, ctx](const Req& r, Resp* out) -> std::optional<grpc::Status> {
        absl::StatusOr<engine::ReportInput> in = wire::FromProto(r);
        if (!in.ok()) return rpc::ToGrpcStatus(in.status());
        std::optional<ClientDecision> d = client_->ReportUnderLease(*in);
        if (!d.has_value()) return std::nullopt;
        return Answer(*d, client_->clock().Now(), tally_, out, ctx);
      },
      [this, ctx](const Req& r, Resp* out) {
        absl::StatusOr<engine::ReportInput> in = wire::FromProto(r);
        if (!in.ok()) return rpc::ToGrpcStatus(in.status());
        return Answer(client_->Report(*in), client_->clock().Now(), tally_,
                      out, ctx);
      });
}

grpc::ServerUnaryReactor* AgentService::AdmitBatch(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  using Req = v1::AdmitBatchRequest;
  using Resp = v1::AdmitBatchResponse;
  return Serve<Req, Resp>(
      ctx, req, resp,
      [](const Req&, Resp*) -> std::optional<grpc::Status> {
        return std::nullopt;
      },
      [this](const Req& r, Resp* out) {
        absl::StatusOr<std::vector<engine::AdmitInput>> items =
            BatchInputs<engine::AdmitInput>(r, MaxBatchSize());
        if (!items.ok()) return rpc::ToGrpcStatus(items.status());
        return AnswerBatch(client_->AdmitBatch(*items), client_->clock().Now(),
                           tally_, out);
      });
}

grpc::ServerUnaryReactor* AgentService::ReportBatch(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  using Req = v1::ReportBatchRequest;
  using Resp = v1::ReportBatchResponse;
  return Serve<Req, Resp>(
      ctx, req, resp,
      [](const Req&, Resp*) -> std::optional<grpc::Status> {
        return std::nullopt;
      },
      [this](const Req& r, Resp* out) {
        absl::StatusOr<std::vector<engine::ReportInput>> items =
            BatchInputs<engine::ReportInput>(r, MaxBatchSize());
        if (!items.ok()) return rpc::ToGrpcStatus(items.status());
        return AnswerBatch(client_->ReportBatch(*items),
                           client_->clock().Now(), tally_, out);
      });
}

grpc::ServerUnaryReactor* AgentService::GetEndpoint(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer*,
    grpc::ByteBuffer*) {
  return NotHere(ctx);
}

grpc::ServerUnaryReactor* AgentService::ListEndpoints(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer*,
    grpc::ByteBuffer*) {
  return NotHere(ctx);
}

}  // namespace stagger::agent
