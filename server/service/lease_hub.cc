#include "server/service/lease_hub.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/engine/endpoint_key.h"
#include "core/wire/sync_wire.h"

namespace stagger::service {

LeaseHub::LeaseHub(engine::Engine* engine, lease::LeaseLedger::Options options,
                   const Ownership* ownership, const engine::Clock* clock,
                   metrics::ServerMetrics* metrics)
    : engine_(engine),
      ownership_(ownership),
      clock_(clock),
      metrics_(metrics),
      granting_(options.ttl > absl::ZeroDuration()),
      ledger_(options, clock->Now()) {}

absl::Status LeaseHub::ApplyCounts(const lease::AgentKey& agent,
                                   const v1::CountReport& counts,
                                   v1::SyncDown* down) {
  absl::StatusOr<lease::CountReport> report = wire::FromProto(counts);
  if (!report.ok()) return report.status();
  for (size_t i = 0; i < report->endpoints.size(); ++i) {
    if (absl::Status s = engine::ValidateEndpointKey(
            report->endpoints[i].endpoint, engine_->config().limits.max_key_bytes);
        !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("counts.endpoints[", i, "].", s.message()));
    }
  }
  if (ledger_.ShouldApply(agent, report->seq)) {
    for (const lease::EndpointCounts& e : report->endpoints) {
      engine_->ApplyLateCounts(e.endpoint, e.buckets);
      const bool successes =
          std::any_of(e.buckets.begin(), e.buckets.end(),
                      [](const engine::LateCounts& b) { return b.successes > 0; });
      if (successes && on_successes_) on_successes_(e.endpoint);
    }
  }
  down->set_applied_seq(report->seq);
  return absl::OkStatus();
}

absl::StatusOr<v1::SyncDown> LeaseHub::Handle(const lease::AgentKey& agent,
                                              const v1::SyncUp& up) {
  if (absl::Status s = wire::CheckSyncUpLimits(up); !s.ok()) return s;
  v1::SyncDown down;
  for (const v1::LeaseAck& a : up.lease_acks()) {
    ledger_.Ack(agent, wire::FromProto(a));
  }
  if (up.has_counts()) {
    if (absl::Status s = ApplyCounts(agent, up.counts(), &down); !s.ok()) {
      return s;
    }
  }
  const int max_key_bytes = engine_->config().limits.max_key_bytes;
  for (int i = 0; granting_ && i < up.lease_asks_size(); ++i) {
    const std::string& key = up.lease_asks(i);
    // A key this replica refuses (its limits may be narrower than the
    // agent's) gets no lease: the agent keeps asking the coordinator.
    if (!engine::ValidateEndpointKey(key, max_key_bytes).ok()) continue;
    const engine::LeaseTerms terms = engine_->LeaseTermsFor(key);
    const bool owned = ownership_ == nullptr || ownership_->Owns(key);
    if (std::optional<lease::LeaseGrant> g =
            ledger_.Grant(agent, key, terms, owned, clock_->Now())) {
      wire::ToProto(*g, down.add_grants());
    }
  }
  if (metrics_ != nullptr) metrics_->RecordLeaseGrants(down.grants_size());
  return down;
}

std::vector<SyncPeer*> LeaseHub::RefPeers(
    const std::vector<lease::AgentKey>* agents) {
  std::vector<SyncPeer*> out;
  absl::MutexLock l(&mu_);
  const auto take = [&out](SyncPeer* p) {
    p->Ref();
    out.push_back(p);
  };
  if (agents == nullptr) {
    for (auto& [agent, peer] : peers_) take(peer);
    return out;
  }
  for (const lease::AgentKey& a : *agents) {
    auto it = peers_.find(a);
    if (it != peers_.end()) {
      take(it->second);
    } else {
      out.push_back(nullptr);  // no stream: the revoke waits for its hello
    }
  }
  return out;
}

void LeaseHub::Notify(std::vector<lease::LeaseLedger::Notice> notices) {
  if (notices.empty()) return;
  if (metrics_ != nullptr) {
    metrics_->RecordLeaseRevocations(static_cast<int>(notices.size()));
  }
  absl::flat_hash_map<lease::AgentKey, std::vector<lease::LeaseRevoke>> by;
  for (lease::LeaseLedger::Notice& n : notices) {
    by[n.agent].push_back(std::move(n.revoke));
  }
  std::vector<lease::AgentKey> agents;
  for (const auto& [agent, revokes] : by) agents.push_back(agent);
  std::vector<SyncPeer*> peers = RefPeers(&agents);
  for (size_t i = 0; i < agents.size(); ++i) {
    if (peers[i] == nullptr) continue;
    peers[i]->PushRevokes(std::move(by[agents[i]]));
    peers[i]->Unref();
  }
}

void LeaseHub::OnEndpointChanged(absl::string_view endpoint) {
  if (!ledger_.HasHolders(endpoint)) return;
  if (engine_->LeaseTermsFor(endpoint).clear) return;
  Notify(ledger_.Revoke(endpoint, clock_->Now()));
}

void LeaseHub::RevokeIf(const std::function<bool(absl::string_view)>& match) {
  Notify(ledger_.RevokeIf(match, clock_->Now()));
}

bool LeaseHub::ProbeHeld(absl::string_view endpoint, absl::Time now) {
  return ledger_.AnyRevoking() && ledger_.ProbeBlocked(endpoint, now);
}

bool LeaseHub::Attach(const lease::AgentKey& agent, SyncPeer* peer) {
  SyncPeer* replaced = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return false;
    SyncPeer*& slot = peers_[agent];
    replaced = slot != peer ? slot : nullptr;
    if (replaced != nullptr) replaced->Ref();
    slot = peer;
  }
  // The same agent incarnation on a new stream: the old one is stale.
  if (replaced != nullptr) {
    replaced->End();
    replaced->Unref();
  }
  return true;
}

void LeaseHub::Detach(const lease::AgentKey& agent, SyncPeer* peer) {
  absl::MutexLock l(&mu_);
  auto it = peers_.find(agent);
  if (it != peers_.end() && it->second == peer) peers_.erase(it);
}

std::vector<lease::LeaseRevoke> LeaseHub::PendingRevokes(
    const lease::AgentKey& agent) {
  return ledger_.PendingRevokes(agent);
}

void LeaseHub::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    shut_down_ = true;
  }
  for (SyncPeer* p : RefPeers(nullptr)) {
    p->End();
    p->Unref();
  }
}

int64_t LeaseHub::streams() const {
  absl::MutexLock l(&mu_);
  return static_cast<int64_t>(peers_.size());
}

}  // namespace stagger::service
