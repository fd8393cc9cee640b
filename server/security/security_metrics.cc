#include "server/security/security_metrics.h"

#include "absl/strings/match.h"

namespace stagger::security {
namespace {

constexpr const char* kServices[SecurityMetrics::kNumServices] = {
    "stagger.v1.RetryCoordinator", "stagger.v1.Admin",
    "grpc.health.v1.Health", "other"};
constexpr const char* kCauses[2] = {"deny_rule", "no_allow_rule"};
constexpr const char* kActions[SecurityMetrics::kNumAdminActions] = {
    "pause", "resume", "reset", "force_breaker"};

int ServiceIndex(absl::string_view path) {
  for (int i = 0; i < SecurityMetrics::kNumServices - 1; ++i) {
    const absl::string_view s = kServices[i];
    if (path.size() > s.size() + 2 && path[0] == '/' &&
        path.substr(1, s.size()) == s && path[s.size() + 1] == '/') {
      return i;
    }
  }
  return SecurityMetrics::kNumServices - 1;
}

}  // namespace

SecurityMetrics::SecurityMetrics(prometheus::Registry& registry) {
  auto& denied = prometheus::BuildCounter()
                     .Name("stagger_authz_denied_total")
                     .Help("Calls refused by the authorization policy "
                           "(PERMISSION_DENIED), by service and cause")
                     .Register(registry);
  for (int s = 0; s < kNumServices; ++s) {
    for (int c = 0; c < 2; ++c) {
      denied_[s][c] = &denied.Add({{"service", kServices[s]},
                                   {"cause", kCauses[c]}});
    }
  }
  auto& reloads = prometheus::BuildCounter()
                      .Name("stagger_authz_policy_reloads_total")
                      .Help("Authorization policy reloads by result; a "
                            "failure keeps the policy in force")
                      .Register(registry);
  reload_ok_ = &reloads.Add({{"result", "success"}});
  reload_failed_ = &reloads.Add({{"result", "failure"}});
  auto& admin = prometheus::BuildCounter()
                    .Name("stagger_admin_actions_total")
                    .Help("Operator actions through stagger.v1.Admin that "
                          "changed state, by action")
                    .Register(registry);
  for (int a = 0; a < kNumAdminActions; ++a) {
    admin_[a] = &admin.Add({{"action", kActions[a]}});
  }
}

const char* SecurityMetrics::ServiceLabel(absl::string_view path) {
  return kServices[ServiceIndex(path)];
}

void SecurityMetrics::RecordDenied(absl::string_view path, DenyCause cause) {
  denied_[ServiceIndex(path)][static_cast<int>(cause)]->Increment();
}

void SecurityMetrics::RecordPolicyReload(bool ok) {
  (ok ? reload_ok_ : reload_failed_)->Increment();
}

void SecurityMetrics::RecordAdminAction(AdminAction action) {
  admin_[static_cast<int>(action)]->Increment();
}

}  // namespace stagger::security
