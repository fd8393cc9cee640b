// CoordinatorService: the gRPC adapter for stagger.v1.RetryCoordinator, on
// the callback API (no thread per call; every handler finishes inline: the
// engine never blocks beyond a shard lock).
//
// Every method is registered raw (request and response as bytes): the
// service parses the request itself, so bytes that are not a valid message
// (malformed protobuf, or a string field that is not UTF-8) are answered
// INVALID_ARGUMENT "request: ..." naming the message type. (With typed
// callback methods gRPC 1.51 answers them UNIMPLEMENTED with an empty
// message, which tells a client author nothing.) Messages live on one
// protobuf Arena per call.
//
// It validates requests (wire-level checks here, range checks in the
// engine, all as INVALID_ARGUMENT naming the field, "items[i]." first for a
// batch item), maps proto <-> engine values, and records each decision in
// the metrics. No policy logic lives here. A batch is validated whole
// before any item is decided, so a bad item changes no state.
//
// With several replicas (set_ownership), each decision request for a key
// this replica does not own is counted (stagger_misrouted_requests_total)
// and answered all the same.
//
// Thread-safe. `engine` and `metrics` (nullable) must outlive the service.
#ifndef STAGGER_SERVER_SERVICE_COORDINATOR_SERVICE_H_
#define STAGGER_SERVER_SERVICE_COORDINATOR_SERVICE_H_

#include "grpcpp/grpcpp.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "server/metrics/server_metrics.h"
#include "server/service/arena_allocator.h"
#include "server/service/wait_room.h"
#include "server/service/ownership.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::service {

// Every method of stagger.v1.RetryCoordinator, registered raw.
using RawCoordinatorService = v1::RetryCoordinator::WithRawCallbackMethod_Admit<
    v1::RetryCoordinator::WithRawCallbackMethod_Report<
        v1::RetryCoordinator::WithRawCallbackMethod_AdmitBatch<
            v1::RetryCoordinator::WithRawCallbackMethod_ReportBatch<
                v1::RetryCoordinator::WithRawCallbackMethod_GetEndpoint<
                    v1::RetryCoordinator::WithRawCallbackMethod_ListEndpoints<
                        v1::RetryCoordinator::Service>>>>>>;

class CoordinatorService final : public RawCoordinatorService {
 public:
  // ListEndpoints page sizes: 0 means kDefaultPageSize; at most kMaxPageSize.
  static constexpr int kDefaultPageSize = 100;
  static constexpr int kMaxPageSize = 1000;

  CoordinatorService(engine::Engine* engine, metrics::ServerMetrics* metrics,
                     const engine::Clock* clock);

  // This replica's view of the key owners (null: one replica, owns every
  // key). Set before the server starts; must outlive the service.
  void set_ownership(const Ownership* ownership) { ownership_ = ownership; }
  // Told of every key this replica decides before it decides it (leases:
  // a key another member owns makes this replica stand in for it). Set
  // before the server starts; may be null.
  void set_before_decision(std::function<void(absl::string_view key)> fn) {
    before_decision_ = std::move(fn);
  }
  // Waiting admission (null: none; AdmitRequest.wait is checked and
  // answered at once, and decisions do not say wait_supported): an Admit
  // with a wait that cannot go now is held in the room; every report wakes
  // its endpoint's line. Set before the server starts; must outlive it.
  void set_wait_room(WaitRoom* room) { waits_ = room; }

  grpc::ServerUnaryReactor* Admit(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* AdmitBatch(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ReportBatch(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* GetEndpoint(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp) override;
  grpc::ServerUnaryReactor* ListEndpoints(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp) override;

  // The handlers' logic on parsed messages, for tests and in-process use.
  grpc::Status DoAdmit(const v1::AdmitRequest& req, v1::AdmitResponse* resp);
  grpc::Status DoReport(const v1::ReportRequest& req,
                        v1::ReportResponse* resp);
  grpc::Status DoAdmitBatch(const v1::AdmitBatchRequest& req,
                            v1::AdmitBatchResponse* resp);
  grpc::Status DoReportBatch(const v1::ReportBatchRequest& req,
                             v1::ReportBatchResponse* resp);
  grpc::Status DoGetEndpoint(const v1::GetEndpointRequest& req,
                             v1::GetEndpointResponse* resp);
  grpc::Status DoListEndpoints(const v1::ListEndpointsRequest& req,
                               v1::ListEndpointsResponse* resp);

 private:
  // One raw call: parse `req` as Request (INVALID_ARGUMENT if it does not
  // parse), run `logic`, serialize its Response into `resp`, finish.
  template <typename Request, typename Response>
  grpc::ServerUnaryReactor* Serve(
      grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* req,
      grpc::ByteBuffer* resp, metrics::ServerMetrics::Method method,
      grpc::Status (CoordinatorService::*logic)(const Request&, Response*));
  template <typename Input, typename Request, typename Response>
  grpc::Status DoBatch(
      const Request& req, Response* resp, metrics::ServerMetrics::Method method,
      metrics::ServerMetrics::Call call,
      absl::Status (engine::Engine::*validate)(const Input&) const,
      absl::StatusOr<engine::Decision> (engine::Engine::*decide)(const Input&));

  // Before a decision on `key`: counted as misrouted if this replica does
  // not own it, and told to before_decision_.
  void CheckOwner(absl::string_view key);
  // After a report: any report may let its waiting calls go.
  void AfterReport(const engine::ReportInput& in);
  // A waiting Admit the room holds (the call is then the room's), or
  // nullptr: Serve answers it as any Admit.
  grpc::ServerUnaryReactor* MaybeHold(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* req,
                                      grpc::ByteBuffer* resp);
  // The decision in `out`, and whether this coordinator holds waiting calls.
  void Decided(const engine::Decision& d, v1::Decision* out) const;

  engine::Engine* engine_;
  metrics::ServerMetrics* metrics_;
  const Ownership* ownership_ = nullptr;
  std::function<void(absl::string_view)> before_decision_;
  WaitRoom* waits_ = nullptr;
  const engine::Clock* clock_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_COORDINATOR_SERVICE_H_
