// MetricsStack: staggerd's Prometheus side, built in one step: a registry,
// the ServerMetrics registered in it (attempt labels sized from the start-up
// config, engine gauges fed by `engine`) and, unless `address` is empty
// (--metrics_address), the /metrics exposer listening on it. Other layers
// register their families in the same registry (registry()), so one scrape
// has them all.
//
// Errors: the exposer's (a malformed address, a port taken: the message
// names the address); staggerd then exits kExitStartupFailure. `engine`
// must outlive the stack, and whatever registered in registry() must be
// destroyed before it. metrics() is safe to use from any thread;
// exposer_port() is 0 when metrics are disabled.
#ifndef STAGGER_SERVER_DAEMON_METRICS_STACK_H_
#define STAGGER_SERVER_DAEMON_METRICS_STACK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/metrics/metrics_exposer.h"
#include "server/metrics/server_metrics.h"

namespace stagger::daemon {

class MetricsStack {
 public:
  static absl::StatusOr<std::unique_ptr<MetricsStack>> Start(
      const std::string& address, const engine::EngineConfig& config,
      const engine::Engine* engine);

  // Stops serving first (no scrape runs once the metrics are gone), then
  // detaches the engine.
  ~MetricsStack();
  MetricsStack(const MetricsStack&) = delete;
  MetricsStack& operator=(const MetricsStack&) = delete;

  prometheus::Registry& registry() { return *registry_; }
  metrics::ServerMetrics* metrics() { return metrics_.get(); }
  bool serving() const { return exposer_ != nullptr; }
  int exposer_port() const { return exposer_ ? exposer_->port() : 0; }

 private:
  MetricsStack() = default;

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<metrics::ServerMetrics> metrics_;
  std::unique_ptr<metrics::MetricsExposer> exposer_;  // null: disabled
};

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_METRICS_STACK_H_
