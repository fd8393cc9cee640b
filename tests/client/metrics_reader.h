// Reads one series' value out of a prometheus-cpp registry, for tests.
#ifndef STAGGER_TESTS_CLIENT_METRICS_READER_H_
#define STAGGER_TESTS_CLIENT_METRICS_READER_H_

#include <map>
#include <optional>
#include <string>

#include "prometheus/registry.h"

namespace stagger::testing {

// The value of the counter or gauge `name` with exactly `labels`; nullopt if
// there is no such series.
inline std::optional<double> MetricValue(
    const prometheus::Registry& registry, const std::string& name,
    const std::map<std::string, std::string>& labels = {}) {
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> got;
      for (const auto& l : m.label) got[l.name] = l.value;
      if (got != labels) continue;
      if (f.type == prometheus::MetricType::Counter) return m.counter.value;
      if (f.type == prometheus::MetricType::Gauge) return m.gauge.value;
    }
  }
  return std::nullopt;
}

// How many families named `name` the registry exposes.
inline int FamilyCount(const prometheus::Registry& registry,
                       const std::string& name) {
  int n = 0;
  for (const prometheus::MetricFamily& f : registry.Collect()) {
    if (f.name == name) ++n;
  }
  return n;
}

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_CLIENT_METRICS_READER_H_
