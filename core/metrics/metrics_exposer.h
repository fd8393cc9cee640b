// MetricsExposer: serves a prometheus::Registry over HTTP (GET /metrics, the
// Prometheus text format) with prometheus-cpp's pull Exposer (civetweb).
//
// Start() binds the address or returns an error Status: prometheus-cpp
// throws on a bind failure (port taken, bad address); that exception is
// caught here and never escapes. Before every scrape the exposer calls
// `before_scrape` (staggerd: ServerMetrics::RefreshEngineStats(), so the
// endpoint-table gauges are as of the scrape). Besides the registry, prometheus-cpp adds its own
// exposer_* families (scrapes served, bytes, latency) to the same page.
//
// Thread-safety: port() may be called from any thread. Destroying the
// exposer stops serving (in-flight scrapes finish first); the registry and
// whatever before_scrape uses must outlive it.
#ifndef STAGGER_CORE_METRICS_METRICS_EXPOSER_H_
#define STAGGER_CORE_METRICS_METRICS_EXPOSER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace stagger::metrics {

class MetricsExposer {
 public:
  // `address` is "host:port" (e.g. "0.0.0.0:9464", "127.0.0.1:0" for any
  // free port, "[::]:9464"); the path is always /metrics. `before_scrape`
  // may be null. Errors: InvalidArgument for a
  // malformed address, Unavailable if the address cannot be bound (the
  // message names the address, e.g. "port already in use?").
  static absl::StatusOr<std::unique_ptr<MetricsExposer>> Start(
      absl::string_view address, std::shared_ptr<prometheus::Registry> registry,
      std::function<void()> before_scrape);

  ~MetricsExposer();
  MetricsExposer(const MetricsExposer&) = delete;
  MetricsExposer& operator=(const MetricsExposer&) = delete;

  // The TCP port actually bound (the chosen one when asked for port 0).
  int port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  MetricsExposer(std::unique_ptr<prometheus::Exposer> exposer,
                 std::shared_ptr<prometheus::Collectable> collectable,
                 std::string address, int port);

  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::string address_;
  int port_;
};

}  // namespace stagger::metrics

#endif  // STAGGER_CORE_METRICS_METRICS_EXPOSER_H_
