// CapacityEstimator: how many attempts per second one endpoint takes, learned
// from the whole fleet's outcomes, in both directions. It sets the pace at
// which the endpoint's release queue (release_pacer.h) lets parked
// deliveries go.
//
// The model (TCP Reno's slow start and threshold, with BBR's "pace at the
// delivery rate you measured", on fleet-wide outcomes; docs/API.md,
// "Learned release pace"):
//   - What the endpoint served before (ServedRate) is where a release
//     starts from; goodput during a release is measured here.
//   - Gate closed (the breaker tripped, or a Retry-After window runs):
//     failures belong to the outage and teach nothing about capacity. The
//     cuts its first failures made are undone: a streak of cuts (one per
//     round-trip) that began no earlier than a round-trip before the
//     endpoint's last success, i.e. that the endpoint did not outlive while
//     serving. The pace to restart from is what the endpoint served.
//   - Gate open again: nothing confirms yet that the endpoint is back, so
//     the pace stays there (at least kStartPace) and a failure is not
//     overload. The first success raises it to drain the parked backlog
//     within kDrainTime.
//   - Growth: below the threshold (the capacity measured at the last cut;
//     none yet: unlimited) the pace grows (1 + kSlowStartGain)-fold per
//     round-trip while attempts succeed; above it, by kSteadyGain per
//     round-trip, so added capacity is found.
//   - Overload: a released attempt failed while the gate was open, the
//     endpoint served a success within the last kDownAfterRtts round-trips
//     (else it is down, and the failure is the breaker's), and at least
//     kOverloadShare of recent answers are failures. At most once per
//     round-trip the pace and the threshold are cut to the goodput measured
//     plus kProbeMargin (halved instead while fewer than kMinAnswers
//     successes back the measurement), so a saturated endpoint stays fully
//     used with little waste.
//   - deferral.release_rate_per_second, if set, caps the pace.
// The round-trip time comes from the breaker's probes (SampleRtt);
// kDefaultRtt until then.
//
// Rates are attempts/s; times are kept as Unix ms mod 2^32 (instants a few
// days apart at most). Not thread-safe: the engine holds the endpoint's
// shard lock. Small, since it lives in every tracked endpoint.
#ifndef STAGGER_CORE_ENGINE_CAPACITY_ESTIMATOR_H_
#define STAGGER_CORE_ENGINE_CAPACITY_ESTIMATOR_H_

#include <cstdint>

#include "absl/time/time.h"
#include "core/engine/endpoint_record.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {

// ServedRate: what an endpoint serves, successes per second, counted per
// whole second of the clock. Kept for every tracked endpoint (8 bytes), so
// that "what it was last seen to serve" is known when an outage begins.
class ServedRate {
 public:
  void OnSuccess(absl::Time now);
  // `n` successes at `at`, reported late (a lease holder's counts): counted
  // in at's second if it is this one or the one before, dropped if older.
  void OnSuccesses(absl::Time at, uint32_t n);
  // Successes in the last complete second, or so far in this one if more
  // (0 if the last success is older than that).
  double PerSecond(absl::Time now) const;

  // The state file (endpoint_record.h), with the full Unix second.
  ServedRecord Save(absl::Time now) const;
  void Restore(const ServedRecord& r);

 private:
  uint32_t second_ = 0;        // Unix seconds mod 2^32 of this_second_
  uint16_t this_second_ = 0;   // saturating
  uint16_t last_second_ = 0;   // the second before second_
};

class CapacityEstimator {
 public:
  static constexpr double kStartPace = 10;  // /s, when nothing was served
  static constexpr double kMinPace = 1;     // /s, never below
  static constexpr absl::Duration kDrainTime = absl::Seconds(4);
  static constexpr double kSlowStartGain = 2;
  static constexpr double kSteadyGain = 0.1;
  static constexpr double kProbeMargin = 0.05;
  static constexpr double kOverloadShare = 0.05;
  static constexpr double kMinAnswers = 10;
  static constexpr double kDownAfterRtts = 2;
  static constexpr absl::Duration kDefaultRtt = absl::Milliseconds(250);
  static constexpr absl::Duration kMinRtt = absl::Milliseconds(10);
  static constexpr absl::Duration kMaxRtt = absl::Seconds(60);
  // Goodput and failure rates are decaying averages over about this long.
  static constexpr absl::Duration kRateTau = absl::Milliseconds(500);

  // Values equal the proto enums stagger.v1.PacePhase / PaceSource.
  enum class Phase : uint8_t {
    kIdle = 1,
    kClosed = 2,
    kOpening = 3,
    kReleasing = 4,
  };
  // Where the current pace came from (GetEndpoint shows it).
  enum class Source : uint8_t {
    kStart = 1,    // kStartPace: nothing served before
    kServed = 2,   // what the endpoint served when the gate closed
    kBacklog = 3,  // sized to drain the parked backlog within kDrainTime
    kGrowth = 4,   // grown while released attempts succeeded
    kGoodput = 5,  // cut to the goodput measured at an overload
    kHalved = 6,   // halved at an overload (too few answers to measure)
  };
  // What a failure meant.
  struct FailureSignal {
    bool overload = false;  // the pace let too much through
    bool cut = false;       // ... and the pace was cut for it
  };

  // The release pace now, attempts/s.
  double Pace(const DeferralParams& p) const;
  // The capacity measured at the last cut; 0 if none.
  double threshold() const { return threshold_; }
  // Successes/s, measured since the gate last opened (bias-corrected while
  // the average is young).
  double Goodput(absl::Time now) const;
  absl::Duration rtt() const;
  Phase phase() const { return phase_; }
  Source source() const { return source_; }
  // Still learning upwards fast (bookings stay short, release_pacer.h).
  bool growing() const;

  // A success (or any answer that shows the endpoint up). `backlog`: the
  // deliveries parked while the gate was closed (ReleasePacer::backlog()).
  void OnSuccess(const DeferralParams& p, absl::Time now, double backlog);
  // A failed answer. `released`: it went out while the gate was open during
  // a release. On overload the caller re-paces the retry, and the breaker
  // does not see the failure.
  FailureSignal OnFailure(const DeferralParams& p, absl::Time now,
                          bool released);
  // `served`: ServedRate::PerSecond() now.
  void OnGateClosed(absl::Time now, double served);
  void OnGateOpened(const DeferralParams& p, absl::Time now);
  void SampleRtt(absl::Duration rtt);

  // The state file (endpoint_record.h): every field, instants as full Unix
  // ms (unwrapped near `now`). Restore() clamps what is out of range.
  CapacityRecord Save(absl::Time now) const;
  void Restore(const CapacityRecord& r);

 private:
  void Decay(absl::Time now);
  bool Overloaded(absl::Time now) const;
  void Cut(const DeferralParams& p, absl::Time now);
  double Cap(const DeferralParams& p, double pace) const;
  int32_t RttMs() const;

  float pace_ = 0;        // attempts/s; 0: kStartPace
  float threshold_ = 0;   // attempts/s; 0: none
  float before_cuts_ = 0;  // the threshold before the current cut streak
  float successes_ = 0;   // decaying rates at rates_at_ms_, /s
  float failures_ = 0;
  uint32_t rates_at_ms_ = 0;
  uint32_t measured_from_ms_ = 0;  // the gate last opened (bias correction)
  uint32_t last_success_ms_ = 0;
  uint32_t cut_round_end_ms_ = 0;  // no second cut before this
  uint32_t streak_start_ms_ = 0;   // the current streak's first cut
  uint16_t rtt_ms_ = 0;   // 0 = not measured
  Phase phase_ = Phase::kIdle;
  Source source_ = Source::kStart;
};

const char* PacePhaseName(CapacityEstimator::Phase p);    // "IDLE", ...
const char* PaceSourceName(CapacityEstimator::Source s);  // "START", ...

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_CAPACITY_ESTIMATOR_H_
