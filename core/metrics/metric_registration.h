// Registration from the catalog (metric_catalog.h). Registering code never
// spells a metric or label name itself:
//
//   RegisterFamily<id>(registry)   the prometheus-cpp family of catalog
//       metric `id`, with the catalog's name, help and type (the return type
//       follows it: Family<Counter>, Family<Gauge> or Family<Histogram>).
//   CatalogLabels(id, {values})    the series' labels: the catalog's label
//       names, in catalog order, with these values.
//   AddPerValue(family, id, args)  one series per value of the metric's
//       only label, in LabelValues() order (args: e.g. histogram buckets).
//
// CatalogLabels and AddPerValue abort with a message naming the metric when
// the number of values is not the metric's number of labels, or a value is
// outside the label's fixed set: a programming error, caught at start-up,
// when every series is created (and by tests/metrics).
#ifndef STAGGER_CORE_METRICS_METRIC_REGISTRATION_H_
#define STAGGER_CORE_METRICS_METRIC_REGISTRATION_H_

#include <initializer_list>
#include <string>
#include <vector>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"
#include "core/metrics/metric_catalog.h"

namespace stagger::metrics {

template <MetricId id>
auto& RegisterFamily(prometheus::Registry& registry) {
  constexpr const MetricSpec& spec = Metric(id);
  const std::string name(spec.name);
  const std::string help(spec.help);
  if constexpr (spec.type == MetricType::kCounter) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
  } else if constexpr (spec.type == MetricType::kGauge) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
  } else {
    return prometheus::BuildHistogram().Name(name).Help(help).Register(
        registry);
  }
}

prometheus::Labels CatalogLabels(MetricId id,
                                 std::initializer_list<const char*> values);

// The values of metric `id`'s only label (aborts if it has another number).
const std::vector<const char*>& OnlyLabelValues(MetricId id);

template <typename T, typename... Args>
std::vector<T*> AddPerValue(prometheus::Family<T>& family, MetricId id,
                            const Args&... args) {
  std::vector<T*> series;
  for (const char* value : OnlyLabelValues(id)) {
    series.push_back(&family.Add(CatalogLabels(id, {value}), args...));
  }
  return series;
}

}  // namespace stagger::metrics

#endif  // STAGGER_CORE_METRICS_METRIC_REGISTRATION_H_
