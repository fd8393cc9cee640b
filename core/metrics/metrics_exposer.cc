// MetricsExposer: prometheus-cpp's Exposer behind an absl::Status API. See
// metrics_exposer.h for the contract.
#include "core/metrics/metrics_exposer.h"

#include <exception>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace stagger::metrics {
namespace {

// Runs before_scrape, then collects the registry: what the exposer
// serves on every scrape.
class RefreshingCollectable final : public prometheus::Collectable {
 public:
  RefreshingCollectable(std::shared_ptr<prometheus::Registry> registry,
                        std::function<void()> before_scrape)
      : registry_(std::move(registry)),
        before_scrape_(std::move(before_scrape)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    if (before_scrape_) before_scrape_();
    return registry_->Collect();
  }

 private:
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::function<void()> before_scrape_;
};

// "host:port" with a non-empty host and a port in 0..65535.
absl::Status ValidateAddress(absl::string_view address) {
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics_address: want host:port (e.g. 0.0.0.0:9464), got \"",
        address, "\""));
  }
  int port = -1;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_address: port must be 0..65535, got \"",
                     address.substr(colon + 1), "\""));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    absl::string_view address, std::shared_ptr<prometheus::Registry> registry,
    std::function<void()> before_scrape) {
  if (registry == nullptr) {
    return absl::InvalidArgumentError("MetricsExposer: registry is null");
  }
  if (absl::Status s = ValidateAddress(address); !s.ok()) return s;

  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    // Two civetweb worker threads: scrapes are rare and small.
    exposer = std::make_unique<prometheus::Exposer>(std::string(address),
                                                    /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics_address: cannot listen on ", address,
                     " (port already in use?): ", e.what()));
  }
  const std::vector<int> ports = exposer->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "metrics_address: no listening port after binding ", address));
  }
  auto collectable =
      std::make_shared<RefreshingCollectable>(std::move(registry),
                                              std::move(before_scrape));
  exposer->RegisterCollectable(collectable, "/metrics");
  return std::unique_ptr<MetricsExposer>(new MetricsExposer(
      std::move(exposer), std::move(collectable), std::string(address),
      ports.front()));
}

MetricsExposer::MetricsExposer(
    std::unique_ptr<prometheus::Exposer> exposer,
    std::shared_ptr<prometheus::Collectable> collectable, std::string address,
    int port)
    : exposer_(std::move(exposer)),
      collectable_(std::move(collectable)),
      address_(std::move(address)),
      port_(port) {}

MetricsExposer::~MetricsExposer() {
  // Stop the HTTP server before the collectable it points to goes away.
  exposer_.reset();
}

}  // namespace stagger::metrics
