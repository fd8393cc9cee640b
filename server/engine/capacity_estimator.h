// CapacityEstimator: how many attempts per second one endpoint takes, learned
// from the whole fleet's outcomes, in both directions. It sets the pace at
// which the endpoint's release queue (release_pacer.h) lets parked
// deliveries go.
//
// The model (TCP slow start, and BBR's "pace at the delivery rate you
// measured", on fleet-wide outcomes; README "Learned release pace"):
//   kIdle     nothing learned yet; the endpoint's goodput (successes/s) is
//             measured all the time.
//   kClosed   the gate is closed (the breaker tripped, or a Retry-After
//             window runs): failures belong to the outage and teach nothing
//             about capacity, and cuts made by the outage's first failures
//             (the streak of cuts still running when the gate closed) are
//             undone. The pace to restart from is what the endpoint served.
//   kOpening  the gate opened; nothing confirms yet that the endpoint is
//             back, so the pace stays at what it served (at least
//             kStartPace) and a failure is not overload.
//   kSlowStart the first success raised the pace to drain the parked backlog
//             within kDrainTime; it grows (1 + kSlowStartGain)-fold per
//             round-trip while attempts succeed.
//   kSteady   after an overload: grows by kSteadyGain per round-trip's worth
//             of successes, so added capacity is found.
// Overload: a released attempt failed while the gate was open, the endpoint
// is still serving (goodput above zero) and at least kOverloadShare of
// recent answers are failures. At most once per round-trip the pace is then
// cut to the goodput measured plus kProbeMargin (halved instead while fewer
// than kMinAnswers recent successes back the measurement), so a saturated
// endpoint stays fully used with little waste.
// deferral.release_rate_per_second, if set, caps the pace.
//
// The round-trip time comes from the breaker's probes (SampleRtt);
// kDefaultRtt until then. Rates are attempts/s; not thread-safe (the engine
// holds the endpoint's shard lock); small, since it lives in every tracked
// endpoint.
#ifndef STAGGER_SERVER_ENGINE_CAPACITY_ESTIMATOR_H_
#define STAGGER_SERVER_ENGINE_CAPACITY_ESTIMATOR_H_

#include <cstdint>

#include "absl/time/time.h"
#include "server/engine/engine_config.h"

namespace stagger::engine {

class CapacityEstimator {
 public:
  static constexpr double kStartPace = 10;  // /s, when nothing was served
  static constexpr double kMinPace = 1;     // /s, never below
  static constexpr absl::Duration kDrainTime = absl::Seconds(4);
  static constexpr double kSlowStartGain = 2;
  static constexpr double kSteadyGain = 0.1;
  static constexpr double kProbeMargin = 0.05;
  static constexpr double kOverloadShare = 0.05;
  static constexpr double kMinAnswers = 20;
  static constexpr absl::Duration kDefaultRtt = absl::Milliseconds(250);
  static constexpr absl::Duration kMinRtt = absl::Milliseconds(10);
  static constexpr absl::Duration kMaxRtt = absl::Seconds(60);
  // Goodput and failure rates are decaying averages over about this long.
  static constexpr absl::Duration kRateTau = absl::Milliseconds(500);  // = kTauMs

  enum class Phase : uint8_t { kIdle, kClosed, kOpening, kSlowStart, kSteady };

  // The release pace now, attempts/s.
  double Pace(const DeferralParams& p) const;
  // Successes/s, measured since the gate last opened (bias-corrected while
  // the average is young).
  double Goodput(absl::Time now) const;
  absl::Duration rtt() const;
  Phase phase() const { return phase_; }
  // Still learning upwards (bookings stay short, release_pacer.h).
  bool growing() const {
    return phase_ == Phase::kOpening || phase_ == Phase::kSlowStart;
  }

  // A success (or any answer that shows the endpoint up). `backlog`: the
  // deliveries parked while the gate was closed (ReleasePacer::backlog()).
  void OnSuccess(const DeferralParams& p, absl::Time now, double backlog);
  // A failed answer. `released`: it went out while the gate was open during
  // a release. True if it counted as overload (the caller re-paces it).
  bool OnFailure(const DeferralParams& p, absl::Time now, bool released);
  void OnGateClosed(absl::Time now);
  void OnGateOpened(const DeferralParams& p, absl::Time now);
  void SampleRtt(absl::Duration rtt);

 private:
  void Decay(absl::Time now);
  void Cut(const DeferralParams& p, absl::Time now);
  double Cap(const DeferralParams& p, double pace) const;

  float pace_ = 0;         // attempts/s; 0: kStartPace
  // The pace before the current streak of cuts (one per round-trip): if the
  // gate closes during the streak, its failures were the outage's.
  float pace_before_cuts_ = 0;
  float successes_ = 0;    // decaying rates at rates_at_ms_, /s
  float failures_ = 0;
  uint32_t rates_at_ms_ = 0;   // Unix ms mod 2^32
  uint32_t measured_from_ms_ = 0;  // the gate last opened (bias correction)
  uint32_t round_end_ms_ = 0;  // kSteady: no second cut before this
  uint16_t rtt_ms_ = 0;    // 0 = not measured
  Phase phase_ = Phase::kIdle;
};

}  // namespace stagger::engine

#endif  // STAGGER_SERVER_ENGINE_CAPACITY_ESTIMATOR_H_
