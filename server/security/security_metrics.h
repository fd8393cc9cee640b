// SecurityMetrics: the Prometheus series of staggerd's security layer,
// declared in the metric catalog (core/metrics/metric_catalog.h, the
// Registrar::kSecurityMetrics entries) and built from it once, every label
// value up front. Label values never come from a request (no endpoint key,
// no principal, no path: a method path outside the known services is
// counted as "other"):
//
//   stagger_authz_denied_total{service,cause}  calls refused with
//       PERMISSION_DENIED
//   stagger_authz_policy_reloads_total{result} policy reloads
//   stagger_admin_actions_total{action}        operator actions through
//       stagger.v1.Admin that changed state
//
// Thread-safe. The registry must outlive the object.
#ifndef STAGGER_SERVER_SECURITY_SECURITY_METRICS_H_
#define STAGGER_SERVER_SECURITY_SECURITY_METRICS_H_

#include <array>
#include <vector>

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "core/metrics/metric_catalog.h"

namespace stagger::security {

class SecurityMetrics {
 public:
  enum class DenyCause { kDenyRule = 0, kNoAllowRule = 1 };
  enum class AdminAction {
    kPause = 0,
    kResume,
    kReset,
    kForceBreaker,
    kDisable,
    kEnable
  };
  // Parallel to the catalog's kAuthzServiceLabels and kAdminActionLabels.
  static constexpr int kNumServices =
      static_cast<int>(metrics::kAuthzServiceLabels.size());
  static constexpr int kNumAdminActions =
      static_cast<int>(metrics::kAdminActionLabels.size());

  explicit SecurityMetrics(prometheus::Registry& registry);

  // `path` is the call's ":path"; only its service is used, from a fixed set.
  void RecordDenied(absl::string_view path, DenyCause cause);
  void RecordPolicyReload(bool ok);
  void RecordAdminAction(AdminAction action);

  // The fixed service label for a method path (exposed for tests).
  static const char* ServiceLabel(absl::string_view path);

 private:
  static constexpr int kNumCauses =
      static_cast<int>(metrics::kDenyCauseLabels.size());
  std::array<std::array<prometheus::Counter*, kNumCauses>, kNumServices>
      denied_{};
  std::vector<prometheus::Counter*> reloads_;  // [0] success, [1] failure
  std::vector<prometheus::Counter*> admin_;    // by AdminAction
};

}  // namespace stagger::security

#endif  // STAGGER_SERVER_SECURITY_SECURITY_METRICS_H_
