#include "core/engine/circuit_breaker.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/random/distributions.h"

namespace stagger::engine {

void CircuitBreaker::Forget() {
  const uint16_t generation = generation_;
  *this = CircuitBreaker();
  generation_ = generation;  // a later period's probes get new tokens
}

BreakerState CircuitBreaker::StateAt(absl::Time now) const {
  if (state_ == BreakerState::kOpen && absl::ToUnixNanos(now) >= time_ns_) {
    return BreakerState::kHalfOpen;
  }
  return state_;
}

CircuitBreaker::MaybeTransition CircuitBreaker::Refresh(const BreakerParams& p,
                                                        absl::Time now) {
  if (!p.enabled && state_ != BreakerState::kClosed) {
    // Disabled by a configuration change: forget the trip.
    const BreakerState from = state_;
    Forget();
    return BreakerTransition{from, BreakerState::kClosed};
  }
  if (state_ != BreakerState::kOpen) return std::nullopt;
  const int64_t t = absl::ToUnixNanos(now);
  if (t < time_ns_) return std::nullopt;
  state_ = BreakerState::kHalfOpen;
  probes_in_flight_ = 0;
  probe_successes_ = 0;
  ++generation_;
  time_ns_ = t;
  return BreakerTransition{BreakerState::kOpen, BreakerState::kHalfOpen};
}

void CircuitBreaker::Count(const BreakerParams& p, absl::Time now,
                           bool failure) {
  const int64_t slot_ns =
      std::max<int64_t>(1, absl::ToInt64Nanoseconds(p.window) / kSlots);
  window_.Advance(absl::ToUnixNanos(now) / slot_ns);
  Counts& c = window_.Current();
  if (c.attempts == std::numeric_limits<uint32_t>::max()) {
    // Saturated: halve both, which keeps the ratio.
    c.attempts /= 2;
    c.failures /= 2;
  }
  ++c.attempts;
  if (failure) ++c.failures;
}

BreakerTransition CircuitBreaker::Trip(const BreakerParams& p, absl::Time now,
                                       absl::BitGenRef rng, OpenCause cause) {
  const BreakerState from = state_;
  cause_ = static_cast<uint8_t>(static_cast<uint8_t>(cause) - 1) & 3;
  trips_ = static_cast<uint8_t>(std::min<int>(trips_ + 1, kMaxTrips));
  const double base = absl::ToDoubleSeconds(p.open_base);
  const double max = absl::ToDoubleSeconds(p.open_max);
  const double nominal = std::min(max, std::ldexp(base, trips_ - 1));
  const double jittered = nominal * absl::Uniform(rng, 0.8, 1.2);
  time_ns_ = absl::ToUnixNanos(now + absl::Seconds(jittered));
  state_ = BreakerState::kOpen;
  consecutive_failures_ = 0;
  probes_in_flight_ = 0;
  probe_successes_ = 0;
  window_.Reset();
  return BreakerTransition{from, BreakerState::kOpen};
}

CircuitBreaker::MaybeTransition CircuitBreaker::ForceOpen(absl::Time until) {
  const BreakerState from = state_;
  time_ns_ = absl::ToUnixNanos(until);
  state_ = BreakerState::kOpen;
  cause_ = static_cast<uint8_t>(OpenCause::kOperator) - 1;
  consecutive_failures_ = 0;
  probes_in_flight_ = 0;
  probe_successes_ = 0;
  window_.Reset();
  if (from == BreakerState::kOpen) return std::nullopt;
  return BreakerTransition{from, BreakerState::kOpen};
}

CircuitBreaker::MaybeTransition CircuitBreaker::ForceClosed() {
  const BreakerState from = state_;
  Forget();
  if (from == BreakerState::kClosed) return std::nullopt;
  return BreakerTransition{from, BreakerState::kClosed};
}

CircuitBreaker::MaybeTransition CircuitBreaker::OnFailure(
    const BreakerParams& p, absl::Time now, absl::BitGenRef rng) {
  if (!p.enabled) return std::nullopt;
  switch (state_) {
    case BreakerState::kOpen:
      // An attempt sent before the trip: nothing new.
      return std::nullopt;
    case BreakerState::kHalfOpen:
      // A probe failed: the endpoint is still down.
      return Trip(p, now, rng, OpenCause::kProbeFailed);
    case BreakerState::kClosed:
      break;
  }
  if (consecutive_failures_ < std::numeric_limits<uint32_t>::max()) {
    ++consecutive_failures_;
  }
  time_ns_ = absl::ToUnixNanos(now);  // CLOSED: the last failure
  Count(p, now, /*failure=*/true);
  const Counts sum = window_.Sum();
  const bool by_count =
      consecutive_failures_ >= static_cast<uint32_t>(p.consecutive_failures);
  const bool by_ratio =
      sum.attempts >= static_cast<uint32_t>(p.min_throughput) &&
      sum.failures >= p.failure_ratio * sum.attempts;
  if (by_count) return Trip(p, now, rng, OpenCause::kConsecutiveFailures);
  if (by_ratio) return Trip(p, now, rng, OpenCause::kFailureRatio);
  return std::nullopt;
}

CircuitBreaker::MaybeTransition CircuitBreaker::OnAnswer(const BreakerParams& p,
                                                         absl::Time now,
                                                         bool probe) {
  if (!p.enabled) return std::nullopt;
  switch (state_) {
    case BreakerState::kOpen:
      return std::nullopt;  // sent before the trip; wait for the probes
    case BreakerState::kHalfOpen:
      if (!probe) return std::nullopt;  // traffic, not a probe
      if (probes_in_flight_ > 0) --probes_in_flight_;
      ++probe_successes_;
      if (probe_successes_ >= p.close_after_successes) {
        Forget();  // closed, trips and window forgotten
        return BreakerTransition{BreakerState::kHalfOpen,
                                 BreakerState::kClosed};
      }
      return std::nullopt;
    case BreakerState::kClosed:
      consecutive_failures_ = 0;
      Count(p, now, /*failure=*/false);
      return std::nullopt;
  }
  return std::nullopt;
}

bool CircuitBreaker::CountLateAnswers(const BreakerParams& p, absl::Time now,
                                      absl::Time at, absl::Time last,
                                      uint32_t n) {
  if (!p.enabled || state_ != BreakerState::kClosed || n == 0) return false;
  // Only an answer after the last failure ends its run of failures.
  const bool ended = absl::ToUnixNanos(last) > time_ns_;
  if (ended) consecutive_failures_ = 0;
  const int64_t slot_ns =
      std::max<int64_t>(1, absl::ToInt64Nanoseconds(p.window) / kSlots);
  window_.Advance(absl::ToUnixNanos(now) / slot_ns);
  Counts* c = window_.At(absl::ToUnixNanos(std::min(at, now)) / slot_ns);
  if (c == nullptr) return ended;  // older than the window
  const uint32_t room = std::numeric_limits<uint32_t>::max() - c->attempts;
  if (n > room) {  // saturated: halve both, which keeps the ratio
    c->attempts /= 2;
    c->failures /= 2;
  }
  c->attempts += std::min(n, std::numeric_limits<uint32_t>::max() - c->attempts);
  return ended;
}

double CircuitBreaker::TripShare(const BreakerParams& p, absl::Time now) {
  if (state_ != BreakerState::kClosed) return 0;
  const int64_t slot_ns =
      std::max<int64_t>(1, absl::ToInt64Nanoseconds(p.window) / kSlots);
  window_.Advance(absl::ToUnixNanos(now) / slot_ns);
  const Counts sum = window_.Sum();
  const double by_count = static_cast<double>(consecutive_failures_) /
                          std::max(1, p.consecutive_failures);
  const double trips_at =
      p.failure_ratio *
      std::max<double>(sum.attempts, std::max(1, p.min_throughput));
  return std::max(by_count, sum.failures / trips_at);
}

void CircuitBreaker::ReturnProbe() {
  if (state_ == BreakerState::kHalfOpen && probes_in_flight_ > 0) {
    --probes_in_flight_;
  }
}

// In HALF_OPEN, time_ns_ is the time of the latest probe admission (the
// caller takes the slot when this says yes), or of the half-open transition.
// Slots are freed only once the newest probe in flight is probe_timeout old:
// then every probe in flight is at least that old and none has reported.
// Freeing them all from the half-open instant instead would free a probe
// admitted a moment ago and let the quota be exceeded.
bool CircuitBreaker::ProbeSlotFree(const BreakerParams& p, absl::Time now) {
  const int64_t t = absl::ToUnixNanos(now);
  if (probes_in_flight_ > 0 &&
      t - time_ns_ >= absl::ToInt64Nanoseconds(p.probe_timeout)) {
    // The probes in flight never reported: give their slots to new probes.
    probes_in_flight_ = 0;
  }
  const bool free = probes_in_flight_ + probe_successes_ <
                    static_cast<uint32_t>(p.half_open_probes);
  if (free) time_ns_ = t;
  return free;
}

namespace {

int64_t BreakerSlotNs(const BreakerParams& p) {
  return std::max<int64_t>(1, absl::ToInt64Nanoseconds(p.window) /
                                  CircuitBreaker::kSlots);
}

}  // namespace

BreakerRecord CircuitBreaker::Save(const BreakerParams& p,
                                   absl::Time now) const {
  BreakerRecord r;
  r.state = state_;
  r.time_ns = time_ns_;
  r.consecutive_failures = consecutive_failures_;
  r.probes_in_flight = probes_in_flight_;
  r.probe_successes = probe_successes_;
  r.trips = trips_;
  r.window = window_.Save<&Counts::attempts, &Counts::failures>(
      BreakerSlotNs(p), absl::ToUnixNanos(now));
  return r;
}

void CircuitBreaker::Restore(const BreakerRecord& r, const BreakerParams& p) {
  *this = CircuitBreaker();
  const int s = static_cast<int>(r.state);
  state_ = s >= 1 && s <= kNumBreakerStates ? r.state : BreakerState::kClosed;
  time_ns_ = r.time_ns;
  consecutive_failures_ = r.consecutive_failures;
  probes_in_flight_ = static_cast<uint16_t>(
      std::min<uint32_t>(r.probes_in_flight, UINT16_MAX));
  probe_successes_ = static_cast<uint16_t>(
      std::min<uint32_t>(r.probe_successes, UINT16_MAX));
  trips_ = static_cast<uint8_t>(std::min<uint32_t>(r.trips, kMaxTrips));
  window_.Restore<&Counts::attempts, &Counts::failures>(r.window,
                                                        BreakerSlotNs(p));
}

}  // namespace stagger::engine
