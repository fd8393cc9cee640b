// SecurityMetrics: families from the metric catalog, the service label of a
// method path. See security_metrics.h for the contract.
#include "server/security/security_metrics.h"

#include <string_view>

#include "core/metrics/metric_registration.h"

namespace stagger::security {
namespace {

using metrics::CatalogLabels;
using metrics::MetricId;
using metrics::RegisterFamily;

static_assert(static_cast<int>(SecurityMetrics::DenyCause::kNoAllowRule) + 1 ==
                  static_cast<int>(metrics::kDenyCauseLabels.size()),
              "DenyCause follows kDenyCauseLabels");
static_assert(static_cast<int>(SecurityMetrics::AdminAction::kEnable) +
                      1 ==
                  SecurityMetrics::kNumAdminActions,
              "AdminAction follows kAdminActionLabels");
static_assert(std::string_view(metrics::kResultLabels[0]) == "success",
              "reloads_ indexes success as 0, failure as 1");

// The index in kAuthzServiceLabels of the service `path` calls; the last
// ("other") for any other path.
int ServiceIndex(absl::string_view path) {
  for (int i = 0; i < SecurityMetrics::kNumServices - 1; ++i) {
    const absl::string_view s = metrics::kAuthzServiceLabels[i];
    if (path.size() > s.size() + 2 && path[0] == '/' &&
        path.substr(1, s.size()) == s && path[s.size() + 1] == '/') {
      return i;
    }
  }
  return SecurityMetrics::kNumServices - 1;
}

}  // namespace

SecurityMetrics::SecurityMetrics(prometheus::Registry& registry) {
  auto& denied = RegisterFamily<MetricId::kAuthzDenied>(registry);
  for (int s = 0; s < kNumServices; ++s) {
    for (int c = 0; c < kNumCauses; ++c) {
      denied_[s][c] = &denied.Add(CatalogLabels(
          MetricId::kAuthzDenied, {metrics::kAuthzServiceLabels[s],
                                   metrics::kDenyCauseLabels[c]}));
    }
  }
  reloads_ = metrics::AddPerValue(
      RegisterFamily<MetricId::kAuthzPolicyReloads>(registry),
      MetricId::kAuthzPolicyReloads);
  admin_ = metrics::AddPerValue(
      RegisterFamily<MetricId::kAdminActions>(registry),
      MetricId::kAdminActions);
}

const char* SecurityMetrics::ServiceLabel(absl::string_view path) {
  return metrics::kAuthzServiceLabels[ServiceIndex(path)];
}

void SecurityMetrics::RecordDenied(absl::string_view path, DenyCause cause) {
  denied_[ServiceIndex(path)][static_cast<int>(cause)]->Increment();
}

void SecurityMetrics::RecordPolicyReload(bool ok) {
  reloads_[ok ? 0 : 1]->Increment();
}

void SecurityMetrics::RecordAdminAction(AdminAction action) {
  admin_[static_cast<int>(action)]->Increment();
}

}  // namespace stagger::security
