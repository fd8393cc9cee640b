#include "server/service/coordinator_service.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/rpc/raw_unary.h"
#include "server/service/proto_convert.h"

namespace stagger::service {
namespace {

using metrics::ScopedRpcTimer;
using metrics::ServerMetrics;

}  // namespace

CoordinatorService::CoordinatorService(engine::Engine* engine,
                                       metrics::ServerMetrics* metrics,
                                       const engine::Clock* clock)
    : engine_(engine), metrics_(metrics), clock_(clock) {}

void CoordinatorService::CheckOwner(absl::string_view key) {
  if (ownership_ != nullptr && metrics_ != nullptr && !ownership_->Owns(key)) {
    metrics_->RecordMisrouted(1);
  }
  if (before_decision_) before_decision_(key);
}

void CoordinatorService::AfterReport(const engine::ReportInput& in) {
  if (waits_ != nullptr) waits_->Wake(in.endpoint);
}

void CoordinatorService::Decided(const engine::Decision& d,
                                 v1::Decision* out) const {
  ToProto(d, clock_->Now(), out);
  out->set_wait_supported(waits_ != nullptr);
}

grpc::ServerUnaryReactor* CoordinatorService::MaybeHold(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  v1::AdmitRequest request;
  if (!rpc::ParseRequest(*req, &request) || !request.has_wait()) {
    return nullptr;
  }
  absl::StatusOr<engine::AdmitInput> in = FromProto(request);
  if (!in.ok() || in->wait <= absl::ZeroDuration() || !waits_->HasRoom()) {
    return nullptr;
  }
  const absl::Time now = clock_->Now();
  engine::WaitState w;
  w.since = now;
  w.until = std::min(now + in->wait,
                     absl::FromChrono(ctx->deadline()) - WaitRoom::kDeadlineMargin);
  if (w.until <= now) return nullptr;
  CheckOwner(in->endpoint);
  absl::StatusOr<engine::WaitOutcome> o =
      engine_->AdmitWaiting(*in, &w, engine::WaitStep::kArrive);
  if (!o.ok()) return nullptr;  // Serve names the bad field
  auto* call = new WaitingCall(waits_, ctx, resp, std::move(request), *in, w);
  if (o->answer.has_value() || !waits_->Hold(call, o->recheck)) {
    absl::StatusOr<engine::WaitOutcome> now_answer =
        o->answer.has_value()
            ? o
            : engine_->AdmitWaiting(call->in(), &call->wait(),
                                    engine::WaitStep::kExpire);
    if (metrics_) {
      metrics_->RecordDecision(ServerMetrics::Call::kAdmit, *now_answer->answer);
    }
    call->Answer(*now_answer->answer, clock_->Now());
  }
  return call;
}

grpc::Status CoordinatorService::DoAdmit(const v1::AdmitRequest& req,
                                         v1::AdmitResponse* resp) {
  absl::StatusOr<engine::AdmitInput> in = FromProto(req);
  if (!in.ok()) return ToGrpcStatus(in.status());
  CheckOwner(in->endpoint);
  absl::StatusOr<engine::Decision> d = engine_->Admit(*in);
  if (!d.ok()) return ToGrpcStatus(d.status());
  if (metrics_) metrics_->RecordDecision(ServerMetrics::Call::kAdmit, *d);
  Decided(*d, resp->mutable_decision());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::DoReport(const v1::ReportRequest& req,
                                          v1::ReportResponse* resp) {
  absl::StatusOr<engine::ReportInput> in = FromProto(req);
  if (!in.ok()) return ToGrpcStatus(in.status());
  CheckOwner(in->endpoint);
  absl::StatusOr<engine::Decision> d = engine_->Report(*in);
  if (!d.ok()) return ToGrpcStatus(d.status());
  AfterReport(*in);
  if (metrics_) metrics_->RecordDecision(ServerMetrics::Call::kReport, *d);
  Decided(*d, resp->mutable_decision());
  return grpc::Status::OK;
}

// One batch: size check, every item converted and validated before any is
// decided (so a bad item changes nothing), then each decided in order.
// `validate` and `decide` are the engine's ValidateAdmit/Admit or
// ValidateReport/Report.
template <typename Input, typename Request, typename Response>
grpc::Status CoordinatorService::DoBatch(
    const Request& req, Response* resp, ServerMetrics::Method method,
    ServerMetrics::Call call,
    absl::Status (engine::Engine::*validate)(const Input&) const,
    absl::StatusOr<engine::Decision> (engine::Engine::*decide)(const Input&)) {
  if (absl::Status s =
          CheckBatchSize(req.items_size(), engine_->max_batch_size());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (metrics_) metrics_->RecordBatchSize(method, req.items_size());
  std::vector<Input> inputs;
  inputs.reserve(req.items_size());
  for (int i = 0; i < req.items_size(); ++i) {
    absl::StatusOr<Input> in = FromProto(req.items(i));
    if (!in.ok()) return ToGrpcStatus(PrefixItem(in.status(), i));
    if (absl::Status s = (engine_->*validate)(*in); !s.ok()) {
      return ToGrpcStatus(PrefixItem(s, i));
    }
    inputs.push_back(*in);
  }
  resp->mutable_decisions()->Reserve(req.items_size());
  for (const Input& in : inputs) {
    CheckOwner(in.endpoint);
    absl::StatusOr<engine::Decision> d = (engine_->*decide)(in);
    if (!d.ok()) return ToGrpcStatus(d.status());  // validated: not reached
    if constexpr (std::is_same_v<Input, engine::ReportInput>) AfterReport(in);
    if (metrics_) metrics_->RecordDecision(call, *d);
    Decided(*d, resp->add_decisions());
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::DoAdmitBatch(const v1::AdmitBatchRequest& req,
                                              v1::AdmitBatchResponse* resp) {
  return DoBatch<engine::AdmitInput>(
      req, resp, ServerMetrics::Method::kAdmitBatch, ServerMetrics::Call::kAdmit,
      &engine::Engine::ValidateAdmit, &engine::Engine::Admit);
}

grpc::Status CoordinatorService::DoReportBatch(
    const v1::ReportBatchRequest& req, v1::ReportBatchResponse* resp) {
  return DoBatch<engine::ReportInput>(
      req, resp, ServerMetrics::Method::kReportBatch,
      ServerMetrics::Call::kReport, &engine::Engine::ValidateReport,
      &engine::Engine::Report);
}

grpc::Status CoordinatorService::DoGetEndpoint(const v1::GetEndpointRequest& req,
                                               v1::GetEndpointResponse* resp) {
  absl::StatusOr<engine::EndpointSnapshot> snap =
      engine_->Inspect(req.endpoint());
  if (!snap.ok()) return ToGrpcStatus(snap.status());
  ToProto(*snap, resp->mutable_state());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::DoListEndpoints(
    const v1::ListEndpointsRequest& req, v1::ListEndpointsResponse* resp) {
  int page_size = req.page_size();
  if (page_size == 0) page_size = kDefaultPageSize;
  if (page_size < 1 || page_size > kMaxPageSize) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("page_size: must be in [0, ", kMaxPageSize, "], got ",
                     req.page_size())));
  }
  absl::StatusOr<std::string> after = DecodePageToken(req.page_token());
  if (!after.ok()) return ToGrpcStatus(after.status());
  std::optional<engine::BreakerState> filter;
  if (req.breaker_state() != v1::BREAKER_STATE_UNSPECIFIED) {
    filter = FromProto(req.breaker_state());
    if (!filter.has_value()) {
      return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
          "breaker_state: unknown value ",
          static_cast<int>(req.breaker_state()))));
    }
  }
  engine::ListPage page = engine_->List(*after, page_size, filter);
  for (const engine::EndpointSnapshot& s : page.endpoints) {
    ToProto(s, resp->add_endpoints());
  }
  if (!page.next_after.empty()) {
    resp->set_next_page_token(EncodePageToken(page.next_after));
  }
  resp->set_total_tracked(page.total_tracked);
  return grpc::Status::OK;
}

// Reactor entry points: time the call, parse, run the logic, serialize,
// finish inline.

template <typename Request, typename Response>
grpc::ServerUnaryReactor* CoordinatorService::Serve(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp, ServerMetrics::Method method,
    grpc::Status (CoordinatorService::*logic)(const Request&, Response*)) {
  ScopedRpcTimer timer(metrics_, method);
  return rpc::ServeRaw<Request, Response>(
      ctx, req, resp, [this, logic](const Request& request, Response* response) {
        return (this->*logic)(request, response);
      });
}

grpc::ServerUnaryReactor* CoordinatorService::Admit(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  if (waits_ != nullptr) {
    if (grpc::ServerUnaryReactor* held = MaybeHold(ctx, req, resp)) {
      return held;
    }
  }
  return Serve(ctx, req, resp, ServerMetrics::Method::kAdmit,
               &CoordinatorService::DoAdmit);
}

grpc::ServerUnaryReactor* CoordinatorService::Report(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve(ctx, req, resp, ServerMetrics::Method::kReport,
               &CoordinatorService::DoReport);
}

grpc::ServerUnaryReactor* CoordinatorService::AdmitBatch(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve(ctx, req, resp, ServerMetrics::Method::kAdmitBatch,
               &CoordinatorService::DoAdmitBatch);
}

grpc::ServerUnaryReactor* CoordinatorService::ReportBatch(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve(ctx, req, resp, ServerMetrics::Method::kReportBatch,
               &CoordinatorService::DoReportBatch);
}

grpc::ServerUnaryReactor* CoordinatorService::GetEndpoint(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve(ctx, req, resp, ServerMetrics::Method::kGetEndpoint,
               &CoordinatorService::DoGetEndpoint);
}

grpc::ServerUnaryReactor* CoordinatorService::ListEndpoints(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
    grpc::ByteBuffer* resp) {
  return Serve(ctx, req, resp, ServerMetrics::Method::kListEndpoints,
               &CoordinatorService::DoListEndpoints);
}

}  // namespace stagger::service
