#include "core/wire/sync_wire.h"

#include <string>

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
    absl::StatusOr<absl::Time> at =
        FromProto(b.start(), absl::StrCat(field, ".buckets[", i, "].start"));
    if (!at.ok()) return at.status();
    engine::LateCounts c{*at, b.first_attempts(), b.successes()};
    if (b.has_last_success()) {
      absl::StatusOr<absl::Time> last = FromProto(
          b.last_success(), absl::StrCat(field, ".buckets[", i, "].last_success"));
      if (!last.ok()) return last.status();
      c.last_success = *last;
    }
    out.buckets.push_back(c);
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
  for (const lease::EndpointCounts& e : r.endpoints) {
    v1::EndpointCounts* pe = out->add_endpoints();
    pe->set_endpoint(e.endpoint);
    for (const engine::LateCounts& b : e.buckets) {
      v1::CountBucket* pb = pe->add_buckets();
      ToProto(b.at, pb->mutable_start());
      pb->set_first_attempts(b.first_attempts);
      pb->set_successes(b.successes);
      if (b.last_success != absl::InfinitePast()) {
        ToProto(b.last_success, pb->mutable_last_success());
      }
    }
  }
}

absl::StatusOr<lease::LeaseGrant> FromProto(const v1::LeaseGrant& g) {
  lease::LeaseGrant out;
  out.endpoint = g.endpoint();
  out.epoch = g.epoch();
  out.allowance = g.allowance();
  absl::StatusOr<absl::Duration> ttl = FromProto(g.ttl(), "grants.ttl");
  if (!ttl.ok()) return ttl.status();
  absl::StatusOr<absl::Duration> jitter =
      FromProto(g.initial_jitter(), "grants.initial_jitter");
  if (!jitter.ok()) return jitter.status();
  out.ttl = *ttl;
  out.initial_jitter = *jitter;
  return out;
}

void ToProto(const lease::LeaseGrant& g, v1::LeaseGrant* out) {
  out->set_endpoint(g.endpoint);
  out->set_epoch(g.epoch);
  ToProto(g.ttl, out->mutable_ttl());
  out->set_allowance(g.allowance);
  ToProto(g.initial_jitter, out->mutable_initial_jitter());
}

lease::LeaseRevoke FromProto(const v1::LeaseRevoke& r) {
  return {r.endpoint(), r.epoch()};
}
void ToProto(const lease::LeaseRevoke& r, v1::LeaseRevoke* out) {
  out->set_endpoint(r.endpoint);
  out->set_epoch(r.epoch);
}

lease::LeaseAck FromProto(const v1::LeaseAck& a) {
  return {a.endpoint(), a.epoch()};
}
void ToProto(const lease::LeaseAck& a, v1::LeaseAck* out) {
  out->set_endpoint(a.endpoint);
  out->set_epoch(a.epoch);
}

absl::Status CheckSyncUpLimits(const v1::SyncUp& up) {
  const size_t max = lease::kMaxItemsPerMessage;
  if (static_cast<size_t>(up.lease_asks_size()) > max) {
    return TooMany("lease_asks", max, up.lease_asks_size());
  }
  if (static_cast<size_t>(up.lease_acks_size()) > max) {
    return TooMany("lease_acks", max, up.lease_acks_size());
  }
  return absl::OkStatus();
}

}  // namespace stagger::wire
