// ClientMetrics: families, names and help from the metric catalog
// (core/metrics/metric_catalog.h); see client_metrics.h for the contract.
#include "client/internal/client_metrics.h"

#include <string_view>

#include "prometheus/family.h"
#include "core/metrics/metric_catalog.h"
#include "core/metrics/metric_registration.h"

namespace stagger::client {
namespace {

using metrics::CatalogLabels;
using metrics::MetricId;
using metrics::RegisterFamily;

static_assert(static_cast<int>(grpc::StatusCode::UNAUTHENTICATED) + 1 ==
                  static_cast<int>(metrics::kGrpcCodeNames.size()),
              "kGrpcCodeNames covers grpc::StatusCode 0..16");
static_assert(static_cast<int>(Call::kAdmit) == 0 &&
                  static_cast<int>(Call::kReport) == 1 &&
                  metrics::kCallLabels.size() == 2,
              "kCallLabels follows client::Call");

}  // namespace

const char* GrpcCodeName(grpc::StatusCode code) {
  const int c = static_cast<int>(code);
  if (c < 0 || c >= static_cast<int>(metrics::kGrpcCodeNames.size())) {
    return "UNKNOWN";
  }
  return metrics::kGrpcCodeNames[c];
}

// Every (call, verdict) series of a family labelled call and verdict.
template <MetricId id>
void AddCallVerdictSeries(
    prometheus::Registry& registry,
    std::array<std::array<prometheus::Counter*, 4>, 2>& out) {
  auto& family = RegisterFamily<id>(registry);
  for (Call call : {Call::kAdmit, Call::kReport}) {
    const int c = static_cast<int>(call);
    for (int v = 1; v <= 4; ++v) {
      out[c][v - 1] = &family.Add(CatalogLabels(
          id, {metrics::kCallLabels[c],
               engine::VerdictName(static_cast<engine::Verdict>(v))}));
    }
  }
}

ClientMetrics::ClientMetrics(prometheus::Registry& registry) {
  AddCallVerdictSeries<MetricId::kClientFallbackDecisions>(registry, fallback_);
  AddCallVerdictSeries<MetricId::kClientLeaseDecisions>(registry, lease_);
  leases_ = &RegisterFamily<MetricId::kClientLeases>(registry).Add({});
  streams_up_ =
      &RegisterFamily<MetricId::kClientSyncStreamsUp>(registry).Add({});
  flushes_ = &RegisterFamily<MetricId::kClientSyncFlushes>(registry).Add({});
  reconnects_ =
      &RegisterFamily<MetricId::kClientSyncReconnects>(registry).Add({});
  // One series per code of the catalog's set (every code but OK and
  // INVALID_ARGUMENT), at its code number; other codes count as UNKNOWN.
  auto& errors = RegisterFamily<MetricId::kClientCoordinatorErrors>(registry);
  for (int c = 0; c < kNumCodes; ++c) {
    for (const char* name :
         metrics::OnlyLabelValues(MetricId::kClientCoordinatorErrors)) {
      if (std::string_view(metrics::kGrpcCodeNames[c]) != name) continue;
      errors_[c] = &errors.Add(
          CatalogLabels(MetricId::kClientCoordinatorErrors, {name}));
    }
  }
  up_ = &RegisterFamily<MetricId::kClientCoordinatorUp>(registry).Add({});
  up_->Set(1);
}

void ClientMetrics::CountFallback(Call call, engine::Verdict verdict) {
  const int v = static_cast<int>(verdict);
  if (v < 1 || v > kNumVerdicts) return;
  fallback_[static_cast<int>(call)][v - 1]->Increment();
}

void ClientMetrics::CountLeaseDecision(Call call, engine::Verdict verdict) {
  const int v = static_cast<int>(verdict);
  if (v < 1 || v > kNumVerdicts) return;
  lease_[static_cast<int>(call)][v - 1]->Increment();
}

void ClientMetrics::SetLeaseState(int64_t leases, int64_t streams_up,
                                  int64_t flushes, int64_t reconnects) {
  leases_->Set(static_cast<double>(leases));
  streams_up_->Set(static_cast<double>(streams_up));
  // Counters move by what was added since the last sample.
  if (flushes > flushes_->Value()) flushes_->Increment(flushes - flushes_->Value());
  if (reconnects > reconnects_->Value()) {
    reconnects_->Increment(reconnects - reconnects_->Value());
  }
}

void ClientMetrics::CountCoordinatorError(grpc::StatusCode code) {
  int c = static_cast<int>(code);
  if (c <= 0 || c >= kNumCodes || errors_[c] == nullptr) {
    c = static_cast<int>(grpc::StatusCode::UNKNOWN);
  }
  errors_[c]->Increment();
}

void ClientMetrics::SetCoordinatorUp(bool up) { up_->Set(up ? 1 : 0); }

}  // namespace stagger::client
