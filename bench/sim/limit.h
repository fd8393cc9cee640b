// limit_s: the fastest any fleet could reach 99% delivered after an
// endpoint's recovery without knowing its capacity in advance (the
// reference recovery_to_99_s is held to, matrix.h):
//
//   one probe period (the breaker's open_max: the longest a fleet that
//   stops sending into an outage goes without looking)
// + one round trip (the answer that shows the recovery)
// + the time a slow start takes to deliver the backlog: from the engine's
//   start pace (engine::CapacityEstimator::kStartPace), growing
//   (1 + kSlowStartGain)-fold per round trip, capped at the capacity.
//
// The round trip is the scenario's response_time (what the engine measures
// from its probes; CapacityEstimator::kDefaultRtt before any). The capacity
// is the sum of the capacities of the endpoints that go down (unlimited if
// one of them is), and with a finite pool at most concurrency /
// response_time (a worker sends one attempt per answer). The backlog is what
// the 99% mark still needs at the origin: ceil(0.99 x deliveries) minus the
// ones delivered by then; none left: the limit is 0.
// Pure functions.
#ifndef STAGGER_BENCH_SIM_LIMIT_H_
#define STAGGER_BENCH_SIM_LIMIT_H_

#include <optional>

#include "bench/sim/sim.h"

namespace stagger::sim {

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
