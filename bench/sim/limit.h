// limit_s: the fastest any fleet could reach 99% delivered after an
// endpoint's recovery without knowing its capacity in advance (the
// reference recovery_to_99_s is held to, matrix.h):
//
//   one probe period (the breaker's open_max: the longest a fleet that
//   stops sending into an outage goes without looking)
// + one round trip (the answer that shows the recovery)
// + the time a slow start takes to deliver the backlog: from a reference
//   start pace (kReferenceStartPace, 10/s), growing kReferenceGrowth-fold
//   (x3) per round trip, capped at the capacity. These are the reference's
//   own constants, not the engine's: tuning the engine does not move the
//   limit it is measured against.
//
// The round trip is the scenario's response_time, plus a queue's service
// time for an endpoint that queues (sim.h, LimiterKind::kQueue). The
// capacity is the sum of what the fleet can have of the endpoints that go
// down (EndpointSpec::FleetCapacity: a shared limiter's rate less the
// traffic the fleet cannot see; unlimited if one of them is), and with a
// finite pool at most concurrency / round trip (a worker sends one attempt
// per answer). The backlog is what
// the 99% mark still needs at the origin: ceil(0.99 x deliveries) minus the
// ones delivered by then; none left: the limit is 0.
// Pure functions.
#ifndef STAGGER_BENCH_SIM_LIMIT_H_
#define STAGGER_BENCH_SIM_LIMIT_H_

#include <optional>

#include "bench/sim/sim.h"

namespace stagger::sim {

inline constexpr double kReferenceStartPace = 10;  // attempts/s
inline constexpr double kReferenceGrowth = 3;      // per round trip

struct SlowStart {
  double start_pace = 0;  // attempts/s in the first round trip
  double growth = 1;      // the pace's factor per round trip, > 1
  double rtt_s = 0;       // > 0
  double capacity = 0;    // attempts/s at most; 0 = unlimited
};
// The engine's slow start on the scenario's round trip and capacity.
SlowStart SlowStartFor(const Scenario& s);
// Seconds `m` takes to send `backlog` attempts (0 for backlog <= 0).
double SlowStartSeconds(const SlowStart& m, double backlog);

// limit_s for `backlog` deliveries still needed at `origin_s` (seconds
// since t=0: the recovery, or a Retry-After window's end); none if
// origin + limit is past the horizon (from t=0, when the first deliveries
// are created): that backlog cannot finish.
std::optional<double> LimitSeconds(const Scenario& s, double backlog,
                                   double origin_s);

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_LIMIT_H_
