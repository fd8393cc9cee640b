#include "server/daemon/leases.h"

#include "absl/strings/str_cat.h"

namespace stagger::daemon {

absl::Status CheckLeaseTtl(absl::Duration ttl) {
  if (ttl == absl::ZeroDuration() ||
      (ttl >= kMinLeaseTtl && ttl <= kMaxLeaseTtl)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--lease_ttl: must be 0 (no leases) or in [",
      absl::FormatDuration(kMinLeaseTtl), ", ",
      absl::FormatDuration(kMaxLeaseTtl), "], got ",
      absl::FormatDuration(ttl)));
}

Leases::Leases(engine::Engine* engine, absl::Duration ttl,
               const service::Ownership* ownership,
               metrics::ServerMetrics* metrics)
    : metrics_(metrics),
      hub_(engine, {ttl}, ownership, engine::RealClock::Instance(), metrics),
      sync_(&hub_, [metrics](service::SyncService::Direction d) {
        if (metrics != nullptr) {
          metrics->RecordSyncMessage(d == service::SyncService::Direction::kIn);
        }
      }) {
  engine->set_probe_hold([this](absl::string_view key, absl::Time now) {
    return hub_.ProbeHeld(key, now);
  });
}

void Leases::Sweep() {
  const size_t live = hub_.Sweep();
  if (metrics_ != nullptr) metrics_->SetLeases(static_cast<int64_t>(live));
}

void Leases::RevokeAll() {
  hub_.RevokeIf([](absl::string_view) { return true; });
}

}  // namespace stagger::daemon
