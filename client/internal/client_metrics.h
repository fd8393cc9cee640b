// Client-side metrics of the Stagger client library, for
// the host process to expose from its own prometheus-cpp registry. Their
// names, types, labels (with their value sets) and help text are declared
// in the metric catalog (core/metrics/metric_catalog.h, the
// Registrar::kClientMetrics entries) with staggerd's:
//
//   stagger_client_fallback_decisions_total{call, verdict}   counter
//       decisions the client made locally instead of the coordinator.
//       call:    "admit" | "report"
//       verdict: "PROCEED" | "DEFER" | "GIVE_UP" | "DONE"
//   stagger_client_coordinator_errors_total{code}            counter
//       coordinator calls that failed in a way that made the client fall
//       back. code: the gRPC status code name ("UNAVAILABLE",
//       "DEADLINE_EXCEEDED", ... "UNAUTHENTICATED"); a response the client
//       cannot use (no decision, unknown verdict) counts as "INTERNAL".
//       INVALID_ARGUMENT is the caller's bug, answered as an error and not
//       counted here.
//   stagger_client_coordinator_up                            gauge
//       1 while the client considers the coordinator reachable, 0 while it
//       decides locally. Starts at 1.
//
// Label values come from the fixed sets above only (never an endpoint key);
// every series is created up front, so a scrape shows zeros rather than
// missing series. The families are built once per ClientMetrics; building a
// second ClientMetrics on the same registry reuses the same families
// (prometheus-cpp merges identical families), and the series are then
// shared: the up gauge shows whichever client changed state last.
//
// Thread-safe: the counting methods may be called concurrently.
#ifndef STAGGER_CLIENT_INTERNAL_CLIENT_METRICS_H_
#define STAGGER_CLIENT_INTERNAL_CLIENT_METRICS_H_

#include <array>

#include "grpcpp/support/status.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"
#include "client/coordinator_client.h"
#include "core/engine/decision.h"

namespace stagger::client {

// Name of a gRPC status code, e.g. "DEADLINE_EXCEEDED" (the catalog's
// kGrpcCodeNames); "UNKNOWN" for a value outside 0..16.
const char* GrpcCodeName(grpc::StatusCode code);

class ClientMetrics {
 public:
  // Builds (or joins) the three families in `registry` and every series.
  // `registry` must outlive this object.
  explicit ClientMetrics(prometheus::Registry& registry);
  ClientMetrics(const ClientMetrics&) = delete;
  ClientMetrics& operator=(const ClientMetrics&) = delete;

  void CountFallback(Call call, engine::Verdict verdict);
  void CountLeaseDecision(Call call, engine::Verdict verdict);
  // The lease streams' state, sampled every second: leases held, streams
  // up, and the totals of messages sent and reconnects so far.
  void SetLeaseState(int64_t leases, int64_t streams_up, int64_t flushes,
                     int64_t reconnects);
  void CountCoordinatorError(grpc::StatusCode code);
  void SetCoordinatorUp(bool up);

 private:
  static constexpr int kNumVerdicts = 4;  // Verdict values 1..4
  static constexpr int kNumCodes = 17;    // grpc::StatusCode 0..16
  std::array<std::array<prometheus::Counter*, kNumVerdicts>, 2> fallback_{};
  std::array<prometheus::Counter*, kNumCodes> errors_{};
  prometheus::Gauge* up_ = nullptr;
  std::array<std::array<prometheus::Counter*, kNumVerdicts>, 2> lease_{};
  prometheus::Gauge* leases_ = nullptr;
  prometheus::Gauge* streams_up_ = nullptr;
  prometheus::Counter* flushes_ = nullptr;
  prometheus::Counter* reconnects_ = nullptr;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_CLIENT_METRICS_H_
