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

double CapacityEstimator::Pace(const DeferralParams& p) const {
  return Cap(p, pace_ > 0 ? pace_ : kStartPace);
}

bool CapacityEstimator::growing() const {
  return phase_ == Phase::kOpening ||
         (phase_ == Phase::kReleasing &&
          (threshold_ == 0 || pace_ < threshold_));
}

absl::Duration CapacityEstimator::rtt() const {
  return rtt_ms_ == 0 ? kDefaultRtt : absl::Milliseconds(rtt_ms_);
}

int32_t CapacityEstimator::RttMs() const {
  return static_cast<int32_t>(absl::ToInt64Milliseconds(rtt()));
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

void CapacityEstimator::OnSuccess(const DeferralParams& p, absl::Time now,
                                  double backlog) {
  Decay(now);
  successes_ += static_cast<float>(1e3 / kTauMs);
  last_success_ms_ = Ms32(now);
  if (phase_ == Phase::kOpening) {
    // The endpoint answers again: release the parked backlog within
    // kDrainTime at least, and keep growing from there.
    const double drain = backlog / absl::ToDoubleSeconds(kDrainTime);
    if (drain > Pace(p)) source_ = Source::kBacklog;
    pace_ = static_cast<float>(Cap(p, std::max(Pace(p), drain)));
    phase_ = Phase::kReleasing;
    return;
  }
  if (phase_ != Phase::kReleasing) return;
  const bool below = threshold_ == 0 || pace_ < threshold_;
  double pace = Pace(p) + (below ? kSlowStartGain : kSteadyGain) /
                              absl::ToDoubleSeconds(rtt());
  if (below && threshold_ > 0) pace = std::min<double>(pace, threshold_);
  pace_ = static_cast<float>(Cap(p, pace));
  source_ = Source::kGrowth;
}

bool CapacityEstimator::Overloaded(absl::Time now) const {
  if (failures_ < kOverloadShare * (successes_ + failures_)) return false;
  // No success for a while: the endpoint is down, not overloaded.
  return MsSince(last_success_ms_, Ms32(now)) <= kDownAfterRtts * RttMs();
}

CapacityEstimator::FailureSignal CapacityEstimator::OnFailure(
    const DeferralParams& p, absl::Time now, bool released) {
  Decay(now);
  failures_ += static_cast<float>(1e3 / kTauMs);
  FailureSignal signal;
  if (!released || phase_ != Phase::kReleasing || !Overloaded(now)) {
    return signal;
  }
  signal.overload = true;
  const uint32_t ms = Ms32(now);
  const int32_t since_round = MsSince(cut_round_end_ms_, ms);
  if (since_round < 0) return signal;  // this round-trip's cut is made
  // A cut more than a round-trip after the last one starts a new streak.
  if (since_round > RttMs()) {
    before_cuts_ = threshold_;
    streak_start_ms_ = ms;
  }
  Cut(p, now);
  cut_round_end_ms_ = ms + static_cast<uint32_t>(RttMs());
  signal.cut = true;
  return signal;
}

void CapacityEstimator::Cut(const DeferralParams& p, absl::Time now) {
  const double goodput = Goodput(now);
  // Successes behind that figure: about goodput x its averaging span.
  const int32_t age = MsSince(measured_from_ms_, Ms32(now));
  const double span_s = std::clamp(age / 1e3, 0.0, kTauMs / 1e3);
  const bool measured = goodput * span_s >= kMinAnswers;
  const double target = measured ? goodput * (1 + kProbeMargin) : Pace(p) / 2;
  source_ = measured ? Source::kGoodput : Source::kHalved;
  pace_ = static_cast<float>(Cap(p, std::min(Pace(p), target)));
  threshold_ = pace_;
}

void CapacityEstimator::OnGateClosed(absl::Time now, double served) {
  if (phase_ == Phase::kClosed) return;
  // The cuts the outage's first failures made are undone: a streak that
  // began around the endpoint's last success, not while it kept serving.
  if (phase_ == Phase::kReleasing &&
      MsSince(streak_start_ms_, last_success_ms_) <= RttMs()) {
    threshold_ = before_cuts_;
  }
  // Restart later from what the endpoint served.
  pace_ = static_cast<float>(served);
  phase_ = Phase::kClosed;
}

void CapacityEstimator::OnGateOpened(const DeferralParams& p, absl::Time now) {
  if (phase_ != Phase::kClosed) return;
  source_ = pace_ > kStartPace ? Source::kServed : Source::kStart;
  pace_ = static_cast<float>(Cap(p, std::max<double>(pace_, kStartPace)));
  Decay(now);
  successes_ = 0;
  failures_ = 0;
  measured_from_ms_ = std::max<uint32_t>(1, Ms32(now));
  // No cut round runs, and none ran within the last round-trip.
  cut_round_end_ms_ = Ms32(now) - 2 * static_cast<uint32_t>(RttMs());
  streak_start_ms_ = cut_round_end_ms_;
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
  if (r.source >= 1 && r.source <= 6) source_ = static_cast<Source>(r.source);
}

}  // namespace stagger::engine
