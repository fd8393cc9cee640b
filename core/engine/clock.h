// Clock: the engine's only source of time. Injected so that tests drive a
// fake clock and never sleep. Implementations are thread-safe.
#ifndef STAGGER_CORE_ENGINE_CLOCK_H_
#define STAGGER_CORE_ENGINE_CLOCK_H_

#include <chrono>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace stagger::engine {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock now. Need not be monotonic; the engine tolerates a clock
  // that steps back (state times are compared, never subtracted blindly).
  virtual absl::Time Now() const = 0;
};

// absl::Now(). Use RealClock::Instance().
class RealClock final : public Clock {
 public:
  static RealClock* Instance() {
    static RealClock* clock = new RealClock;
    return clock;
  }
  absl::Time Now() const override { return absl::Now(); }
};

// The process's monotonic clock as an absl::Time: never steps, never goes
// back; only differences between its readings mean anything (the lease
// protocol measures its leases on it). Use MonotonicClock::Instance().
class MonotonicClock final : public Clock {
 public:
  static MonotonicClock* Instance() {
    static MonotonicClock* clock = new MonotonicClock;
    return clock;
  }
  absl::Time Now() const override {
    return absl::UnixEpoch() +
           absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  }
};

// Wall time that never steps: `wall` read once, at construction, then
// advanced by `steady`. A daemon's engine reads this, so a wall clock
// stepped back or forward while it runs moves none of its decisions, and
// the order of two stamps is the order of their events. (On Linux the
// monotonic clock follows NTP's rate corrections, so only steps separate
// the two.) A step shows only across a restart, which the engine
// tolerates. Thread-safe; both clocks must outlive it.
//
//   SteadyWallClock clock(RealClock::Instance(), MonotonicClock::Instance());
//   Engine engine(config, &clock, random);
class SteadyWallClock final : public Clock {
 public:
  SteadyWallClock(const Clock* wall, const Clock* steady)
      : steady_(steady), wall_at_start_(wall->Now()),
        steady_at_start_(steady->Now()) {}
  absl::Time Now() const override {
    return wall_at_start_ + (steady_->Now() - steady_at_start_);
  }

 private:
  const Clock* const steady_;
  const absl::Time wall_at_start_;
  const absl::Time steady_at_start_;
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_CLOCK_H_
