// AgentService: stagger.v1.RetryCoordinator as stagger-agent serves it to
// the workers of its node. Every method is registered raw and parsed,
// converted and checked exactly as staggerd does (core/rpc/raw_unary.h,
// core/wire/wire.h, the engine's checks), so a worker in any language gets
// staggerd's API, validation and errors from its agent.
//
// Decisions come from one CoordinatorClient with leases on:
//   * under a lease (a first attempt, a success on a clear endpoint) the
//     call is answered inline, on gRPC's callback thread;
//   * everything else goes to the WorkPool, whose threads ask the key's
//     coordinator replica (or decide by the client's fallback when none
//     answers) and then finish the call. A full pool answers UNAVAILABLE at
//     once (the worker's library falls back).
//   * GetEndpoint and ListEndpoints answer UNIMPLEMENTED, naming where to
//     ask: the agent serves decisions; inspection is the coordinators'.
// Every decision answered is recorded in `tally` when one is given (the
// status page's counts and chart; null: none), and its source goes to the
// worker as initial metadata (kSourceHeader).
// A waiting Admit (AdmitRequest.wait > 0) is held without a thread until
// its answer (client/coordinator_client.h, AdmitWaitingAsync); at most
// `max_waiting` at once: beyond that it is answered at once, as an Admit
// without a wait, and counted (waiting_overflows). A held call is answered
// by min(its wait + 250 ms, the worker's deadline - 100 ms) at the latest,
// by the fallback if the coordinator's answer has not come
// (CoordinatorClient::AdmitWaitingAsync's answer_by).
// Thread-safe. `client`, `pool` and `tally` must outlive the service.
#ifndef STAGGER_AGENT_AGENT_SERVICE_H_
#define STAGGER_AGENT_AGENT_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "agent/status/decision_tally.h"
#include "agent/work_pool.h"
#include "client/coordinator_client.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::agent {

using RawService = v1::RetryCoordinator::WithRawCallbackMethod_Admit<
    v1::RetryCoordinator::WithRawCallbackMethod_Report<
        v1::RetryCoordinator::WithRawCallbackMethod_AdmitBatch<
            v1::RetryCoordinator::WithRawCallbackMethod_ReportBatch<
                v1::RetryCoordinator::WithRawCallbackMethod_GetEndpoint<
                    v1::RetryCoordinator::WithRawCallbackMethod_ListEndpoints<
                        v1::RetryCoordinator::Service>>>>>>;

class AgentService final : public RawService {
 public:
  // Initial metadata of every Admit and Report answered with a decision:
  // who decided it, "lease" (here, under a lease), "coordinator" or
  // "local" (the fallback). Batches do not carry it.
  static constexpr char kSourceHeader[] = "stagger-source";

  AgentService(client::CoordinatorClient* client, WorkPool* pool,
               DecisionTally* tally = nullptr, int64_t max_waiting = 10000);

  int64_t waiting_calls() const {
    return waiting_.load(std::memory_order_relaxed);
  }
  int64_t waiting_overflows() const {
    return overflows_.load(std::memory_order_relaxed);
  }

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

 private:
  // Parses `req`; if inline(request, &response) answers, finishes now;
  // otherwise runs pooled(request, &response) on the pool and finishes
  // then.
  template <typename Request, typename Response, typename Inline,
            typename Pooled>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* ctx,
                                  const grpc::ByteBuffer* req,
                                  grpc::ByteBuffer* resp, Inline try_inline,
                                  Pooled pooled);
  // Serve's answer for a request already parsed (Admit parses once: it
  // looks for a wait first).
  template <typename Request, typename Response, typename Inline,
            typename Pooled>
  grpc::ServerUnaryReactor* ServeParsed(grpc::CallbackServerContext* ctx,
                                        std::shared_ptr<const Request> request,
                                        grpc::ByteBuffer* resp,
                                        Inline try_inline, Pooled pooled);
  // A waiting Admit held here (`request` moved into it), or null: answer
  // it as any Admit (`request` untouched).
  grpc::ServerUnaryReactor* MaybeHold(grpc::CallbackServerContext* ctx,
                                      v1::AdmitRequest* request,
                                      grpc::ByteBuffer* resp);

  int MaxBatchSize() const {
    return client_->options().local_policy.limits.max_batch_size;
  }

  client::CoordinatorClient* const client_;
  WorkPool* const pool_;
  DecisionTally* const tally_;
  const int64_t max_waiting_;
  std::atomic<int64_t> waiting_{0};
  std::atomic<int64_t> overflows_{0};
};

}  // namespace stagger::agent

#endif  // STAGGER_AGENT_AGENT_SERVICE_H_
