#include "bench/sim/lease_table.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/sim/report.h"
#include "core/engine/decision_path.h"
#include "core/lease/replica_sync.h"
#include "core/lease/time_bounds.h"

namespace stagger::sim {

std::vector<absl::Duration> TableTtls() {
  return {absl::Seconds(1), absl::Seconds(2), absl::Seconds(5),
          absl::Seconds(10), absl::Seconds(30)};
}

Scenario TtlScenario(absl::Duration ttl, int deaf_agents, uint64_t seed) {
  Scenario s;
  s.arrival_rate = 200;
  s.subscriptions = 2400;
  s.endpoints = {EndpointSpec{}};
  s.endpoints[0].down = {{absl::Seconds(10), absl::Seconds(12)}};
  s.workers = 2;
  s.leases.agents = 4;
  s.leases.ttl = ttl;
  s.leases.deaf_agents = deaf_agents;
  s.seed = seed;
  return s;
}

absl::Duration DeafBound(const Scenario& s) {
  const engine::PolicyParams p = CoordinatedConfig(s).default_policy;
  const absl::Duration hold = s.leases.ttl + lease::ReplicaSync::kCoalesce +
                              s.leases.push_latency +
                              lease::SendBound(p.backoff.initial_jitter);
  return hold + std::max(engine::kMinHalfOpenWait, p.deferral.spread);
}

absl::StatusOr<std::vector<TtlRow>> RunTtlTable(uint64_t seed) {
  std::vector<TtlRow> rows;
  for (absl::Duration ttl : TableTtls()) {
    TtlRow row;
    row.ttl = ttl;
    for (int deaf : {0, 1}) {
      absl::StatusOr<PolicyResult> r =
          Simulate(TtlScenario(ttl, deaf, seed), Policy::kCoordinated);
      if (!r.ok()) {
        return absl::Status(r.status().code(),
                            absl::StrCat("ttl ", absl::FormatDuration(ttl),
                                         ": ", r.status().message()));
      }
      (deaf == 0 ? row.acked : row.deaf) = *std::move(r);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::optional<double> ProbeAfterTrip(const PolicyResult& r) {
  if (!r.first_trip_s || !r.first_probe_s) return std::nullopt;
  return *r.first_probe_s - *r.first_trip_s;
}

namespace {

std::string Time2(const std::optional<double>& t) {
  return t ? absl::StrFormat("%.2f s", *t) : std::string("never");
}

}  // namespace

std::string FormatTtlTableMarkdown(const std::vector<TtlRow>& rows,
                                   uint64_t seed) {
  std::string out =
      "| Lease TTL | First probe after the trip: every agent acknowledges | "
      "One agent deaf | Probe held back | Bound (TTL + grace) | 99% after "
      "recovery: every agent acknowledges | One agent deaf |\n"
      "|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const TtlRow& row : rows) {
    const std::optional<double> acked = ProbeAfterTrip(row.acked);
    const std::optional<double> deaf = ProbeAfterTrip(row.deaf);
    std::optional<double> held;
    if (acked && deaf) held = *deaf - *acked;
    absl::StrAppend(&out, "| ", absl::FormatDuration(row.ttl), " | ",
                    Time2(acked), " | ", Time2(deaf), " | ", Time2(held),
                    " | ",
                    Time2(absl::ToDoubleSeconds(
                        DeafBound(TtlScenario(row.ttl, 1, seed)))),
                    " | ",
                    Time2(row.acked.recovery_to_99_s), " | ",
                    Time2(row.deaf.recovery_to_99_s), " |\n");
  }
  if (rows.empty()) return out;
  const Scenario s = TtlScenario(rows[0].ttl, 1, seed);
  const LeaseModel& m = s.leases;
  const absl::Duration grace = DeafBound(s) - s.leases.ttl;
  absl::StrAppend(
      &out, "\nThe scenario: ", Thousands(s.subscriptions), " deliveries, ",
      Thousands(s.arrival_rate), " created per second from t=0. The "
      "endpoints: ", DescribeEndpoints(s), ". The coordinated row only, ",
      s.waiting_admission ? "with waiting admission, " : "", m.agents,
      " agents with leases (flush every ",
      absl::FormatDuration(m.flush_interval), ", ",
      absl::FormatDuration(m.push_latency),
      " one way), the TTL of the row. Seed ", seed,
      ". The deaf agent's lease stream goes quiet at the set change that "
      "takes the endpoint out of clear. So it neither applies nor "
      "acknowledges that change. The replica holds the endpoint's half-open "
      "probes until the lease it last renewed for that agent has ended. "
      "Grace: ",
      Time2(absl::ToDoubleSeconds(grace)),
      " (the set's coalescing, one way, the largest initial jitter's send "
      "bound, and the held calls' next look after the deferral spread).\n");
  return out;
}

}  // namespace stagger::sim
