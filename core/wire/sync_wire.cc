#include "core/wire/sync_wire.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/wire/wire.h"

namespace stagger::wire {
namespace {

absl::Status TooMany(absl::string_view field, size_t max, size_t got) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": at most ", max, ", got ", got));
}

absl::StatusOr<lease::EndpointCounts> ReadEndpointCounts(
    const v1::EndpointCounts& e, const std::string& field) {
  lease::EndpointCounts out;
  out.endpoint = e.endpoint();
  if (static_cast<size_t>(e.buckets_size()) > lease::kMaxBucketsPerEndpoint) {
    return TooMany(absl::StrCat(field, ".buckets"),
                   lease::kMaxBucketsPerEndpoint, e.buckets_size());
  }
  for (int i = 0; i < e.buckets_size(); ++i) {
    const v1::CountBucket& b = e.buckets(i);
    const std::string at = absl::StrCat(field, ".buckets[", i, "]");
    absl::StatusOr<absl::Time> start =
        FromProto(b.start(), absl::StrCat(at, ".start"));
    if (!start.ok()) return start.status();
    lease::CountBucket c{*start, b.first_attempts(), b.successes()};
    if (b.has_last_success()) {
      absl::StatusOr<absl::Time> last =
          FromProto(b.last_success(), absl::StrCat(at, ".last_success"));
      if (!last.ok()) return last.status();
      c.last_success = *last;
    }
    out.buckets.push_back(c);
  }
  return out;
}

absl::StatusOr<lease::Hello> ReadHello(const v1::AgentHello& h) {
  if (static_cast<size_t>(h.members_size()) > lease::kMaxMembers) {
    return TooMany("hello.members", lease::kMaxMembers, h.members_size());
  }
  lease::Hello out;
  out.agent_id = h.agent_id();
  out.incarnation = h.incarnation();
  out.protocol = h.protocol();
  out.members.assign(h.members().begin(), h.members().end());
  out.next_count_seq = h.next_count_seq();
  return out;
}

absl::Status CheckHeldLimits(const v1::SyncUp& up) {
  for (const auto& [name, n] :
       {std::pair<const char*, int>{"holds", up.holds_size()},
        {"drops", up.drops_size()},
        {"returns", up.returns_size()}}) {
    if (static_cast<size_t>(n) > lease::kMaxItemsPerMessage) {
      return TooMany(name, lease::kMaxItemsPerMessage, n);
    }
  }
  return absl::OkStatus();
}

// Scope and why: known values only.
absl::StatusOr<lease::EntryKey> ReadTarget(const v1::NotClearTarget& t,
                                           const std::string& field) {
  if (t.scope() < v1::SCOPE_ENDPOINT || t.scope() > v1::SCOPE_MEMBER) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".scope: unknown value ", t.scope()));
  }
  return lease::EntryKey{t.target(), static_cast<lease::Scope>(t.scope())};
}

absl::StatusOr<lease::NotClearEntry> ReadEntry(const v1::NotClear& e,
                                               const std::string& field) {
  absl::StatusOr<lease::EntryKey> key =
      ReadTarget(e.target(), absl::StrCat(field, ".target"));
  if (!key.ok()) return key.status();
  if (e.why() < v1::NOT_CLEAR_NEAR_TRIP || e.why() > v1::NOT_CLEAR_DISABLED) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".why: unknown value ", e.why()));
  }
  lease::NotClearEntry out{*std::move(key), static_cast<lease::Why>(e.why())};
  if (e.has_until()) {
    absl::StatusOr<absl::Time> until =
        FromProto(e.until(), absl::StrCat(field, ".until"));
    if (!until.ok()) return until.status();
    out.until = *until;
  }
  return out;
}

void WriteEntry(const lease::NotClearEntry& e, v1::NotClear* out) {
  out->mutable_target()->set_target(e.key.target);
  out->mutable_target()->set_scope(static_cast<v1::Scope>(e.key.scope));
  out->set_why(static_cast<v1::NotClearWhy>(e.why));
  if (e.until != absl::InfinitePast()) ToProto(e.until, out->mutable_until());
}

// Policies -> a configuration with every field at its default but each
// policy's initial jitter and the overrides' matches: what agents use.
absl::StatusOr<lease::SharedConfig> ReadPolicies(const v1::Policies& p,
                                                 const std::string& field) {
  if (static_cast<size_t>(p.overrides_size()) > engine::kMaxOverrides) {
    return TooMany(absl::StrCat(field, ".overrides"), engine::kMaxOverrides,
                   p.overrides_size());
  }
  auto c = std::make_shared<engine::EngineConfig>();
  absl::StatusOr<absl::Duration> d = FromProto(
      p.default_initial_jitter(), absl::StrCat(field, ".default_initial_jitter"));
  if (!d.ok()) return d.status();
  c->default_policy.backoff.initial_jitter = *d;
  for (int i = 0; i < p.overrides_size(); ++i) {
    const v1::PolicyJitter& o = p.overrides(i);
    const std::string at = absl::StrCat(field, ".overrides[", i, "]");
    engine::PolicyOverride po;
    po.match = o.has_glob() ? engine::PolicyOverride::Match::kGlob
                            : engine::PolicyOverride::Match::kPrefix;
    po.pattern = o.has_glob() ? o.glob() : o.prefix();
    absl::StatusOr<absl::Duration> j =
        FromProto(o.initial_jitter(), absl::StrCat(at, ".initial_jitter"));
    if (!j.ok()) return j.status();
    po.policy.backoff.initial_jitter = *j;
    c->overrides.push_back(std::move(po));
  }
  if (absl::Status s = engine::ValidateEngineConfig(*c); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", s.message()));
  }
  return lease::SharedConfig(std::move(c));
}

void WritePolicies(const engine::EngineConfig& c, v1::Policies* out) {
  ToProto(c.default_policy.backoff.initial_jitter,
          out->mutable_default_initial_jitter());
  for (const engine::PolicyOverride& o : c.overrides) {
    v1::PolicyJitter* pj = out->add_overrides();
    if (o.match == engine::PolicyOverride::Match::kGlob) {
      pj->set_glob(o.pattern);
    } else {
      pj->set_prefix(o.pattern);
    }
    ToProto(o.policy.backoff.initial_jitter, pj->mutable_initial_jitter());
  }
}

absl::StatusOr<lease::SetSnapshot> ReadSnapshot(const v1::SetSnapshot& s) {
  if (static_cast<size_t>(s.entries_size()) > lease::kMaxSetEntries) {
    return TooMany("snapshot.entries", lease::kMaxSetEntries, s.entries_size());
  }
  lease::SetSnapshot out;
  out.incarnation = s.incarnation();
  out.version = s.version();
  for (int i = 0; i < s.entries_size(); ++i) {
    absl::StatusOr<lease::NotClearEntry> e =
        ReadEntry(s.entries(i), absl::StrCat("snapshot.entries[", i, "]"));
    if (!e.ok()) return e.status();
    out.entries.push_back(*std::move(e));
  }
  absl::StatusOr<lease::SharedConfig> c =
      ReadPolicies(s.policies(), "snapshot.policies");
  if (!c.ok()) return c.status();
  out.config = *std::move(c);
  return out;
}

absl::StatusOr<lease::SetDelta> ReadDelta(const v1::SetDelta& d) {
  if (static_cast<size_t>(d.added_size()) > lease::kMaxSetEntries) {
    return TooMany("delta.added", lease::kMaxSetEntries, d.added_size());
  }
  if (static_cast<size_t>(d.removed_size()) > lease::kMaxSetEntries) {
    return TooMany("delta.removed", lease::kMaxSetEntries, d.removed_size());
  }
  if (d.to_version() < d.from_version()) {
    return absl::InvalidArgumentError(
        absl::StrCat("delta.to_version: must be >= from_version (",
                     d.from_version(), "), got ", d.to_version()));
  }
  lease::SetDelta out;
  out.incarnation = d.incarnation();
  out.from_version = d.from_version();
  out.to_version = d.to_version();
  for (int i = 0; i < d.added_size(); ++i) {
    absl::StatusOr<lease::NotClearEntry> e =
        ReadEntry(d.added(i), absl::StrCat("delta.added[", i, "]"));
    if (!e.ok()) return e.status();
    out.added.push_back(*std::move(e));
  }
  for (int i = 0; i < d.removed_size(); ++i) {
    absl::StatusOr<lease::EntryKey> k =
        ReadTarget(d.removed(i), absl::StrCat("delta.removed[", i, "]"));
    if (!k.ok()) return k.status();
    out.removed.push_back(*std::move(k));
  }
  if (d.has_policies()) {
    absl::StatusOr<lease::SharedConfig> c =
        ReadPolicies(d.policies(), "delta.policies");
    if (!c.ok()) return c.status();
    out.config = *std::move(c);
  }
  return out;
}

}  // namespace

absl::StatusOr<lease::CountReport> FromProto(const v1::CountReport& r) {
  if (r.seq() == 0) {
    return absl::InvalidArgumentError("counts.seq: must be >= 1");
  }
  if (static_cast<size_t>(r.endpoints_size()) > lease::kMaxItemsPerMessage) {
    return TooMany("counts.endpoints", lease::kMaxItemsPerMessage,
                   r.endpoints_size());
  }
  lease::CountReport out;
  out.seq = r.seq();
  out.lost = r.lost();
  out.clock_incarnation = r.clock_incarnation();
  out.endpoints.reserve(r.endpoints_size());
  for (int i = 0; i < r.endpoints_size(); ++i) {
    absl::StatusOr<lease::EndpointCounts> e = ReadEndpointCounts(
        r.endpoints(i), absl::StrCat("counts.endpoints[", i, "]"));
    if (!e.ok()) return e.status();
    out.endpoints.push_back(*std::move(e));
  }
  return out;
}

void ToProto(const lease::CountReport& r, v1::CountReport* out) {
  out->set_seq(r.seq);
  out->set_lost(r.lost);
  out->set_clock_incarnation(r.clock_incarnation);
  for (const lease::EndpointCounts& e : r.endpoints) {
    v1::EndpointCounts* pe = out->add_endpoints();
    pe->set_endpoint(e.endpoint);
    for (const lease::CountBucket& b : e.buckets) {
      v1::CountBucket* pb = pe->add_buckets();
      ToProto(b.start, pb->mutable_start());
      pb->set_first_attempts(b.first_attempts);
      pb->set_successes(b.successes);
      if (b.last_success != absl::InfinitePast()) {
        ToProto(b.last_success, pb->mutable_last_success());
      }
    }
  }
}

absl::StatusOr<lease::Up> FromProto(const v1::SyncUp& up) {
  if (absl::Status s = CheckHeldLimits(up); !s.ok()) return s;
  lease::Up out;
  if (up.has_hello()) {
    absl::StatusOr<lease::Hello> h = ReadHello(up.hello());
    if (!h.ok()) return h.status();
    out.hello = *std::move(h);
  }
  out.number = up.number();
  out.acked_incarnation = up.acked_incarnation();
  out.acked_version = up.acked_version();
  out.resync = up.resync();
  if (up.has_counts()) {
    absl::StatusOr<lease::CountReport> c = FromProto(up.counts());
    if (!c.ok()) return c.status();
    out.counts = *std::move(c);
  }
  return out;
}

void ToProto(const lease::Up& up, v1::SyncUp* out) {
  if (up.hello.has_value()) {
    v1::AgentHello* h = out->mutable_hello();
    h->set_agent_id(up.hello->agent_id);
    h->set_incarnation(up.hello->incarnation);
    h->set_protocol(up.hello->protocol);
    for (const std::string& m : up.hello->members) h->add_members(m);
    h->set_next_count_seq(up.hello->next_count_seq);
  }
  out->set_number(up.number);
  out->set_acked_incarnation(up.acked_incarnation);
  out->set_acked_version(up.acked_version);
  out->set_resync(up.resync);
  if (up.counts.has_value()) ToProto(*up.counts, out->mutable_counts());
}

absl::StatusOr<lease::Down> FromProto(const v1::SyncDown& down) {
  lease::Down out;
  out.applied_seq = down.applied_seq();
  out.renewed = down.renewed();
  out.version = down.version();
  out.refusal = down.refusal();
  if (down.has_ttl()) {
    absl::StatusOr<absl::Duration> ttl = FromProto(down.ttl(), "ttl");
    if (!ttl.ok()) return ttl.status();
    out.ttl = *ttl;
  }
  if (down.has_replica_time()) {
    absl::StatusOr<absl::Time> t =
        FromProto(down.replica_time(), "replica_time");
    if (!t.ok()) return t.status();
    out.replica_time = *t;
  }
  if (down.has_snapshot()) {
    absl::StatusOr<lease::SetSnapshot> s = ReadSnapshot(down.snapshot());
    if (!s.ok()) return s.status();
    out.snapshot = *std::move(s);
  }
  if (down.has_delta()) {
    absl::StatusOr<lease::SetDelta> d = ReadDelta(down.delta());
    if (!d.ok()) return d.status();
    out.delta = *std::move(d);
  }
  return out;
}

void ToProto(const lease::Down& down, v1::SyncDown* out) {
  out->set_applied_seq(down.applied_seq);
  out->set_renewed(down.renewed);
  if (down.renewed != 0) ToProto(down.ttl, out->mutable_ttl());
  out->set_version(down.version);
  if (down.replica_time != absl::InfinitePast()) {
    ToProto(down.replica_time, out->mutable_replica_time());
  }
  out->set_refusal(down.refusal);
  if (down.snapshot.has_value()) {
    v1::SetSnapshot* s = out->mutable_snapshot();
    s->set_incarnation(down.snapshot->incarnation);
    s->set_version(down.snapshot->version);
    for (const lease::NotClearEntry& e : down.snapshot->entries) {
      WriteEntry(e, s->add_entries());
    }
    if (down.snapshot->config) {
      WritePolicies(*down.snapshot->config, s->mutable_policies());
    }
  }
  if (down.delta.has_value()) {
    v1::SetDelta* d = out->mutable_delta();
    d->set_incarnation(down.delta->incarnation);
    d->set_from_version(down.delta->from_version);
    d->set_to_version(down.delta->to_version);
    for (const lease::NotClearEntry& e : down.delta->added) {
      WriteEntry(e, d->add_added());
    }
    for (const lease::EntryKey& k : down.delta->removed) {
      v1::NotClearTarget* t = d->add_removed();
      t->set_target(k.target);
      t->set_scope(static_cast<v1::Scope>(k.scope));
    }
    if (down.delta->config) {
      WritePolicies(*down.delta->config, d->mutable_policies());
    }
  }
}

}  // namespace stagger::wire
