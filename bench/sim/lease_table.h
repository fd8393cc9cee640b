// stagger-sim --ttl_table: what the stream lease's TTL costs in time to
// recovery when one agent's lease stream goes quiet (lease_model.h, a deaf
// agent): it neither applies nor acknowledges the set change that takes
// the endpoint out of clear. The replica then holds the endpoint's
// half-open probes until the lease it last renewed for that agent has
// ended (ReplicaSync::ProbeHeld), then SendBound(initial_jitter) more. With
// every agent acknowledging, the probe goes when the breaker half-opens
// (the acknowledgements come within milliseconds of the entry).
//
// The bound (DeafBound): the agent's last renewal reached the replica at
// most push_latency after its stream went quiet, which is at most
// ReplicaSync::kCoalesce after the endpoint's entry, which comes no later
// than the trip. So the replica holds the probe at most ttl + kCoalesce +
// push_latency + SendBound(initial_jitter) past the trip. A held probe's
// call looks again max(kMinHalfOpenWait, deferral.spread) later (the
// engine's HALF_OPEN_BUSY), so the first probe comes at most that much
// more after the hold.
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
// The scenario for `ttl`, with `deaf_agents` deaf agents.
Scenario TtlScenario(absl::Duration ttl, int deaf_agents, uint64_t seed);
// The latest a deaf agent lets the first probe go, after the trip (above).
absl::Duration DeafBound(const Scenario& s);

struct TtlRow {
  absl::Duration ttl;
  PolicyResult acked;  // every agent acknowledges the set change
  PolicyResult deaf;   // agent 0's stream goes quiet at it
};
// Errors: a simulation failed.
absl::StatusOr<std::vector<TtlRow>> RunTtlTable(uint64_t seed);

// Seconds from the first trip to the first probe (none: no trip or no
// probe).
std::optional<double> ProbeAfterTrip(const PolicyResult& r);

// One row per ttl: the first probe after the trip and the time from the
// recovery to 99% delivered, both ways, how long the deaf agent held the
// probe back, and the bound (DeafBound); then what the scenario was.
std::string FormatTtlTableMarkdown(const std::vector<TtlRow>& rows,
                                   uint64_t seed);

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_LEASE_TABLE_H_
