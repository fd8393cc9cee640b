// CircuitBreaker: one endpoint's breaker, shared by the whole fleet.
//
//   CLOSED --(N consecutive failures, or failure ratio >= r over the window
//             with >= min_throughput attempts)--> OPEN until T
//   OPEN --(read at or after T)--> HALF_OPEN      (no timer threads)
//   HALF_OPEN: at most half_open_probes probe attempts fleet-wide; a slot
//             not reported within probe_timeout is freed.
//   HALF_OPEN --(close_after_successes probe successes)--> CLOSED
//             Only a probe's success counts (the caller tells, from the
//             attempt's admission token: admission.h); a success admitted
//             otherwise (before the trip, under a lease) is traffic.
//   HALF_OPEN --(a probe failure)--> OPEN for a longer time
// Open duration = min(open_max, open_base * 2^(trips-1)) jittered by +-20%,
// where trips counts trips since the breaker last closed.
// Every method that can change state returns the transition it made, if
// any. A disabled breaker stays CLOSED. Not thread-safe: the engine holds
// the endpoint's shard lock.
#ifndef STAGGER_CORE_ENGINE_CIRCUIT_BREAKER_H_
#define STAGGER_CORE_ENGINE_CIRCUIT_BREAKER_H_

#include <cstdint>
#include <optional>

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/endpoint_record.h"
#include "core/engine/engine_config.h"
#include "core/engine/sliding_window.h"

namespace stagger::engine {

class CircuitBreaker {
 public:
  static constexpr int kSlots = 5;
  static constexpr int kMaxTrips = 60;  // counted up to this (6 bits)

  CircuitBreaker() : trips_(0), cause_(0) {}
  using MaybeTransition = std::optional<BreakerTransition>;

  BreakerState state() const { return state_; }
  // OPEN: when it half-opens (another time in the other states).
  absl::Time open_until() const { return absl::FromUnixNanos(time_ns_); }
  int trips() const { return trips_; }
  int consecutive_failures() const { return consecutive_failures_; }
  int probes_in_flight() const { return probes_in_flight_; }
  int probe_successes() const { return probe_successes_; }
  // OPEN: why it opened (kNone in the other states, or once restored).
  OpenCause open_cause() const {
    return state_ == BreakerState::kOpen ? static_cast<OpenCause>(cause_ + 1)
                                         : OpenCause::kNone;
  }

  // The state as a read at `now` would see it (OPEN past its time reads as
  // HALF_OPEN), without changing anything.
  BreakerState StateAt(absl::Time now) const;

  // Applies the time-driven OPEN -> HALF_OPEN transition.
  MaybeTransition Refresh(const BreakerParams& p, absl::Time now);
  // An attempt failed (5xx, timeout, ...).
  MaybeTransition OnFailure(const BreakerParams& p, absl::Time now,
                            absl::BitGenRef rng);
  // An attempt got an answer from the endpoint (success, or a 4xx that
  // shows it is up). `probe`: it was admitted as a probe of this half-open
  // period (HALF_OPEN only counts those).
  MaybeTransition OnAnswer(const BreakerParams& p, absl::Time now,
                           bool probe = true);
  // CLOSED: `n` answers at `at` (<= now) reported late (a lease holder's
  // counts), the last of them at `last` (at <= last <= now). They count in
  // the window if it still holds at's slot. They end the run of
  // consecutive failures only if `last` came after its last failure: a
  // late count never undoes a failure that came after it. Nothing in the
  // other states: they are traffic, never probes. Returns whether they
  // ended the run (the caller resets what a success resets).
  bool CountLateAnswers(const BreakerParams& p, absl::Time now, absl::Time at,
                        absl::Time last, uint32_t n);
  // CLOSED: how near a trip the endpoint is, as the larger of its
  // consecutive failures over the count threshold and its window's
  // failures over what the ratio threshold would trip on (counted against
  // at least min_throughput attempts): >= 1 trips. 0 in other states.
  double TripShare(const BreakerParams& p, absl::Time now);
  // Half-open periods so far (mod 2^16): names this period's probes.
  uint16_t generation() const { return generation_; }
  // HALF_OPEN: a probe admitted in this period will not be sent (its
  // waiting call went away): its slot is free again.
  void ReturnProbe();
  // HALF_OPEN: is a probe slot free now (frees timed-out slots first)?
  bool ProbeSlotFree(const BreakerParams& p, absl::Time now);
  // HALF_OPEN: takes a probe slot. Call after ProbeSlotFree() said yes.
  void AcquireProbe() { ++probes_in_flight_; }
  // Operator overrides (stagger.v1.Admin/ForceBreaker), also on a disabled
  // breaker. ForceOpen: OPEN until `until`, then half-open as usual (the
  // trip count is kept, probes and the failure window are forgotten).
  // ForceClosed: CLOSED with everything forgotten, as after a recovery.
  MaybeTransition ForceOpen(absl::Time until);
  MaybeTransition ForceClosed();

  // The state file (endpoint_record.h): everything, with absolute times;
  // Restore() makes the breaker the saved one (the window only if its slot
  // width is still the policy's). Out-of-range counts are clamped.
  BreakerRecord Save(const BreakerParams& p, absl::Time now) const;
  void Restore(const BreakerRecord& r, const BreakerParams& p);

 private:
  struct Counts {
    uint32_t attempts = 0;
    uint32_t failures = 0;
    Counts& operator+=(const Counts& o) {
      attempts += o.attempts;
      failures += o.failures;
      return *this;
    }
  };
  void Count(const BreakerParams& p, absl::Time now, bool failure);
  // CLOSED with everything forgotten but the half-open generation.
  void Forget();
  BreakerTransition Trip(const BreakerParams& p, absl::Time now,
                         absl::BitGenRef rng, OpenCause cause);

  // OPEN: when it half-opens. HALF_OPEN: the latest probe admission (see
  // ProbeSlotFree). CLOSED: the last failure counted (0: none since it
  // closed). One state at a time, so one field: 16 bytes less in every
  // tracked endpoint.
  int64_t time_ns_ = 0;
  uint32_t consecutive_failures_ = 0;
  uint16_t probes_in_flight_ = 0;
  uint16_t probe_successes_ = 0;
  uint16_t generation_ = 0;
  BreakerState state_ = BreakerState::kClosed;
  // Trips (<= kMaxTrips) and why the last one opened, in one byte: every
  // tracked endpoint has a breaker.
  uint8_t trips_ : 6;
  uint8_t cause_ : 2;  // OpenCause - 1 (kConsecutiveFailures .. kOperator)
  SlidingWindow<Counts, kSlots> window_;
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_CIRCUIT_BREAKER_H_
