// CapacityEstimator: how many attempts per second one endpoint takes,
// learned from the whole fleet's outcomes, in both directions. It sets the
// pace at which the endpoint's release queue (release_pacer.h) lets parked
// deliveries go: a congestion controller for the fleet, with TCP's slow
// start and BBR's "pace at the delivery rate you measured", judged on
// over-capacity answers (docs/API.md, "Learned release pace"):
//   - Start: from evidence of capacity only, never from the backlog: what
//     the endpoint served when its gate closed (ServedRate), at least
//     kStartPace.
//   - Gate closed (the breaker tripped, or a Retry-After window runs):
//     failures belong to the outage and teach nothing about capacity. The
//     cuts its first failures made are undone: the capacity goes back to
//     what it was before the latest cuts that no success a round later
//     confirmed (the endpoint did not outlive them while serving). The
//     pace restarts from what the endpoint served, below that capacity.
//   - Gate open again: nothing confirms yet that the endpoint is back, so
//     a failure is not overload; the first success starts the release.
//   - Rounds: time is cut into rounds of max(round trip, kMinRound). At the
//     end of a round in which the fleet was sent at the pace (admissions
//     through it, OnAdmitted, at least kBusyShare of pace x round), that
//     saw no overload, and whose successes kept up with the round before's
//     admissions (kDeliveredShare), the pace grows: per unit of time, only
//     while used. Below kCutShare of the capacity measured (none yet:
//     always) it doubles (kSlowStartGrowth), but grows by no more than
//     the round delivered (TCP's one per ACK: the answers lag a round
//     trip), up to that share, or grows faster while that risks little: never by more than could cost
//     kGrowthRisk of the deliveries still waiting in over-capacity answers,
//     should the capacity lie just above the pace (the backlog bounds how
//     bold a step may be; it never sets the pace). From there it probes
//     upward along CUBIC's curve: back at the capacity 1 s after the cut,
//     flat around it (+1% in 1.6 s), then faster (+25% 2.7 s after the
//     cut).
//     Probing past kStaleCapacity x the capacity without an overload,
//     while the endpoint served past it too (goodput over about
//     kRateTau), forgets it (the endpoint grew): slow start again. A pace
//     that the demand did not fill proves nothing.
//   - A queue: successes below kQueueShare of the round before's
//     admissions (the answers are slowing down: the endpoint queues) cut
//     the pace below that goodput, before it refuses anything (BBR's
//     "the delivery rate stopped growing").
//   - Overload: a released attempt (it took a slot while the gate was
//     open) refused while the endpoint serves (a success within
//     max(kDownAfterRtts round trips, kServingWindow), or for a refusal, a
//     limiter's pause or the round after it runs; else it is down, and the
//     failure is the breaker's). A RATE_LIMITED answer (429, 503) is
//     overload at once, the first one; any other failure once failures are
//     kOverloadShare of recent answers, and at least kMinOverloadFailures
//     of them. At most once per round the capacity is set to the goodput
//     measured (successes per second over the last completed round, or the
//     round so far once it is half over) and the pace to kCutShare of it:
//     below it, so the limiter refills (halved instead while fewer than
//     kMinAnswers successes back the measurement, but not below kCutShare
//     of the recent goodput).
//   - An episode of refusals: RATE_LIMITED overloads a round apart or
//     less, until a limiter's pause ends (it refilled). Refused at both
//     ends, the limiter held under one token at each, so the successes
//     between are its rate, give or take one. Once kMinAnswers back it,
//     the pace goes to the lower of kCutShare of that rate and its lower
//     bound (count - 1 over the span).
//   - A limiter's word: an overload answered with a Retry-After or a
//     RateLimit-Reset of d sets the pace directly: no release before
//     now + d (FailureSignal::pause_until, for the release queue), the cut
//     as above, but never above kCutShare of what it served over about
//     kRateTau, pauses included (a round's goodput can hold the burst a
//     pause refilled), until the episode measures it. The refusals that come back while the pause runs
//     answer what went before it, so they make no further cut; they extend
//     the episode of refusals, whose count measures the limiter (below).
//     No probing upward for d / (1 - kCutShare) (at most kMaxLimiterHold):
//     probing gains at most 1 - kCutShare of the rate, and each word costs
//     its whole wait.
//   - deferral.release_rate_per_second, if set, caps the pace.
// The round trip comes from the breaker's probes (SampleRtt); kDefaultRtt
// until then.
//
// Rates are attempts/s; times are kept as Unix ms mod 2^32 (instants a few
// days apart at most). Not thread-safe: the engine holds the endpoint's
// shard lock. It lives in an endpoint's release side (endpoint_state.h),
// allocated when its gate first closes.
//
// Example (the engine's calls, decision_path.cc):
//   c.OnGateClosed(now, served);        // the breaker tripped
//   c.OnGateOpened(p, later);           // it closed again: pace = served
//   if (pacer.TakeSlot(t, c.Pace(p))) c.OnAdmitted(p, t);
//   c.OnSuccess(p, t2);                 // the release starts, rounds run
//   FailureSignal f = c.OnFailure(p, t3, {.released = true,
//                                         .rate_limited = true});
//   // f.overload: the retry waits for a slot, its attempt is not used up
#ifndef STAGGER_CORE_ENGINE_CAPACITY_ESTIMATOR_H_
#define STAGGER_CORE_ENGINE_CAPACITY_ESTIMATOR_H_

#include <cstdint>
#include <optional>

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
  static constexpr double kSlowStartGrowth = 2;  // per round
  static constexpr double kGrowthRisk = 0.01;    // of the waiting backlog
  // Probing's curve (CUBIC's): (pace - capacity) / capacity =
  // kProbeCurve x (t - 1 s)^3, t in seconds of probing since kCutShare of
  // the capacity.
  static constexpr double kProbeCurve = 1 - 0.95;  // 1 - kCutShare, per s^3
  static constexpr double kCutShare = 0.95;
  static constexpr double kStaleCapacity = 1.25;
  static constexpr double kBusyShare = 0.75;
  // A round grows the pace only if its successes were at least this share
  // of the round before's admissions; below kQueueShare the endpoint
  // queues, and the pace drains to below the goodput.
  static constexpr double kDeliveredShare = 0.75;
  static constexpr double kQueueShare = 0.5;
  static constexpr double kOverloadShare = 0.05;
  // ... and at least this many failures, counted decaying over kRateTau
  // (about three in quick succession).
  static constexpr double kMinOverloadFailures = 2.5;
  static constexpr double kMinAnswers = 10;
  static constexpr double kDownAfterRtts = 2;
  static constexpr absl::Duration kServingWindow = absl::Milliseconds(250);
  static constexpr absl::Duration kMinRound = absl::Milliseconds(100);
  // After a limiter's word of d the pace does not probe upward for
  // d / (1 - kCutShare) (20 d), at most this long.
  static constexpr absl::Duration kMaxLimiterHold = absl::Minutes(10);
  static constexpr absl::Duration kDefaultRtt = absl::Milliseconds(250);
  static constexpr absl::Duration kMinRtt = absl::Milliseconds(10);
  static constexpr absl::Duration kMaxRtt = absl::Seconds(60);
  // Decaying averages of successes and failures (the failure share, the
  // goodput GetEndpoint shows) cover about this long.
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
    kBacklog = 3,  // no longer set: a release never starts from its backlog
    kGrowth = 4,   // grown while the fleet was sent at the pace
    kGoodput = 5,  // cut below the goodput measured at an overload
    kHalved = 6,   // halved at an overload (too few answers to measure)
    kLimiter = 7,  // set by a limiter's Retry-After or RateLimit-Reset
  };
  // A failed answer, as the engine saw it.
  struct Failure {
    // It went out through the pace while the gate was open, in a release.
    bool released = false;
    // RATE_LIMITED (429, 503): a limiter's or an overloaded server's.
    bool rate_limited = false;
    // The limiter's word: its Retry-After or RateLimit-Reset, the longer.
    std::optional<absl::Duration> limiter_wait;
  };
  // What a failure meant.
  struct FailureSignal {
    bool overload = false;  // the pace let too much through
    bool cut = false;       // ... and the pace was cut for it
    // A limiter's word: nothing is released before this (InfinitePast:
    // no pause).
    absl::Time pause_until = absl::InfinitePast();
  };

  // The release pace now, attempts/s.
  double Pace(const DeferralParams& p) const;
  // The capacity measured at the last cut; 0 if none.
  double threshold() const { return threshold_; }
  // Successes/s, a decaying average since the gate last opened
  // (bias-corrected while the average is young).
  double Goodput(absl::Time now) const;
  absl::Duration rtt() const;
  // The round: max(rtt(), kMinRound).
  absl::Duration round() const;
  Phase phase() const { return phase_; }
  Source source() const { return source_; }
  // Still learning upwards fast (bookings stay short, release_pacer.h).
  bool growing() const;
  // Whether an attempt sent at or after `t` has succeeded: a success
  // reported more than a round after t (one reported sooner may have been
  // sent before it).
  bool ServedSince(absl::Time t) const;

  // A delivery took a slot at the pace now (ReleasePacer::TakeSlot).
  void OnAdmitted(const DeferralParams& p, absl::Time now);
  // A success (or any answer that shows the endpoint up).
  void OnSuccess(const DeferralParams& p, absl::Time now);
  // A failed answer. On overload the caller re-paces the retry (it waits
  // for a slot and uses up no attempt), and the breaker does not see it.
  FailureSignal OnFailure(const DeferralParams& p, absl::Time now,
                          const Failure& f);
  // `served`: ServedRate::PerSecond() now.
  void OnGateClosed(absl::Time now, double served);
  // `backlog`: the deliveries parked while it was closed
  // (ReleasePacer::backlog()).
  void OnGateOpened(const DeferralParams& p, absl::Time now, double backlog);
  void SampleRtt(absl::Duration rtt);

  // The state file (endpoint_record.h): every field but the current
  // round's (its start and counts, the last round's goodput) and the
  // limiter's epoch, which span a round or a limiter's window: a restored
  // estimator starts both afresh. Instants as full Unix ms (unwrapped near
  // `now`). Restore() clamps what is out of range.
  CapacityRecord Save(absl::Time now) const;
  void Restore(const CapacityRecord& r);

 private:
  void Decay(absl::Time now);
  // Ends the rounds that are over by `now`: the pace grows after a busy
  // round without overload.
  void Advance(const DeferralParams& p, absl::Time now);
  // `delivered`: the round's successes per second.
  void Grow(const DeferralParams& p, double span_s, double delivered,
            absl::Time now);
  // Probing: how far above the capacity (a share of it, < 0 below) the
  // pace lies span_s of probing after lying `above` it.
  static double ProbeStep(double above, double span_s);
  bool Serving(absl::Time now) const;
  // A limiter's pause runs (its word named a later instant).
  bool Paused(uint32_t now_ms) const;
  // An episode of refusals runs: the latest a round ago at most, and no
  // limiter's pause ended since.
  bool InEpisode(uint32_t now_ms) const;
  bool Overloaded(const Failure& f, absl::Time now) const;
  // Successes/s of the last completed round, or of this one once half over.
  double RoundGoodput(absl::Time now) const;
  void Cut(const DeferralParams& p, absl::Time now);
  // A queue builds: the pace below the goodput, as a cut (once a round).
  void Drain(const DeferralParams& p, absl::Time now, double goodput);
  // Within a cut round, a pause included: the pace from the goodput since
  // the episode's first refusal (the limiter had no burst left from then
  // on).
  void Remeasure(const DeferralParams& p, absl::Time now);
  // The limiter's word: pace and capacity from what it let through.
  void Obey(const DeferralParams& p, absl::Time now, absl::Duration wait);
  double Cap(const DeferralParams& p, double pace) const;
  // Sets the pace now (capped).
  void SetPace(const DeferralParams& p, double pace);
  int32_t RttMs() const;
  int32_t RoundMs() const;

  float pace_ = 0;        // attempts/s; 0: kStartPace
  float threshold_ = 0;   // attempts/s; 0: none
  // The threshold as it stood before the cuts of the last round (settled
  // by a success a round after the latest cut): what a closing gate keeps.
  float before_cuts_ = 0;
  float successes_ = 0;   // decaying rates at rates_at_ms_, /s
  float failures_ = 0;
  uint32_t rates_at_ms_ = 0;
  uint32_t measured_from_ms_ = 0;  // the gate last opened (bias correction)
  uint32_t last_success_ms_ = 0;
  uint32_t cut_round_end_ms_ = 0;  // no second cut before this
  uint32_t streak_start_ms_ = 0;   // the latest cut
  // The current round: its start, admissions and successes in it, and
  // whether it saw an overload; the last completed round's goodput.
  uint32_t round_start_ms_ = 0;
  float round_sent_ = 0;
  float round_successes_ = 0;
  float last_round_goodput_ = 0;
  float last_round_sent_ = 0;  // admissions/s of the last completed round
  bool round_overload_ = false;
  // The end of the limiter's last pause (0: none yet); no probing before
  // hold_until_ms_.
  uint32_t pause_end_ms_ = 0;
  uint32_t hold_until_ms_ = 0;
  // The current episode of refusals (RATE_LIMITED overloads a round apart
  // or less): its first refusal, the latest, the successes since the first.
  uint32_t episode_start_ms_ = 0;
  uint32_t refusal_ms_ = 0;
  float episode_successes_ = 0;
  // The parked backlog still to go, as estimated when the gate opened, less
  // the admissions since.
  float waiting_ = 0;
  uint16_t rtt_ms_ = 0;   // 0 = not measured
  Phase phase_ = Phase::kIdle;
  Source source_ = Source::kStart;
};

const char* PacePhaseName(CapacityEstimator::Phase p);    // "IDLE", ...
const char* PaceSourceName(CapacityEstimator::Source s);  // "START", ...

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_CAPACITY_ESTIMATOR_H_
