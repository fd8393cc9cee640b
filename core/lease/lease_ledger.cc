#include "core/lease/lease_ledger.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace stagger::lease {
namespace {

// An agent that has not been heard from for this long is forgotten (its
// count reports' sequence too).
constexpr absl::Duration kForgetAgentAfter = absl::Minutes(10);

}  // namespace

LeaseLedger::LeaseLedger(Options options, absl::Time start)
    : options_(options),
      learning_until_(start + options.ttl),
      epoch_counter_(static_cast<uint64_t>(absl::ToUnixMillis(start)) << 20) {}

uint64_t LeaseLedger::NextEpoch() { return ++epoch_counter_; }

std::optional<LeaseGrant> LeaseLedger::Grant(const AgentKey& agent,
                                             absl::string_view endpoint,
                                             const engine::LeaseTerms& terms,
                                             bool owned, absl::Time now) {
  absl::MutexLock l(&mu_);
  Agent& a = agents_[agent];
  a.last_seen = now;
  Endpoint& e = endpoints_[endpoint];
  if (e.first_ask == absl::InfinitePast()) e.first_ask = now;
  if (now < learning_until_ || (!owned && now - e.first_ask < options_.ttl) ||
      !terms.clear) {
    return std::nullopt;
  }
  if (e.epoch == 0) e.epoch = NextEpoch();
  Holder* held = nullptr;
  for (Holder& h : e.holders) {
    if (h.agent == agent && h.epoch == e.epoch && !h.revoking) held = &h;
  }
  if (held == nullptr) {
    if (a.leases >= kMaxLeasesPerAgent) return std::nullopt;
    e.holders.push_back(Holder{agent, e.epoch, {}, false});
    held = &e.holders.back();
    ++a.leases;
  }
  held->expires = now + options_.ttl + kExpiryGrace;
  const double by_rate = std::ceil(terms.served_per_second *
                                   absl::ToDoubleSeconds(kAllowancePeriod));
  LeaseGrant g;
  g.endpoint = std::string(endpoint);
  g.epoch = e.epoch;
  g.ttl = options_.ttl;
  g.allowance = static_cast<uint32_t>(std::clamp<double>(
      by_rate, kMinAllowance, kMaxAllowance));
  g.initial_jitter = terms.initial_jitter;
  return g;
}

std::vector<LeaseLedger::Notice> LeaseLedger::RevokeLocked(
    Endpoint& e, absl::string_view endpoint, absl::Time now) {
  std::vector<Notice> out;
  // The revoke names the new epoch: every lease older than it ends.
  e.epoch = NextEpoch();
  for (Holder& h : e.holders) {
    if (h.revoking || h.expires <= now) continue;
    h.revoking = true;
    revoking_.fetch_add(1, std::memory_order_relaxed);
    out.push_back({h.agent, {std::string(endpoint), e.epoch}});
  }
  return out;
}

std::vector<LeaseLedger::Notice> LeaseLedger::Revoke(
    absl::string_view endpoint, absl::Time now) {
  absl::MutexLock l(&mu_);
  auto it = endpoints_.find(endpoint);
  if (it == endpoints_.end()) return {};
  return RevokeLocked(it->second, endpoint, now);
}

std::vector<LeaseLedger::Notice> LeaseLedger::RevokeIf(
    const std::function<bool(absl::string_view)>& match, absl::Time now) {
  absl::MutexLock l(&mu_);
  std::vector<Notice> out;
  for (auto& [key, e] : endpoints_) {
    if (e.holders.empty() || !match(key)) continue;
    std::vector<Notice> some = RevokeLocked(e, key, now);
    out.insert(out.end(), std::make_move_iterator(some.begin()),
               std::make_move_iterator(some.end()));
  }
  return out;
}

void LeaseLedger::DropHolder(const Holder& h) {
  if (h.revoking) revoking_.fetch_sub(1, std::memory_order_relaxed);
  auto a = agents_.find(h.agent);
  if (a != agents_.end() && a->second.leases > 0) --a->second.leases;
}

void LeaseLedger::Ack(const AgentKey& agent, const LeaseAck& ack) {
  absl::MutexLock l(&mu_);
  auto it = endpoints_.find(ack.endpoint);
  if (it == endpoints_.end()) return;
  std::vector<Holder>& hs = it->second.holders;
  for (auto h = hs.begin(); h != hs.end();) {
    if (h->agent == agent && h->epoch <= ack.epoch) {
      DropHolder(*h);
      h = hs.erase(h);
    } else {
      ++h;
    }
  }
}

std::vector<LeaseRevoke> LeaseLedger::PendingRevokes(const AgentKey& agent) {
  absl::MutexLock l(&mu_);
  std::vector<LeaseRevoke> out;
  for (const auto& [key, e] : endpoints_) {
    for (const Holder& h : e.holders) {
      if (h.agent == agent && h.revoking) out.push_back({key, e.epoch});
    }
  }
  return out;
}

bool LeaseLedger::ProbeBlocked(absl::string_view endpoint, absl::Time now) {
  absl::MutexLock l(&mu_);
  auto it = endpoints_.find(endpoint);
  if (it == endpoints_.end()) return false;
  for (const Holder& h : it->second.holders) {
    if (h.epoch < it->second.epoch && h.expires > now) return true;
  }
  return false;
}

bool LeaseLedger::HasHolders(absl::string_view endpoint) {
  absl::MutexLock l(&mu_);
  auto it = endpoints_.find(endpoint);
  return it != endpoints_.end() && !it->second.holders.empty();
}

bool LeaseLedger::ShouldApply(const AgentKey& agent, uint64_t seq) {
  absl::MutexLock l(&mu_);
  Agent& a = agents_[agent];
  if (seq <= a.applied_seq) return false;
  a.applied_seq = seq;
  return true;
}

size_t LeaseLedger::Sweep(absl::Time now) {
  absl::MutexLock l(&mu_);
  size_t live = 0;
  for (auto it = endpoints_.begin(); it != endpoints_.end();) {
    std::vector<Holder>& hs = it->second.holders;
    for (auto h = hs.begin(); h != hs.end();) {
      if (h->expires <= now) {
        DropHolder(*h);
        h = hs.erase(h);
      } else {
        ++h;
      }
    }
    live += hs.size();
    const bool forget =
        hs.empty() && now - it->second.first_ask >= options_.ttl;
    if (forget) {
      endpoints_.erase(it++);
    } else {
      ++it;
    }
  }
  for (auto it = agents_.begin(); it != agents_.end();) {
    if (it->second.leases == 0 && now - it->second.last_seen > kForgetAgentAfter) {
      agents_.erase(it++);
    } else {
      ++it;
    }
  }
  return live;
}

}  // namespace stagger::lease
