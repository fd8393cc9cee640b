#include "core/lease/replica_sync.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/lease/planted.h"
#include "core/lease/time_bounds.h"

namespace stagger::lease {
namespace {

// The largest value of one policy field over `c`'s policies.
template <typename Get>
absl::Duration Largest(const engine::EngineConfig& c, Get get) {
  absl::Duration v = get(c.default_policy);
  for (const engine::PolicyOverride& o : c.overrides) {
    v = std::max(v, get(o.policy));
  }
  return v;
}
absl::Duration MaxJitter(const engine::EngineConfig& c) {
  return Largest(c, [](const engine::PolicyParams& p) {
    return p.backoff.initial_jitter;
  });
}
absl::Duration MaxProbeTimeout(const engine::EngineConfig& c) {
  return Largest(c, [](const engine::PolicyParams& p) {
    return p.breaker.probe_timeout;
  });
}

// The set's reasons for an endpoint condition.
struct Reason {
  bool on;
  Why why;
};
std::vector<Reason> ReasonsOf(const engine::EndpointCondition& c) {
  return {{c.near_trip, Why::kNearTrip},
          {c.breaker != engine::BreakerState::kClosed, Why::kBreaker},
          {c.retry_after, Why::kRetryAfter},
          {c.releasing, Why::kReleasing},
          {c.disabled, Why::kDisabled}};
}

}  // namespace

ReplicaSync::ReplicaSync(Options options, engine::Engine* engine,
                         const engine::Clock* mono)
    : options_(std::move(options)),
      engine_(engine),
      mono_(mono),
      start_(mono->Now()),
      set_(options_.incarnation, options_.clear_hold,
           options_.stand_in_idle),
      send_bound_(SendBound(absl::ZeroDuration())),
      grant_from_(Planted().no_restart_hold ? start_ : start_ + options_.ttl) {}

void ReplicaSync::AttachToEngine(bool feeds) {
  if (feeds) {
    engine_->set_condition_sink(this);
    engine_->pauses().set_listener(
        [this](const engine::Pause& p, bool removed) { OnPause(p, removed); });
  }
  engine_->set_probe_hold(
      [this](absl::string_view key, absl::Time) { return ProbeHeld(key); });
  OnConfig(engine_->config());
}

absl::Status ReplicaSync::CheckHello(const Hello& h) const {
  if (h.protocol != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "hello.protocol: this coordinator speaks lease protocol ",
        kProtocolVersion, ", the agent ", h.protocol,
        "; upgrade the agent (its calls still work without leases)"));
  }
  if (h.agent_id.empty() || h.agent_id.size() > kMaxAgentIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello.agent_id: must be 1..", kMaxAgentIdBytes,
                     " bytes, got ", h.agent_id.size()));
  }
  if (h.incarnation == 0) {
    return absl::InvalidArgumentError("hello.incarnation: must not be 0");
  }
  if (h.members.size() > kMaxMembers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hello.members: at most ", kMaxMembers, ", got ", h.members.size()));
  }
  if (h.next_count_seq == 0) {
    return absl::InvalidArgumentError("hello.next_count_seq: must be >= 1");
  }
  return absl::OkStatus();
}

bool ReplicaSync::MembersMatch(const std::vector<std::string>& theirs) const {
  if (options_.members.empty()) return theirs.size() <= 1;
  if (theirs.size() != options_.members.size()) return false;
  std::vector<std::string> a = theirs, b = options_.members;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  return a == b;
}

absl::StatusOr<ReplicaSync::Opened> ReplicaSync::Open(
    const Up& first, std::optional<std::string> bound_id) {
  if (!first.hello.has_value()) {
    return absl::InvalidArgumentError(
        "hello: the first message of a stream must carry it");
  }
  const Hello& hello = *first.hello;
  if (absl::Status s = CheckHello(hello); !s.ok()) return s;
  const absl::Time now = Now();
  Opened out;
  Apply apply;
  {
    absl::MutexLock l(&mu_);
    out.stream = next_stream_++;
    Stream& s = streams_[out.stream];
    s.agent = {bound_id.has_value() ? *std::move(bound_id) : hello.agent_id,
               hello.incarnation};
    s.members_match = MembersMatch(hello.members);
    Agent& a = agents_[s.agent];
    if (a.applied_seq == 0) a.applied_seq = hello.next_count_seq - 1;
    out.first.snapshot = set_.Snapshot();
    out.first.applied_seq = a.applied_seq;
    if (!s.members_match) {
      out.first.refusal = absl::StrCat(
          "no lease: this coordinator's members are [",
          absl::StrJoin(options_.members, ","), "], the agent's [",
          absl::StrJoin(hello.members, ","), "]");
    }
    if (absl::Status st = ReceiveLocked(s, first, now, &out.first, &apply);
        !st.ok()) {
      streams_.erase(out.stream);
      return st;
    }
  }
  ApplyCounts(apply);
  out.first.replica_time = engine_->clock()->Now();
  return out;
}

absl::Status ReplicaSync::TakeCounts(Stream& s, const CountReport& r,
                                     Down* down, Apply* apply) {
  Agent& a = agents_[s.agent];
  if (r.seq <= a.applied_seq) {  // re-sent after a reconnect: applied once
    ++counts_duplicate_;
    down->applied_seq = a.applied_seq;
    return absl::OkStatus();
  }
  if (r.seq > a.applied_seq + 1 + r.lost) {
    return absl::FailedPreconditionError(absl::StrCat(
        "counts.seq: expected ", a.applied_seq + 1, ", got ", r.seq, " (",
        r.seq - a.applied_seq - 1, " reports missing, ", r.lost,
        " declared lost)"));
  }
  counts_lost_ += static_cast<int64_t>(r.seq - a.applied_seq - 1);
  a.applied_seq = r.seq;
  ++counts_applied_;
  down->applied_seq = r.seq;
  apply->agent = s.agent;
  apply->report = r;
  return absl::OkStatus();
}

void ReplicaSync::Renew(Stream& s, uint64_t number, absl::Time now,
                        Down* down) {
  if (!options_.grant || number == 0 || !s.members_match ||
      now < grant_from_) {
    return;
  }
  if (s.acks.latest() < safe_floor_) return;  // its copy lacks what all hold
  s.expires = now + options_.ttl;
  ++renewals_;
  down->renewed = number;
  down->ttl = options_.ttl;
  down->version = set_.pushed_version();
  if (!s.renewals.empty() && s.renewals.back().first == down->version) {
    s.renewals.back().second = s.expires;
  } else {
    s.renewals.emplace_back(down->version, s.expires);
  }
  if (s.renewals.size() > kRecentRenewals) {
    // Fold the two oldest: the older version, the later end.
    s.renewals[1].first = s.renewals[0].first;
    s.renewals.pop_front();
  }
}

absl::Time ReplicaSync::Stream::LeasedBefore(uint64_t version) const {
  absl::Time end = absl::InfinitePast();
  for (const auto& [v, until] : renewals) {
    if (v >= version) break;
    end = until;
  }
  return end;
}

absl::Status ReplicaSync::ReceiveLocked(Stream& s, const Up& up,
                                        absl::Time now, Down* down,
                                        Apply* apply) {
  agents_[s.agent].last_seen = now;
  if (up.acked_incarnation == options_.incarnation) {
    // An agent cannot hold what was never sent.
    s.acks.Add(std::min(up.acked_version,
                        std::max(set_.pushed_version(), s.snapshot_version)),
               now);
  }
  if (up.counts.has_value()) {
    if (absl::Status st = TakeCounts(s, *up.counts, down, apply); !st.ok()) {
      return st;
    }
  }
  if (up.resync && !down->snapshot.has_value()) {
    down->snapshot = set_.Snapshot();
  }
  if (down->snapshot.has_value()) s.snapshot_version = down->snapshot->version;
  Renew(s, up.number, now, down);
  return absl::OkStatus();
}

absl::StatusOr<Down> ReplicaSync::Receive(uint64_t stream, const Up& up) {
  if (up.hello.has_value()) {
    return absl::InvalidArgumentError(
        "hello: only the first message of a stream carries one");
  }
  const absl::Time now = Now();
  Down down;
  Apply apply;
  {
    absl::MutexLock l(&mu_);
    auto it = streams_.find(stream);
    if (it == streams_.end() || !it->second.open) {
      return absl::FailedPreconditionError("the stream has ended");
    }
    if (absl::Status st = ReceiveLocked(it->second, up, now, &down, &apply);
        !st.ok()) {
      return st;
    }
  }
  ApplyCounts(apply);
  down.replica_time = engine_->clock()->Now();
  return down;
}

void ReplicaSync::ApplyCounts(Apply& apply) {
  if (!apply.report.has_value()) return;
  if (counts_filter_) counts_filter_(apply.agent, &*apply.report);
  if (counts_observer_) counts_observer_(apply.agent, *apply.report);
  // Times on another incarnation's clock (or on two) cannot be ordered
  // against this engine's failures: their successes end no run (the engine
  // reads a success stamped after now so).
  const bool own_clock =
      apply.report->clock_incarnation == options_.incarnation ||
      Planted().counts_ignore_clock;
  std::vector<engine::LateCounts> buckets;
  for (const EndpointCounts& e : apply.report->endpoints) {
    buckets.clear();
    for (const CountBucket& b : e.buckets) {
      engine::LateCounts c{b.start, b.first_attempts, b.successes,
                           own_clock ? b.last_success
                                     : absl::InfiniteFuture()};
      // Planted: a late success ends the run whenever it happened.
      if (Planted().late_counts_ignore_order && b.successes > 0) {
        c.last_success = engine_->clock()->Now();
      }
      buckets.push_back(c);
    }
    engine_->ApplyLateCounts(e.endpoint, buckets);
  }
}

void ReplicaSync::Close(uint64_t stream) {
  absl::MutexLock l(&mu_);
  auto it = streams_.find(stream);
  if (it != streams_.end()) it->second.open = false;
}

Down ReplicaSync::Resync(uint64_t stream) {
  Down down;
  down.replica_time = engine_->clock()->Now();
  absl::MutexLock l(&mu_);
  down.snapshot = set_.Snapshot();
  auto it = streams_.find(stream);
  if (it != streams_.end()) it->second.snapshot_version = down.snapshot->version;
  return down;
}

void ReplicaSync::EnterLocked(const EntryKey& key, Why why, absl::Time until,
                              absl::Time now) {
  if (Planted().entry_added_late && why != Why::kStandingIn) {
    // The hole: the set is rebuilt from the engine's table every
    // kLateEntryScan, not kept as conditions change.
    late_entries_.push_back({key, why, now});
  } else {
    set_.Enter(key, why, until, now);
  }
  Pending(now);
}

void ReplicaSync::OnConditionChange(const engine::ConditionChange& c) {
  const absl::Time now = Now();
  const EntryKey key{std::string(c.endpoint), Scope::kEndpoint};
  const std::vector<Reason> from = ReasonsOf(c.from);
  const std::vector<Reason> to = ReasonsOf(c.to);
  absl::MutexLock l(&mu_);
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i].on && !from[i].on) {
      const absl::Time until = to[i].why == Why::kRetryAfter
                                   ? c.retry_after_until
                                   : absl::InfinitePast();
      EnterLocked(key, to[i].why, until, now);
    } else if (!to[i].on && from[i].on) {
      set_.Exit(key, to[i].why, now);
    }
  }
  if (c.forgotten) {
    NotClearSet::Entry* e = set_.Find(key);
    if (e != nullptr && e->reasons == 0) set_.Forget(key);  // unless paused
  }
  Pending(now);
}

void ReplicaSync::OnPause(const engine::Pause& p, bool removed) {
  const absl::Time now = Now();
  const EntryKey key{p.target, p.prefix ? Scope::kPrefix : Scope::kEndpoint};
  absl::MutexLock l(&mu_);
  if (removed) {
    set_.Exit(key, Why::kPaused, now);
  } else {
    // Pauses are on the engine's clock; the set sweeps on this one.
    const absl::Time until = now + (p.until - engine_->clock()->Now());
    set_.Enter(key, Why::kPaused, until, now);
    if (auto* e = set_.Find(key)) e->entry.until = p.until;
  }
  Pending(now);
}

void ReplicaSync::OnConfig(engine::EngineConfig config) {
  const absl::Duration bound = SendBound(MaxJitter(config));
  const absl::Duration probe = MaxProbeTimeout(config);
  absl::MutexLock l(&mu_);
  send_bound_ = std::max(send_bound_, bound);
  // A probe admitted just before the last state save may be in flight
  // this long: no lease before it is done (a restart), and a stand-in
  // lasts past its last probe.
  if (!Planted().no_restart_hold) {
    grant_from_ = std::max(grant_from_, start_ + Stretch(probe));
  }
  set_.set_stand_in_idle(std::max(options_.stand_in_idle,
                                  Stretch(probe) + options_.ttl));
  set_.SetConfig(std::make_shared<const engine::EngineConfig>(std::move(config)));
  Pending(Now());
}

void ReplicaSync::OnStandIn(absl::string_view owner) {
  const absl::Time now = Now();
  absl::MutexLock l(&mu_);
  const EntryKey key{std::string(owner), Scope::kMember};
  const bool fresh = set_.Find(key) == nullptr;
  set_.Enter(key, Why::kStandingIn, absl::InfinitePast(), now);
  if (fresh) Pending(now);
}

void ReplicaSync::Pending(absl::Time at) {
  const bool first = first_pending_ == absl::InfiniteFuture();
  first_pending_ = std::min(first_pending_, at);
  if (first && on_pending_) on_pending_();
}

absl::Time ReplicaSync::SafeAt(uint64_t version, bool own,
                               absl::Time now) const {
  absl::Time safe = absl::InfinitePast();
  for (const auto& [id, s] : streams_) {
    const absl::Time leased = own ? s.LeasedBefore(version) : s.expires;
    if (leased == absl::InfinitePast()) continue;  // never leased so
    // The last moment this lease may have admitted on the key: when it
    // acknowledged the version, or when it ended, whichever came first.
    const absl::Time stopped = std::min(s.acks.FirstCovering(version),
                                        leased);
    if (stopped > now) return absl::InfiniteFuture();
    safe = std::max(safe, stopped + send_bound_);
  }
  return safe;
}

bool ReplicaSync::HeldOn(NotClearSet::Entry* e, absl::Time now) {
  if (Planted().probe_ignores_acks) return false;
  // Planted "check then act": the gate trusts that a key missing from the
  // set is clear, while its entry waits for the next Tick.
  if (e == nullptr && Planted().entry_added_late) return false;
  if (e != nullptr && e->safe_at != absl::InfiniteFuture()) {
    return now < e->safe_at;
  }
  const uint64_t version = e != nullptr ? e->version : set_.version();
  const bool own = e != nullptr && e->entry.key.scope != Scope::kMember;
  const absl::Time safe = SafeAt(version, own, now);
  if (safe == absl::InfiniteFuture()) return true;
  if (e != nullptr) {
    e->safe_at = safe;  // final: later leases must hold this version
    safe_floor_ = std::max(safe_floor_, version);
  }
  return now < safe;
}

bool ReplicaSync::ProbeHeld(absl::string_view key) {
  const absl::Time now = Now();
  absl::MutexLock l(&mu_);
  if (!Planted().no_restart_hold &&
      now < start_ + Stretch(options_.ttl) + send_bound_) {
    return true;  // leases an earlier incarnation granted may be live
  }
  if (!options_.members.empty()) {
    const std::string& owner = options_.members[options_.owner_of(key)];
    if (owner != options_.self) {
      NotClearSet::Entry* m = set_.Find({owner, Scope::kMember});
      if (m == nullptr) return true;
      if (!Planted().no_stand_in_hold &&
          now < m->stand_in_since + Stretch(options_.ttl) + send_bound_) {
        return true;  // the owner's own leases may be live
      }
      if (HeldOn(m, now)) return true;
    }
  }
  return HeldOn(set_.Find({std::string(key), Scope::kEndpoint}), now);
}

void ReplicaSync::SweepStreams(absl::Time now) {
  for (auto it = streams_.begin(); it != streams_.end();) {
    const Stream& s = it->second;
    const bool done = !s.open && (s.expires == absl::InfinitePast() ||
                                  s.expires + send_bound_ < now);
    if (done) {
      streams_.erase(it++);
    } else {
      ++it;
    }
  }
  for (auto it = agents_.begin(); it != agents_.end();) {
    if (it->second.last_seen + kForgetAgent < now) {
      agents_.erase(it++);
    } else {
      ++it;
    }
  }
}

std::optional<Down> ReplicaSync::Tick() {
  const absl::Time now = Now();
  std::vector<std::string> refresh;
  {
    absl::MutexLock l(&mu_);
    if (now >= last_refresh_ + kRefreshInterval) {
      last_refresh_ = now;
      std::vector<LateEntry> later;
      for (const LateEntry& e : late_entries_) {
        if (now - e.at < kLateEntryScan) {
          later.push_back(e);
        } else {
          set_.Enter(e.key, e.why, absl::InfinitePast(), now);
        }
      }
      late_entries_.swap(later);
      set_.ForEach([&](const NotClearSet::Entry& e) {
        if (e.entry.key.scope == Scope::kEndpoint) {
          refresh.push_back(e.entry.key.target);
        }
      });
    }
  }
  // Time-driven changes come back through OnConditionChange (in key order:
  // a run is the same whatever the hash table's order).
  std::sort(refresh.begin(), refresh.end());
  for (const std::string& key : refresh) engine_->RefreshCondition(key);
  std::optional<Down> down;
  {
    absl::MutexLock l(&mu_);
    if (now >= last_sweep_ + kRefreshInterval) {
      last_sweep_ = now;
      set_.Sweep(now);
      SweepStreams(now);
    }
    first_pending_ = absl::InfiniteFuture();
    std::optional<SetDelta> delta = set_.TakeDelta();
    if (!delta.has_value()) return std::nullopt;
    down.emplace();
    down->delta = std::move(delta);
  }
  down->replica_time = engine_->clock()->Now();
  return down;
}

absl::Time ReplicaSync::NextTick() const {
  absl::MutexLock l(&mu_);
  absl::Time next = std::min(last_refresh_, last_sweep_) + kRefreshInterval;
  if (first_pending_ != absl::InfiniteFuture()) {
    next = std::min(next, first_pending_ + kCoalesce);
  }
  return next;
}

ReplicaSync::Stats ReplicaSync::stats() const {
  const absl::Time now = Now();
  absl::MutexLock l(&mu_);
  Stats st;
  for (const auto& [id, s] : streams_) {
    if (s.open) ++st.streams;
    if (s.expires > now) ++st.leases;
  }
  st.entries = static_cast<int64_t>(set_.size());
  st.version = set_.version();
  st.counts_applied = counts_applied_;
  st.counts_lost = counts_lost_;
  st.counts_duplicate = counts_duplicate_;
  st.renewals = renewals_;
  return st;
}

}  // namespace stagger::lease
