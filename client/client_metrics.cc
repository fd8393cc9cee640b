#include "client/client_metrics.h"

#include "prometheus/family.h"

namespace stagger::client {

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

ClientMetrics::ClientMetrics(prometheus::Registry& registry) {
  auto& fallback =
      prometheus::BuildCounter()
          .Name("stagger_client_fallback_decisions_total")
          .Help("Decisions the Stagger client made locally because the "
                "coordinator was slow, unreachable or considered down.")
          .Register(registry);
  for (Call call : {Call::kAdmit, Call::kReport}) {
    for (int v = 1; v <= kNumVerdicts; ++v) {
      fallback_[static_cast<int>(call)][v - 1] = &fallback.Add(
          {{"call", CallName(call)},
           {"verdict", engine::VerdictName(static_cast<engine::Verdict>(v))}});
    }
  }
  auto& errors = prometheus::BuildCounter()
                     .Name("stagger_client_coordinator_errors_total")
                     .Help("Coordinator calls that failed and made the "
                           "Stagger client fall back, by gRPC status code.")
                     .Register(registry);
  for (int c = 1; c < kNumCodes; ++c) {  // OK is never an error
    if (c == static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT)) continue;
    errors_[c] = &errors.Add(
        {{"code", GrpcCodeName(static_cast<grpc::StatusCode>(c))}});
  }
  auto& up = prometheus::BuildGauge()
                 .Name("stagger_client_coordinator_up")
                 .Help("1 while the Stagger client considers the coordinator "
                       "reachable, 0 while it decides locally.")
                 .Register(registry);
  up_ = &up.Add({});
  up_->Set(1);
}

void ClientMetrics::CountFallback(Call call, engine::Verdict verdict) {
  const int v = static_cast<int>(verdict);
  if (v < 1 || v > kNumVerdicts) return;
  fallback_[static_cast<int>(call)][v - 1]->Increment();
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
