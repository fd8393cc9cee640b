#include "core/engine/capacity_estimator.h"

#include <algorithm>
#include <cmath>

namespace stagger::engine {
namespace {

uint32_t Ms32(absl::Time t) {
  return static_cast<uint32_t>(absl::ToUnixMillis(t));  // mod 2^32
}
// b - a in ms, for instants less than 24 days apart.
int32_t MsSince(uint32_t a, uint32_t b) { return static_cast<int32_t>(b - a); }

// CapacityEstimator::kRateTau, in ms.
constexpr double kTauMs = 500;

}  // namespace

void ServedRate::OnSuccess(absl::Time now) {
  const uint32_t s = static_cast<uint32_t>(absl::ToUnixSeconds(now));
  if (s != second_) {
    last_second_ = s == second_ + 1 ? this_second_ : 0;
    this_second_ = 0;
    second_ = s;
  }
  if (this_second_ < UINT16_MAX) ++this_second_;
}

void ServedRate::OnSuccesses(absl::Time at, uint32_t n) {
  const uint32_t s = static_cast<uint32_t>(absl::ToUnixSeconds(at));
  const auto add = [n](uint16_t* count) {
    *count = static_cast<uint16_t>(std::min<uint32_t>(UINT16_MAX, *count + n));
  };
  if (static_cast<int32_t>(s - second_) > 0) {  // a newer second
    last_second_ = s == second_ + 1 ? this_second_ : 0;
    this_second_ = 0;
    second_ = s;
  }
  if (s == second_) {
    add(&this_second_);
  } else if (s + 1 == second_) {
    add(&last_second_);
  }
}

double ServedRate::PerSecond(absl::Time now) const {
  const uint32_t s = static_cast<uint32_t>(absl::ToUnixSeconds(now));
  if (s == second_) return std::max(this_second_, last_second_);
  if (s == second_ + 1) return this_second_;
  return 0;
}

double CapacityEstimator::Cap(const DeferralParams& p, double pace) const {
  const double cap = p.release_rate_per_second;
  pace = std::max(kMinPace, pace);
  return cap > 0 ? std::min(cap, pace) : pace;
}

void CapacityEstimator::SetPace(const DeferralParams& p, double pace) {
  pace_ = static_cast<float>(Cap(p, pace));
}

double CapacityEstimator::Pace(const DeferralParams& p) const {
  return Cap(p, pace_ > 0 ? pace_ : kStartPace);
}

bool CapacityEstimator::growing() const {
  return phase_ == Phase::kOpening ||
         (phase_ == Phase::kReleasing &&
          (threshold_ == 0 || pace_ < kCutShare * threshold_));
}

absl::Duration CapacityEstimator::rtt() const {
  return rtt_ms_ == 0 ? kDefaultRtt : absl::Milliseconds(rtt_ms_);
}

absl::Duration CapacityEstimator::round() const {
  return std::max(rtt(), kMinRound);
}

int32_t CapacityEstimator::RttMs() const {
  return static_cast<int32_t>(absl::ToInt64Milliseconds(rtt()));
}

int32_t CapacityEstimator::RoundMs() const {
  return static_cast<int32_t>(absl::ToInt64Milliseconds(round()));
}

void CapacityEstimator::SampleRtt(absl::Duration rtt) {
  const double ms = std::clamp(absl::ToDoubleMilliseconds(rtt),
                               absl::ToDoubleMilliseconds(kMinRtt),
                               absl::ToDoubleMilliseconds(kMaxRtt));
  rtt_ms_ = static_cast<uint16_t>(
      rtt_ms_ == 0 ? std::lround(ms) : std::lround(0.75 * rtt_ms_ + 0.25 * ms));
}

void CapacityEstimator::Decay(absl::Time now) {
  const uint32_t ms = Ms32(now);
  const int32_t dt = MsSince(rates_at_ms_, ms);
  rates_at_ms_ = ms;  // a clock that stepped back just restarts the decay
  if (dt <= 0) return;
  const double f = std::exp(-dt / kTauMs);
  successes_ = static_cast<float>(successes_ * f);
  failures_ = static_cast<float>(failures_ * f);
}

double CapacityEstimator::Goodput(absl::Time now) const {
  CapacityEstimator c = *this;
  c.Decay(now);
  // An average started from zero at measured_from_ms_ reads low while it is
  // young: divide by the weight it has had time to gather.
  const int32_t age = MsSince(measured_from_ms_, Ms32(now));
  if (measured_from_ms_ == 0 || age < 0) return c.successes_;
  const double weight = 1 - std::exp(-std::max(age, 1) / kTauMs);
  return c.successes_ / weight;
}

// ---- Rounds ------------------------------------------------------------

void CapacityEstimator::Advance(const DeferralParams& p, absl::Time now) {
  if (phase_ != Phase::kReleasing) return;
  const uint32_t ms = Ms32(now);
  if (round_start_ms_ == 0) {  // restored from the state file: a new round
    round_start_ms_ = std::max<uint32_t>(1, ms);
    return;
  }
  const int32_t elapsed = MsSince(round_start_ms_, ms);
  if (elapsed < RoundMs()) return;
  // The round is over. Busy: the fleet was sent at the pace, so the pace,
  // not the demand, is what the endpoint saw; growing an idle pace would
  // only promise a burst later.
  const double len_s = elapsed / 1e3;
  const bool busy = round_sent_ >= kBusyShare * Pace(p) * len_s;
  const double goodput = round_successes_ / len_s;
  last_round_goodput_ = static_cast<float>(goodput);
  // A round lasts at least a round trip: the answers it carried are those
  // of the round before's admissions. Far fewer came back than went: the
  // endpoint queues them (its latency grows), whatever it answers later.
  const double offered = last_round_sent_;
  const bool queueing = busy && offered > 0 &&
                        goodput < kQueueShare * offered &&
                        round_successes_ >= kMinAnswers;
  if (queueing && !round_overload_) {
    Drain(p, now, goodput);
  } else if (busy && !round_overload_ &&
             (offered == 0 || goodput >= kDeliveredShare * offered)) {
    Grow(p, std::min(len_s, 2.0 * RoundMs() / 1e3), goodput, now);
  }
  last_round_sent_ = static_cast<float>(round_sent_ / len_s);
  round_start_ms_ = std::max<uint32_t>(1, ms);
  round_sent_ = 0;
  round_successes_ = 0;
  round_overload_ = false;
}

double CapacityEstimator::ProbeStep(double above, double span_s) {
  // The curve: above(t) = kProbeCurve x (t - T)^3, T = 1 s, so that from
  // kCutShare of the capacity (above = -(1 - kCutShare)) it is back at
  // the capacity after T. Where on it `above` lies, then span_s further.
  const double t = 1 + std::cbrt(above / kProbeCurve);
  return kProbeCurve * std::pow(t + span_s - 1, 3);
}

void CapacityEstimator::Grow(const DeferralParams& p, double span_s,
                             double delivered, absl::Time now) {
  const uint32_t now_ms = Ms32(now);
  const double capacity = threshold_;
  double pace = pace_ > 0 ? pace_ : kStartPace;
  const double ceiling = kCutShare * capacity;
  // (Within a float's precision of the ceiling is at it: the pace is kept
  // as a float.)
  if (capacity == 0 || pace < ceiling * (1 - 1e-6)) {
    // Slow start: x kSlowStartGrowth per round, but by no more than what
    // the round delivered, as TCP's window grows by one per ACK (its
    // successes answer the round before's admissions: doubling a pace
    // already doubled before they came would send 4x what the endpoint
    // was seen to take, for a round trip, before its refusals could say
    // so). Or more while a round's overshoot would cost at most
    // kGrowthRisk of the backlog waiting; up to just below the capacity
    // measured.
    // A long round (sparse events) counts for up to two at x2; the bold
    // step is one step, its risk bounded once.
    const double rounds = span_s * 1e3 / RoundMs();
    const double bold = 1 + kGrowthRisk * waiting_ / (pace * RoundMs() / 1e3);
    const double growth = std::pow(kSlowStartGrowth, rounds);
    const double doubled =
        std::min(pace * growth, pace + (growth - 1) * delivered);
    pace = std::max({pace, doubled, pace * bold});
    if (capacity > 0) pace = std::min(pace, ceiling);
  } else if (MsSince(hold_until_ms_, now_ms) >= 0) {
    // Probing, for capacity added since it was measured (not while a
    // limiter's word holds): along CUBIC's curve, flat near the capacity
    // and faster away from it.
    pace = capacity * (1 + ProbeStep(pace / capacity - 1, span_s));
    // It grew: it served past the capacity too. (A pace past it that the
    // demand did not fill proves nothing.)
    if (pace > kStaleCapacity * capacity &&
        Goodput(now) > kStaleCapacity * capacity) {
      threshold_ = 0;
    }
  }
  pace_ = static_cast<float>(Cap(p, pace));
  source_ = Source::kGrowth;
}

void CapacityEstimator::OnAdmitted(const DeferralParams& p, absl::Time now) {
  Advance(p, now);
  round_sent_ += 1;
  waiting_ = std::max(0.0f, waiting_ - 1);
}

void CapacityEstimator::OnSuccess(const DeferralParams& p, absl::Time now) {
  Decay(now);
  successes_ += static_cast<float>(1e3 / kTauMs);
  const uint32_t ms = Ms32(now);
  last_success_ms_ = ms;
  // The endpoint still served a round after the latest cut: that cut was
  // capacity's, not an outage's first failures.
  if (MsSince(streak_start_ms_, ms) > RoundMs()) before_cuts_ = threshold_;
  if (phase_ == Phase::kOpening) {
    // The endpoint answers again: the release starts at the pace the gate
    // opened with, and its rounds begin.
    phase_ = Phase::kReleasing;
    round_start_ms_ = std::max<uint32_t>(1, ms);
    round_sent_ = 0;
    round_successes_ = 0;
    last_round_goodput_ = 0;
    last_round_sent_ = 0;
    round_overload_ = false;
    pause_end_ms_ = 0;
    hold_until_ms_ = ms;
    refusal_ms_ = 0;
    episode_start_ms_ = 0;
    episode_successes_ = 0;
    return;
  }
  if (phase_ != Phase::kReleasing) return;
  Advance(p, now);
  round_successes_ += 1;
  if (InEpisode(ms)) episode_successes_ += 1;
}

bool CapacityEstimator::InEpisode(uint32_t ms) const {
  if (refusal_ms_ == 0 || MsSince(refusal_ms_, ms) > RoundMs()) return false;
  // A limiter's pause that ended since the latest refusal refilled it.
  return !(pause_end_ms_ != 0 && MsSince(refusal_ms_, pause_end_ms_) > 0 &&
           MsSince(pause_end_ms_, ms) >= 0);
}

// ---- Overload ----------------------------------------------------------

bool CapacityEstimator::ServedSince(absl::Time t) const {
  return last_success_ms_ != 0 &&
         MsSince(Ms32(t), last_success_ms_) > RoundMs();
}

bool CapacityEstimator::Paused(uint32_t now_ms) const {
  return pause_end_ms_ != 0 && MsSince(pause_end_ms_, now_ms) < 0;
}

bool CapacityEstimator::Serving(absl::Time now) const {
  const int32_t window = std::max<int32_t>(
      static_cast<int32_t>(kDownAfterRtts * RttMs()),
      static_cast<int32_t>(absl::ToInt64Milliseconds(kServingWindow)));
  return MsSince(last_success_ms_, Ms32(now)) <= window;
}

bool CapacityEstimator::Overloaded(const Failure& f, absl::Time now) const {
  if (!f.released || phase_ != Phase::kReleasing) return false;
  // A limiter that paused the release answers for itself while the pause
  // and the round after it run: its refusals are its, not an outage's.
  const int32_t since_pause = MsSince(pause_end_ms_, Ms32(now));
  if (f.rate_limited && pause_end_ms_ != 0 && since_pause < RoundMs()) {
    return true;
  }
  if (!Serving(now)) return false;
  if (f.rate_limited) return true;  // a limiter's refusal: the first one
  // Any other failure: only a share of recent answers, and a few of them
  // (a single one among few answers is noise, not a trend).
  return failures_ >= kOverloadShare * (successes_ + failures_) &&
         failures_ * kTauMs / 1e3 >= kMinOverloadFailures;
}

double CapacityEstimator::RoundGoodput(absl::Time now) const {
  const int32_t elapsed = MsSince(round_start_ms_, Ms32(now));
  double g = last_round_goodput_;
  if (elapsed > 0 && 2 * elapsed >= RoundMs()) {
    g = std::max(g, round_successes_ / (elapsed / 1e3));
  }
  return g;
}

CapacityEstimator::FailureSignal CapacityEstimator::OnFailure(
    const DeferralParams& p, absl::Time now, const Failure& f) {
  Decay(now);
  failures_ += static_cast<float>(1e3 / kTauMs);
  Advance(p, now);
  FailureSignal signal;
  if (!Overloaded(f, now)) return signal;
  signal.overload = true;
  round_overload_ = true;
  if (f.limiter_wait.has_value()) signal.pause_until = now + *f.limiter_wait;
  const uint32_t ms = Ms32(now);
  if (f.rate_limited) {
    // Refusals a round apart or less are one episode of saturation (a
    // limiter's pause ends one: it refilled). Those that come back while
    // the pause runs answer what went before it, and extend the episode.
    if (!InEpisode(ms)) {
      episode_start_ms_ = std::max<uint32_t>(1, ms);
      episode_successes_ = 0;
    }
    refusal_ms_ = std::max<uint32_t>(1, ms);
  }
  const int32_t since_round = MsSince(cut_round_end_ms_, ms);
  if (since_round < 0) {
    // This round's cut is made (or a limiter's pause and the round after
    // it run: answers to what was sent before it teach nothing new); the
    // saturated limiter measures itself, out of a pause.
    if (f.rate_limited) Remeasure(p, now);
    return signal;
  }
  streak_start_ms_ = ms;
  uint32_t pause_ms = 0;
  if (f.limiter_wait.has_value()) {
    Obey(p, now, *f.limiter_wait);
    pause_ms = static_cast<uint32_t>(
        absl::ToInt64Milliseconds(*f.limiter_wait));
  } else {
    Cut(p, now);
  }
  cut_round_end_ms_ = ms + pause_ms + static_cast<uint32_t>(RoundMs());
  signal.cut = true;
  return signal;
}

void CapacityEstimator::Drain(const DeferralParams& p, absl::Time now,
                              double goodput) {
  const uint32_t ms = Ms32(now);
  if (MsSince(cut_round_end_ms_, ms) < 0) return;  // this round's cut is made
  streak_start_ms_ = ms;
  SetPace(p, std::min(Pace(p), kCutShare * goodput));
  threshold_ = static_cast<float>(goodput);
  source_ = Source::kGoodput;
  cut_round_end_ms_ = ms + static_cast<uint32_t>(RoundMs());
}

void CapacityEstimator::Remeasure(const DeferralParams& p, absl::Time now) {
  const int32_t elapsed = MsSince(episode_start_ms_, Ms32(now));
  if (episode_start_ms_ == 0 || elapsed <= 0 ||
      episode_successes_ < kMinAnswers) {
    return;
  }
  // From its first refusal on the limiter had no burst left: what it let
  // through since is its rate (a share limiter: the fleet's share of it).
  // Refused on both ends, it held under one token at each: the count is
  // its rate over the span, give or take one success. The pace goes below
  // both the goodput's share and the lower bound (a short span's count
  // errs by more than 1 - kCutShare).
  const double span_s = elapsed / 1e3;
  const double rate = episode_successes_ / span_s;
  SetPace(p, std::min(kCutShare * rate, (episode_successes_ - 1) / span_s));
  threshold_ = static_cast<float>(rate);
}

void CapacityEstimator::Cut(const DeferralParams& p, absl::Time now) {
  // The goodput of the last round, if enough successes back it (about
  // goodput x a round); else the decaying average over about kRateTau, if
  // enough successes back that (counted as they came, not as the young
  // average's bias correction scales them).
  double goodput = RoundGoodput(now);
  bool measured = goodput * RoundMs() / 1e3 >= kMinAnswers;
  if (!measured) {
    goodput = Goodput(now);
    CapacityEstimator decayed = *this;
    decayed.Decay(now);
    measured = decayed.successes_ * kTauMs / 1e3 >= kMinAnswers;
  }
  // Too few answers to measure: halved, but not below what the endpoint
  // is seen to serve.
  const double target = measured ? kCutShare * goodput
                                 : std::max(Pace(p) / 2, kCutShare * goodput);
  source_ = measured ? Source::kGoodput : Source::kHalved;
  SetPace(p, std::min(Pace(p), target));
  threshold_ = static_cast<float>(measured ? goodput : pace_);
}

void CapacityEstimator::Obey(const DeferralParams& p, absl::Time now,
                             absl::Duration wait) {
  Cut(p, now);
  source_ = Source::kLimiter;
  // A round's goodput can hold the limiter's burst (refilled by a pause):
  // not above what it served over about kRateTau, pauses included.
  const double recent = Goodput(now);
  if (recent * kTauMs / 1e3 >= kMinAnswers && kCutShare * recent < Pace(p)) {
    SetPace(p, kCutShare * recent);
    threshold_ = static_cast<float>(recent);
  }
  const uint32_t ms = Ms32(now);
  const uint32_t wait_ms =
      static_cast<uint32_t>(absl::ToInt64Milliseconds(wait));
  pause_end_ms_ = std::max<uint32_t>(1, ms + wait_ms);
  // Probing upward gains at most 1 - kCutShare of the rate, and a word
  // costs its whole wait: no probing before it could pay for one.
  const uint32_t hold_ms = static_cast<uint32_t>(std::min<int64_t>(
      absl::ToInt64Milliseconds(kMaxLimiterHold),
      std::llround(wait_ms / (1 - kCutShare))));
  hold_until_ms_ = ms + wait_ms + hold_ms;
}

// ---- The gate ------------------------------------------------------------

void CapacityEstimator::OnGateClosed(absl::Time now, double served) {
  if (phase_ == Phase::kClosed) return;
  // The cuts the outage's first failures made are undone: a streak that
  // began around the endpoint's last success, not while it kept serving.
  if (phase_ == Phase::kReleasing) threshold_ = before_cuts_;
  // Restart later from what the endpoint served, below the capacity it
  // showed.
  if (threshold_ > 0) served = std::min<double>(served, kCutShare * threshold_);
  pace_ = static_cast<float>(served);
  phase_ = Phase::kClosed;
}

void CapacityEstimator::OnGateOpened(const DeferralParams& p, absl::Time now,
                                     double backlog) {
  if (phase_ != Phase::kClosed) return;
  waiting_ = static_cast<float>(std::max(0.0, backlog));
  source_ = pace_ > kStartPace ? Source::kServed : Source::kStart;
  SetPace(p, std::max<double>(pace_, kStartPace));
  Decay(now);
  successes_ = 0;
  failures_ = 0;
  measured_from_ms_ = std::max<uint32_t>(1, Ms32(now));
  // No cut round runs, and none ran within the last round.
  cut_round_end_ms_ = Ms32(now) - 2 * static_cast<uint32_t>(RoundMs());
  streak_start_ms_ = cut_round_end_ms_;
  before_cuts_ = threshold_;
  phase_ = Phase::kOpening;
}

const char* PacePhaseName(CapacityEstimator::Phase p) {
  switch (p) {
    case CapacityEstimator::Phase::kIdle: return "IDLE";
    case CapacityEstimator::Phase::kClosed: return "CLOSED";
    case CapacityEstimator::Phase::kOpening: return "OPENING";
    case CapacityEstimator::Phase::kReleasing: return "RELEASING";
  }
  return "UNKNOWN";
}

const char* PaceSourceName(CapacityEstimator::Source s) {
  switch (s) {
    case CapacityEstimator::Source::kStart: return "START";
    case CapacityEstimator::Source::kServed: return "SERVED";
    case CapacityEstimator::Source::kBacklog: return "BACKLOG";
    case CapacityEstimator::Source::kGrowth: return "GROWTH";
    case CapacityEstimator::Source::kGoodput: return "GOODPUT";
    case CapacityEstimator::Source::kHalved: return "HALVED";
    case CapacityEstimator::Source::kLimiter: return "LIMITER";
  }
  return "UNKNOWN";
}

ServedRecord ServedRate::Save(absl::Time now) const {
  ServedRecord r;
  r.unix_second = UnwrapNear(second_, absl::ToUnixSeconds(now));
  r.this_second = this_second_;
  r.previous_second = last_second_;
  return r;
}

void ServedRate::Restore(const ServedRecord& r) {
  second_ = static_cast<uint32_t>(r.unix_second);
  this_second_ = static_cast<uint16_t>(std::min<uint32_t>(r.this_second, UINT16_MAX));
  last_second_ =
      static_cast<uint16_t>(std::min<uint32_t>(r.previous_second, UINT16_MAX));
}

CapacityRecord CapacityEstimator::Save(absl::Time now) const {
  const int64_t ms = absl::ToUnixMillis(now);
  CapacityRecord r;
  r.pace = pace_;
  r.threshold = threshold_;
  r.before_cuts = before_cuts_;
  r.successes = successes_;
  r.failures = failures_;
  r.rates_at_ms = UnwrapNear(rates_at_ms_, ms);
  r.measured_from_ms = UnwrapNear(measured_from_ms_, ms);
  r.last_success_ms = UnwrapNear(last_success_ms_, ms);
  r.cut_round_end_ms = UnwrapNear(cut_round_end_ms_, ms);
  r.streak_start_ms = UnwrapNear(streak_start_ms_, ms);
  r.rtt_ms = rtt_ms_;
  r.phase = static_cast<uint8_t>(phase_);
  r.source = static_cast<uint8_t>(source_);
  return r;
}

void CapacityEstimator::Restore(const CapacityRecord& r) {
  *this = CapacityEstimator();
  // A rate is finite and >= 0 (NaN compares false: it becomes 0).
  auto rate = [](float v) { return v >= 0 && v < 1e12f ? v : 0.0f; };
  pace_ = rate(r.pace);
  threshold_ = rate(r.threshold);
  before_cuts_ = rate(r.before_cuts);
  successes_ = rate(r.successes);
  failures_ = rate(r.failures);
  rates_at_ms_ = static_cast<uint32_t>(r.rates_at_ms);
  measured_from_ms_ = static_cast<uint32_t>(r.measured_from_ms);
  last_success_ms_ = static_cast<uint32_t>(r.last_success_ms);
  cut_round_end_ms_ = static_cast<uint32_t>(r.cut_round_end_ms);
  streak_start_ms_ = static_cast<uint32_t>(r.streak_start_ms);
  rtt_ms_ = static_cast<uint16_t>(std::min<uint32_t>(
      r.rtt_ms, static_cast<uint32_t>(absl::ToInt64Milliseconds(kMaxRtt))));
  if (r.phase >= 1 && r.phase <= 4) phase_ = static_cast<Phase>(r.phase);
  if (r.source >= 1 && r.source <= 7) source_ = static_cast<Source>(r.source);
}

}  // namespace stagger::engine
