#include "server/daemon/metrics_stack.h"

#include <utility>

namespace stagger::daemon {

absl::StatusOr<std::unique_ptr<MetricsStack>> MetricsStack::Start(
    const std::string& address, const engine::EngineConfig& config,
    const engine::Engine* engine) {
  std::unique_ptr<MetricsStack> stack(new MetricsStack);
  stack->registry_ = std::make_shared<prometheus::Registry>();
  stack->metrics_ = std::make_unique<metrics::ServerMetrics>(
      *stack->registry_, metrics::ServerMetrics::MaxAttemptLabelFor(config));
  stack->metrics_->AttachEngine(engine);
  if (address.empty()) return stack;
  absl::StatusOr<std::unique_ptr<metrics::MetricsExposer>> exposer =
      metrics::MetricsExposer::Start(
          address, stack->registry_,
          [m = stack->metrics_.get()] { m->RefreshEngineStats(); });
  if (!exposer.ok()) return exposer.status();
  stack->exposer_ = *std::move(exposer);
  return stack;
}

MetricsStack::~MetricsStack() {
  exposer_.reset();
  if (metrics_) metrics_->AttachEngine(nullptr);
}

}  // namespace stagger::daemon
