// ReplicaEngineClock: the clock a replica's engine reads. staggerd and the
// protocol simulator both take it from here.
//
// The replica orders an agent's late successes against the last failure
// its breaker stamped (CircuitBreaker::CountLateAnswers). Stamps on a wall
// clock that steps back during an outage put a later failure before an
// earlier success, and the success wrongly ends the run. So the engine
// reads a SteadyWallClock (core/engine/clock.h): wall time that never
// steps while the process runs. The planted regression
// engine_on_wall_clock hands it `wall` itself.
//
//   auto clock = lease::ReplicaEngineClock(engine::RealClock::Instance(),
//                                          engine::MonotonicClock::Instance());
//   engine::Engine engine(config, clock.get(), random);
#ifndef STAGGER_CORE_LEASE_REPLICA_CLOCK_H_
#define STAGGER_CORE_LEASE_REPLICA_CLOCK_H_

#include <memory>

#include "core/engine/clock.h"

namespace stagger::lease {

// Both clocks must outlive the one returned.
std::unique_ptr<engine::Clock> ReplicaEngineClock(const engine::Clock* wall,
                                                  const engine::Clock* steady);

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_REPLICA_CLOCK_H_
