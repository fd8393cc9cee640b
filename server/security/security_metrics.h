// SecurityMetrics: the Prometheus series of staggerd's security layer.
// Built once for fixed label sets; label values never come from a request
// (no endpoint key, no principal, no path: a method path outside the
// known services is counted as "other").
//
//   stagger_authz_denied_total{service,cause}  counter: calls refused with
//       PERMISSION_DENIED. service = stagger.v1.RetryCoordinator |
//       stagger.v1.Admin | grpc.health.v1.Health | other; cause =
//       deny_rule | no_allow_rule
//   stagger_authz_policy_reloads_total{result} counter: success | failure
//   stagger_admin_actions_total{action}        counter: pause | resume |
//       reset | force_breaker (operator actions that changed state)
//
// Thread-safe. The registry must outlive the object.
#ifndef STAGGER_SERVER_SECURITY_SECURITY_METRICS_H_
#define STAGGER_SERVER_SECURITY_SECURITY_METRICS_H_

#include <array>

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"

namespace stagger::security {

class SecurityMetrics {
 public:
  enum class DenyCause { kDenyRule = 0, kNoAllowRule = 1 };
  enum class AdminAction { kPause = 0, kResume, kReset, kForceBreaker };
  static constexpr int kNumServices = 4;
  static constexpr int kNumAdminActions = 4;

  explicit SecurityMetrics(prometheus::Registry& registry);

  // `path` is the call's ":path"; only its service is used, from a fixed set.
  void RecordDenied(absl::string_view path, DenyCause cause);
  void RecordPolicyReload(bool ok);
  void RecordAdminAction(AdminAction action);

  // The fixed service label for a method path (exposed for tests).
  static const char* ServiceLabel(absl::string_view path);

 private:
  std::array<std::array<prometheus::Counter*, 2>, kNumServices> denied_{};
  prometheus::Counter* reload_ok_ = nullptr;
  prometheus::Counter* reload_failed_ = nullptr;
  std::array<prometheus::Counter*, kNumAdminActions> admin_{};
};

}  // namespace stagger::security

#endif  // STAGGER_SERVER_SECURITY_SECURITY_METRICS_H_
