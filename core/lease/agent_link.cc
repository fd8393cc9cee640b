#include "core/lease/agent_link.h"

#include <algorithm>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/match.h"
#include "core/lease/planted.h"
#include "core/lease/time_bounds.h"

namespace stagger::lease {

AgentLink::AgentLink(Options options) : options_(std::move(options)) {}

Up AgentLink::NewUp(absl::Time now) {
  Up u;
  u.number = ++number_;
  sent_.emplace_back(u.number, now);
  if (sent_.size() > kMaxOutstanding) sent_.pop_front();
  if (have_copy_) {
    u.acked_incarnation = incarnation_;
    u.acked_version = version_;
  }
  if (resync_) u.resync = true;
  ack_due_ = false;
  ack_due_since_ = absl::InfiniteFuture();
  return u;
}

bool AgentLink::SetMembers(std::vector<std::string> members) {
  if (members == options_.members) return false;
  options_.members = std::move(members);
  return true;
}

std::vector<Up> AgentLink::OnOpen(absl::Time now) {
  connected_ = true;
  number_ = 0;
  sent_.clear();
  refusal_.clear();  // each stream's first answer says it anew
  std::vector<Up> out;
  Up hello = NewUp(now);
  hello.hello = Hello{options_.agent_id, options_.incarnation,
                      kProtocolVersion, options_.members,
                      counts_.first_unacked()};
  out.push_back(std::move(hello));
  for (CountReport& r : counts_.Unacked()) {
    Up u = NewUp(now);
    u.counts = std::move(r);
    out.push_back(std::move(u));
  }
  next_flush_ = now + RenewEvery();
  return out;
}

void AgentLink::OnBroken() {
  connected_ = false;
  sent_.clear();
  resync_ = false;
}

void AgentLink::Insert(const NotClearEntry& e) {
  switch (e.key.scope) {
    case Scope::kEndpoint: keys_[e.key.target] = e; break;
    case Scope::kPrefix: prefixes_[e.key.target] = e; break;
    case Scope::kMember: members_.insert(e.key.target); break;
  }
}

void AgentLink::Erase(const EntryKey& k) {
  switch (k.scope) {
    case Scope::kEndpoint: keys_.erase(k.target); break;
    case Scope::kPrefix: prefixes_.erase(k.target); break;
    case Scope::kMember: members_.erase(k.target); break;
  }
}

void AgentLink::SetConfig(SharedConfig config) {
  if (config == nullptr) return;
  config_ = std::move(config);
  compiled_ = engine::CompiledConfig::Compile(*config_, nullptr);
  uniform_jitter_ = true;
  for (const engine::PolicyOverride& o : config_->overrides) {
    if (o.policy.backoff.initial_jitter !=
        config_->default_policy.backoff.initial_jitter) {
      uniform_jitter_ = false;
    }
  }
  jitter_cache_.clear();
}

void AgentLink::Apply(const SetSnapshot& s) {
  // Versions only move forward within one replica incarnation.
  const bool older = have_copy_ && s.incarnation == incarnation_ &&
                     s.version < version_;
  if (older && !Planted().agent_takes_stale_set) return;
  // A lease is good only with the set of the incarnation that granted it:
  // a new incarnation's copy needs its own lease.
  if (incarnation_ != 0 && s.incarnation != incarnation_) {
    lease_until_ = absl::InfinitePast();
  }
  keys_.clear();
  prefixes_.clear();
  members_.clear();
  for (const NotClearEntry& e : s.entries) Insert(e);
  SetConfig(s.config);
  incarnation_ = s.incarnation;
  version_ = s.version;
  have_copy_ = config_ != nullptr;
  resync_ = false;
  ack_due_ = true;
  ack_due_since_ = std::min(ack_due_since_, sync_local_);
}

void AgentLink::Apply(const SetDelta& d) {
  if (!have_copy_ || d.incarnation != incarnation_) return;
  const bool stale = d.to_version <= version_;
  if (stale && !Planted().agent_takes_stale_set) return;
  if (d.from_version > version_) {
    // A gap: this copy cannot be trusted until a snapshot replaces it.
    have_copy_ = false;
    resync_ = true;
    return;
  }
  for (const NotClearEntry& e : d.added) Insert(e);
  for (const EntryKey& k : d.removed) Erase(k);
  SetConfig(d.config);
  version_ = std::max(version_, d.to_version);
  if (!d.added.empty()) {
    ack_due_ = true;  // the replica's probes wait for it
    ack_due_since_ = std::min(ack_due_since_, sync_local_);
  }
}

void AgentLink::Renewed(const Down& down, absl::Time now) {
  if (down.renewed == 0) return;
  if (down.ttl > absl::ZeroDuration()) {
    granted_ttl_ = down.ttl;
    next_flush_ = std::min(next_flush_, now + RenewEvery());
  }
  // A renewal for a set newer than this copy is not taken: the copy must
  // be current for answers given under it.
  if (!have_copy_ || down.version > version_) return;
  if (Planted().lease_from_receipt) {
    lease_until_ = std::max(lease_until_, now + down.ttl);
    return;
  }
  for (const auto& [number, sent] : sent_) {
    if (number != down.renewed) continue;
    lease_until_ = std::max(lease_until_, sent + AgentLeaseSpan(down.ttl));
    break;
  }
  while (!sent_.empty() && sent_.front().first <= down.renewed) {
    sent_.pop_front();
  }
}

void AgentLink::OnDown(const Down& down, absl::Time now) {
  if (!down.refusal.empty()) refusal_ = down.refusal;
  if (down.snapshot.has_value()) Apply(*down.snapshot);
  if (down.delta.has_value()) Apply(*down.delta);
  if (down.replica_time != absl::InfinitePast()) {
    sync_replica_ = down.replica_time;
    sync_local_ = now;
    // The copy is this replica's set, so its incarnation is the clock's.
    sync_clock_ = have_copy_ ? incarnation_ : 0;
  }
  if (down.applied_seq != 0) counts_.OnApplied(down.applied_seq);
  Renewed(down, now);
}

std::optional<Up> AgentLink::Poll(absl::Time now) {
  if (!connected_) return std::nullopt;
  const bool flush = now >= next_flush_;
  const bool nudge = (ack_due_ || resync_) && now >= ack_due_since_ + kNudge;
  if (!flush && !nudge) return std::nullopt;
  Up u = NewUp(now);
  if (flush) {
    u.counts = counts_.TakeReport();
    next_flush_ = now + RenewEvery();
  }
  return u;
}

absl::Duration AgentLink::RenewEvery() const {
  if (granted_ttl_ <= absl::ZeroDuration()) return options_.flush_interval;
  return std::min(options_.flush_interval, granted_ttl_ / 2);
}

absl::Time AgentLink::NextPoll() const {
  if (!connected_) return absl::InfiniteFuture();
  absl::Time next = next_flush_;
  if (ack_due_ || resync_) next = std::min(next, ack_due_since_ + kNudge);
  return next;
}

std::optional<Up> AgentLink::FlushFor(absl::string_view key, absl::Time now) {
  if (!connected_) return std::nullopt;
  std::optional<CountReport> r = counts_.TakeFor(key);
  if (!r.has_value()) return std::nullopt;
  Up u = NewUp(now);
  u.counts = std::move(r);
  return u;
}

bool AgentLink::Covered(absl::string_view key) const {
  if (keys_.contains(key)) return true;
  for (const auto& [prefix, e] : prefixes_) {
    if (absl::StartsWith(key, prefix)) return true;
  }
  return false;
}

bool AgentLink::LocalOk(absl::string_view key, absl::Time now) const {
  return Current(now) && !Covered(key);
}

bool AgentLink::Current(absl::Time now) const {
  return now < lease_until_ && have_copy_;
}

bool AgentLink::StandsInFor(absl::string_view member) const {
  return members_.contains(member);
}

std::optional<NotClearEntry> AgentLink::Covering(absl::string_view key) const {
  if (auto it = keys_.find(key); it != keys_.end()) return it->second;
  for (const auto& [prefix, e] : prefixes_) {
    if (absl::StartsWith(key, prefix)) return e;
  }
  return std::nullopt;
}

absl::Duration AgentLink::JitterFor(absl::string_view key) {
  if (uniform_jitter_) return config_->default_policy.backoff.initial_jitter;
  if (auto it = jitter_cache_.find(key); it != jitter_cache_.end()) {
    return it->second;
  }
  const absl::Duration j =
      compiled_->Policy(compiled_->Resolve(key)).backoff.initial_jitter;
  if (jitter_cache_.size() >= kJitterCache) jitter_cache_.clear();
  jitter_cache_.emplace(key, j);
  return j;
}

absl::Time AgentLink::ReplicaTime(absl::Time now) const {
  return sync_replica_ + (now - sync_local_) * (1 - kMaxDrift);
}

std::optional<engine::Decision> AgentLink::Admit(const engine::AdmitInput& in,
                                                 absl::Time now,
                                                 absl::BitGenRef rng) {
  if (in.attempt != 1 || !LocalOk(in.endpoint, now)) return std::nullopt;
  const absl::Time replica_now = ReplicaTime(now);
  if (in.deadline <= replica_now) return std::nullopt;  // the engine's word
  const absl::Duration jitter = JitterFor(in.endpoint);
  engine::Decision d;
  d.verdict = engine::Verdict::kProceed;
  d.reason = engine::Reason::kInitialJitter;
  d.attempt = 1;
  d.admission = engine::kLocalAdmission;
  if (jitter > absl::ZeroDuration()) {
    d.delay = absl::Nanoseconds(absl::Uniform<int64_t>(
        rng, 0, absl::ToInt64Nanoseconds(jitter)));
  }
  counts_.Count(in.endpoint, /*first_attempt=*/true, replica_now,
                sync_clock_);
  return d;
}

std::optional<engine::Decision> AgentLink::Report(
    const engine::ReportInput& in, absl::Time now) {
  if (in.outcome != engine::Outcome::kSuccess ||
      (in.admission & engine::kProbeAdmissionBit) != 0 ||
      !LocalOk(in.endpoint, now)) {
    return std::nullopt;
  }
  engine::Decision d;
  d.verdict = engine::Verdict::kDone;
  d.reason = engine::Reason::kSucceeded;
  d.attempt = in.attempt;
  counts_.Count(in.endpoint, /*first_attempt=*/false, ReplicaTime(now),
                sync_clock_);
  return d;
}

AgentLink::EntryPage AgentLink::ListEntries(absl::string_view after,
                                            size_t max) const {
  EntryPage page;
  std::vector<const NotClearEntry*> found;
  const auto take = [&](const NotClearEntry& e) {
    if (e.key.target > after) found.push_back(&e);
  };
  for (const auto& [k, e] : keys_) take(e);
  for (const auto& [k, e] : prefixes_) take(e);
  std::vector<NotClearEntry> members;
  for (const std::string& m : members_) {
    members.push_back({EntryKey{m, Scope::kMember}, Why::kStandingIn});
  }
  for (const NotClearEntry& e : members) take(e);
  page.matched = static_cast<int64_t>(found.size());
  const size_t n = std::min(max, found.size());
  std::partial_sort(found.begin(), found.begin() + n, found.end(),
                    [](const NotClearEntry* a, const NotClearEntry* b) {
                      return a->key.target < b->key.target;
                    });
  for (size_t i = 0; i < n; ++i) page.entries.push_back(*found[i]);
  return page;
}

AgentLink::Status AgentLink::status(absl::Time now) const {
  Status s;
  s.connected = connected_;
  s.leased = now < lease_until_;
  s.in_sync = have_copy_;
  s.lease_until = lease_until_;
  s.incarnation = incarnation_;
  s.version = version_;
  s.entries = static_cast<int64_t>(keys_.size() + prefixes_.size() +
                                   members_.size());
  s.refusal = refusal_;
  s.counts_dropped = counts_.dropped();
  return s;
}

bool MayAnswerLocally(absl::Span<const LinkView* const> links,
                      absl::Span<const std::string> names, size_t owner,
                      absl::string_view key, absl::Time now) {
  if (owner >= links.size() || links[owner] == nullptr) return false;
  if (!links[owner]->LocalOk(key, now)) return false;
  for (size_t i = 0; i < links.size(); ++i) {
    if (i == owner) continue;
    const LinkView* other = links[i];
    // Planted: a copy without a live lease, or none, says "no stand-in".
    if (Planted().stand_in_trusts_stale_copy) {
      if (other != nullptr && other->StandsInFor(names[owner])) return false;
      continue;
    }
    // This agent cannot be sure that replica does not stand in.
    if (other == nullptr || !other->Current(now)) return false;
    if (other->StandsInFor(names[owner])) return false;
  }
  return true;
}

}  // namespace stagger::lease
