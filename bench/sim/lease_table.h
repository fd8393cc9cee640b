// stagger-sim --ttl_table: what the lease TTL costs in time to recovery when
// one agent never acknowledges a revoke (its stream went quiet). The
// coordinator then holds the endpoint's half-open probes until that
// agent's lease may have run out (LeaseLedger::ProbeBlocked: its last grant
// + ttl + LeaseLedger::kExpiryGrace), so a probe is held back by at most
// one ttl (and the grace) past the trip; with every agent acknowledging,
// the probe goes when the breaker half-opens.
//
// The scenario (TtlScenario): 200 deliveries/s for 12 s (2,400) to one
// endpoint, down in [10 s, 12 s) (a 2 s outage, after 10 s in which the
// agents hold leases), 4 agents (flush 500 ms, 1 ms one way), the
// coordinated row only, on the engine's defaults. Each ttl runs twice:
// every agent acknowledging, and agent 0 deaf.
#ifndef STAGGER_BENCH_SIM_LEASE_TABLE_H_
#define STAGGER_BENCH_SIM_LEASE_TABLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/sim/sim.h"

namespace stagger::sim {

// The ttls the table lists.
std::vector<absl::Duration> TableTtls();
// The scenario for `ttl`, with `deaf_agents` agents never acknowledging.
Scenario TtlScenario(absl::Duration ttl, int deaf_agents, uint64_t seed);

struct TtlRow {
  absl::Duration ttl;
  PolicyResult acked;  // every agent acknowledges revokes
  PolicyResult deaf;   // agent 0 never does
};
// Errors: a simulation failed.
absl::StatusOr<std::vector<TtlRow>> RunTtlTable(uint64_t seed);

// Seconds from the first trip to the first probe (none: no trip or no
// probe).
std::optional<double> ProbeAfterTrip(const PolicyResult& r);

// One row per ttl: the first probe after the trip and the time from the
// recovery to 99% delivered, both ways, how long the deaf agent held the
// probe back, and its bound (ttl + LeaseLedger::kExpiryGrace); then what
// the scenario was.
std::string FormatTtlTableMarkdown(const std::vector<TtlRow>& rows,
                                   uint64_t seed);

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_LEASE_TABLE_H_
