#include "server/service/coordinator_service.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "server/service/proto_convert.h"

namespace stagger::service {
namespace {

using metrics::ScopedRpcTimer;
using metrics::ServerMetrics;

grpc::ServerUnaryReactor* FinishWith(grpc::CallbackServerContext* ctx,
                                     const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

CoordinatorService::CoordinatorService(engine::Engine* engine,
                                       metrics::ServerMetrics* metrics,
                                       const engine::Clock* clock)
    : engine_(engine), metrics_(metrics), clock_(clock) {
  SetMessageAllocatorFor_Admit(&admit_alloc_);
  SetMessageAllocatorFor_Report(&report_alloc_);
  SetMessageAllocatorFor_AdmitBatch(&admit_batch_alloc_);
  SetMessageAllocatorFor_ReportBatch(&report_batch_alloc_);
}

void CoordinatorService::CheckOwner(absl::string_view key) {
  if (ownership_ != nullptr && metrics_ != nullptr && !ownership_->Owns(key)) {
    metrics_->RecordMisrouted(1);
  }
}

grpc::Status CoordinatorService::DoAdmit(const v1::AdmitRequest& req,
                                         v1::AdmitResponse* resp) {
  absl::StatusOr<engine::AdmitInput> in = FromProto(req);
  if (!in.ok()) return ToGrpcStatus(in.status());
  absl::StatusOr<engine::Decision> d = engine_->Admit(*in);
  if (!d.ok()) return ToGrpcStatus(d.status());
  CheckOwner(in->endpoint);
  if (metrics_) metrics_->RecordDecision(ServerMetrics::Call::kAdmit, *d);
  ToProto(*d, clock_->Now(), resp->mutable_decision());
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::DoReport(const v1::ReportRequest& req,
                                          v1::ReportResponse* resp) {
  absl::StatusOr<engine::ReportInput> in = FromProto(req);
  if (!in.ok()) return ToGrpcStatus(in.status());
  absl::StatusOr<engine::Decision> d = engine_->Report(*in);
  if (!d.ok()) return ToGrpcStatus(d.status());
  CheckOwner(in->endpoint);
  if (metrics_) metrics_->RecordDecision(ServerMetrics::Call::kReport, *d);
  ToProto(*d, clock_->Now(), resp->mutable_decision());
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
    absl::StatusOr<engine::Decision> d = (engine_->*decide)(in);
    if (!d.ok()) return ToGrpcStatus(d.status());  // validated: not reached
    CheckOwner(in.endpoint);
    if (metrics_) metrics_->RecordDecision(call, *d);
    ToProto(*d, clock_->Now(), resp->add_decisions());
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

// Reactor entry points: time the call, run the logic, finish inline.

grpc::ServerUnaryReactor* CoordinatorService::Admit(
    grpc::CallbackServerContext* ctx, const v1::AdmitRequest* req,
    v1::AdmitResponse* resp) {
  ScopedRpcTimer timer(metrics_, ServerMetrics::Method::kAdmit);
  return FinishWith(ctx, DoAdmit(*req, resp));
}

grpc::ServerUnaryReactor* CoordinatorService::Report(
    grpc::CallbackServerContext* ctx, const v1::ReportRequest* req,
    v1::ReportResponse* resp) {
  ScopedRpcTimer timer(metrics_, ServerMetrics::Method::kReport);
  return FinishWith(ctx, DoReport(*req, resp));
}

grpc::ServerUnaryReactor* CoordinatorService::AdmitBatch(
    grpc::CallbackServerContext* ctx, const v1::AdmitBatchRequest* req,
    v1::AdmitBatchResponse* resp) {
  ScopedRpcTimer timer(metrics_, ServerMetrics::Method::kAdmitBatch);
  return FinishWith(ctx, DoAdmitBatch(*req, resp));
}

grpc::ServerUnaryReactor* CoordinatorService::ReportBatch(
    grpc::CallbackServerContext* ctx, const v1::ReportBatchRequest* req,
    v1::ReportBatchResponse* resp) {
  ScopedRpcTimer timer(metrics_, ServerMetrics::Method::kReportBatch);
  return FinishWith(ctx, DoReportBatch(*req, resp));
}

grpc::ServerUnaryReactor* CoordinatorService::GetEndpoint(
    grpc::CallbackServerContext* ctx, const v1::GetEndpointRequest* req,
    v1::GetEndpointResponse* resp) {
  ScopedRpcTimer timer(metrics_, ServerMetrics::Method::kGetEndpoint);
  return FinishWith(ctx, DoGetEndpoint(*req, resp));
}

grpc::ServerUnaryReactor* CoordinatorService::ListEndpoints(
    grpc::CallbackServerContext* ctx, const v1::ListEndpointsRequest* req,
    v1::ListEndpointsResponse* resp) {
  ScopedRpcTimer timer(metrics_, ServerMetrics::Method::kListEndpoints);
  return FinishWith(ctx, DoListEndpoints(*req, resp));
}

}  // namespace stagger::service
