#include "server/daemon/lease_step.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace stagger::daemon {
namespace {

lease::ReplicaSync::Options SyncOptions(absl::Duration ttl,
                                        const service::Ownership* ownership) {
  lease::ReplicaSync::Options o;
  // No leases (0): nothing is granted; probes are held for no lease.
  o.grant = ttl > absl::ZeroDuration();
  o.ttl = o.grant ? ttl : absl::Nanoseconds(1);
  std::random_device rd;
  do {
    o.incarnation = (uint64_t{rd()} << 32) | rd();
  } while (o.incarnation == 0);
  if (ownership != nullptr) {
    o.members = ownership->members().names();
    o.self = ownership->self();
    o.owner_of = [ownership](absl::string_view key) {
      return ownership->members().Owner(key);
    };
  }
  return o;
}

}  // namespace

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
               metrics::ServerMetrics* metrics,
               service::SyncHub::Attach attach)
    : engine_(engine),
      ownership_(ownership),
      hub_(engine, SyncOptions(ttl, ownership), metrics,
           engine::MonotonicClock::Instance(), std::move(attach)),
      sync_(&hub_, [metrics](service::SyncService::Direction d) {
        if (metrics != nullptr) {
          metrics->RecordSyncMessage(d == service::SyncService::Direction::kIn);
        }
      }) {}

void Leases::OnConfigReloaded() { hub_.sync().OnConfig(engine_->config()); }

void Leases::StandIn(absl::string_view key) {
  if (ownership_ == nullptr || ownership_->Owns(key)) return;
  hub_.sync().OnStandIn(
      ownership_->members().names()[ownership_->members().Owner(key)]);
}

}  // namespace stagger::daemon
