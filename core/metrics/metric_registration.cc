// Registration from the catalog: the label checks. See
// metric_registration.h for the contract.
#include "core/metrics/metric_registration.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace stagger::metrics {
namespace {

[[noreturn]] void Die(const MetricSpec& spec, const char* what) {
  std::fprintf(stderr, "metric %.*s: %s\n", static_cast<int>(spec.name.size()),
               spec.name.data(), what);
  std::abort();
}

bool InSet(LabelSet set, const char* value) {
  for (const char* v : LabelValues(set)) {
    if (std::strcmp(v, value) == 0) return true;
  }
  return false;
}

}  // namespace

prometheus::Labels CatalogLabels(MetricId id,
                                 std::initializer_list<const char*> values) {
  const MetricSpec& spec = Metric(id);
  if (static_cast<int>(values.size()) != spec.num_labels) {
    Die(spec, "wrong number of label values for the catalog's labels");
  }
  prometheus::Labels labels;
  int i = 0;
  for (const char* value : values) {
    const LabelSpec& label = spec.labels[i++];
    if (value == nullptr || !InSet(label.values, value)) {
      Die(spec, "label value outside the catalog's fixed set");
    }
    labels.emplace(std::string(label.name), value);
  }
  return labels;
}

const std::vector<const char*>& OnlyLabelValues(MetricId id) {
  const MetricSpec& spec = Metric(id);
  if (spec.num_labels != 1) Die(spec, "has not exactly one label");
  return LabelValues(spec.labels[0].values);
}

}  // namespace stagger::metrics
