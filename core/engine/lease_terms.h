// What the engine tells the lease side (core/lease/) about one endpoint:
// whether it is clear for a lease and on what terms, and how counts that a
// lease holder reports late are learned.
//
// Clear means nothing about the endpoint needs the fleet's central view:
// its condition is clear (endpoint_condition.h) and no operator's pause
// covers it.
//
// Late counts (ApplyLateCounts) are learned at the time they happened, as
// today's decisions would have learned them. First attempts fund the retry
// budget in their slot of its window. Successes count in the breaker's
// window (CLOSED only: in other states they are traffic, never probes) and
// in the served rate. Successes end a run of failures only if they came
// after its last failure, and then reset the decorrelated backoff state as
// a reported success does. Counts are never evidence of recovery for a
// waiting call. Counts older than a window are outside it already.
// Runs under the endpoint's shard lock (Engine calls these).
#ifndef STAGGER_CORE_ENGINE_LEASE_TERMS_H_
#define STAGGER_CORE_ENGINE_LEASE_TERMS_H_

#include <cstdint>

#include "absl/time/time.h"
#include "core/engine/endpoint_state.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {

struct LeaseTerms {
  bool clear = false;
  // The endpoint's policy: a leased first attempt is spread over [0, this).
  absl::Duration initial_jitter = absl::ZeroDuration();
  // Deliveries per second the endpoint sees lately: the larger of the
  // successes it served in the last second and the first attempts per
  // second over the budget's window (sizes the allowance).
  double served_per_second = 0;
};

// Counts of one time bucket reported by a lease holder.
struct LateCounts {
  absl::Time at;  // the bucket's start
  uint32_t first_attempts = 0;
  uint32_t successes = 0;
  // When the bucket's last success happened (InfinitePast: not known; the
  // bucket's start is taken). A run of failures ends only on a success
  // after its last failure.
  absl::Time last_success = absl::InfinitePast();
};

LeaseTerms TermsFor(EndpointState& st, const PolicyParams& p, absl::Time now,
                    bool paused);
void ApplyLateCounts(EndpointState& st, const PolicyParams& p, absl::Time now,
                     const LateCounts& counts);

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_LEASE_TERMS_H_
