#include "server/engine/capacity_estimator.h"

#include <algorithm>
#include <cmath>

namespace stagger::engine {
namespace {

uint32_t Ms32(absl::Time t) {
  return static_cast<uint32_t>(absl::ToUnixMillis(t));  // mod 2^32
}
// b - a in ms, for instants less than 24 days apart.
int32_t MsSince(uint32_t a, uint32_t b) { return static_cast<int32_t>(b - a); }

// CapacityEstimator::kRateTau in ms.
constexpr double kTauMs = 500;

}  // namespace

double CapacityEstimator::Cap(const DeferralParams& p, double pace) const {
  const double cap = p.release_rate_per_second;
  pace = std::max(kMinPace, pace);
  return cap > 0 ? std::min(cap, pace) : pace;
}

double CapacityEstimator::Pace(const DeferralParams& p) const {
  return Cap(p, pace_ > 0 ? pace_ : kStartPace);
}

absl::Duration CapacityEstimator::rtt() const {
  return rtt_ms_ == 0 ? kDefaultRtt : absl::Milliseconds(rtt_ms_);
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
  if (dt <= 0) return;
  const double f = std::exp(-dt / kTauMs);
  successes_ = static_cast<float>(successes_ * f);
  failures_ = static_cast<float>(failures_ * f);
  rates_at_ms_ = ms;
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
  const double per_rtt = 1.0 / absl::ToDoubleSeconds(rtt());
  switch (phase_) {
    case Phase::kOpening:
      // The endpoint answers again: release the parked backlog within
      // kDrainTime, then keep growing from there.
      pace_ = static_cast<float>(Cap(
          p, std::max<double>(Pace(p),
                              backlog / absl::ToDoubleSeconds(kDrainTime))));
      phase_ = Phase::kSlowStart;
      break;
    case Phase::kSlowStart:
      pace_ = static_cast<float>(Cap(p, Pace(p) + kSlowStartGain * per_rtt));
      break;
    case Phase::kSteady:
      pace_ = static_cast<float>(Cap(p, Pace(p) + kSteadyGain * per_rtt));
      break;
    case Phase::kIdle:
    case Phase::kClosed:
      break;
  }
}

bool CapacityEstimator::OnFailure(const DeferralParams& p, absl::Time now,
                                  bool released) {
  Decay(now);
  failures_ += static_cast<float>(1e3 / kTauMs);
  if (!released) return false;
  if (phase_ != Phase::kSlowStart && phase_ != Phase::kSteady) return false;
  if (failures_ < kOverloadShare * (successes_ + failures_)) return false;
  // Nothing served lately: the endpoint is down, not overloaded.
  if (successes_ * absl::ToDoubleSeconds(kRateTau) < 1) return false;
  const uint32_t ms = Ms32(now);
  if (phase_ == Phase::kSteady && MsSince(round_end_ms_, ms) < 0) {
    return true;  // this round-trip's cut is made
  }
  // A cut more than a round-trip after the last one starts a new streak.
  const int32_t rtt_ms = static_cast<int32_t>(absl::ToInt64Milliseconds(rtt()));
  if (phase_ == Phase::kSlowStart || MsSince(round_end_ms_, ms) > rtt_ms) {
    pace_before_cuts_ = static_cast<float>(Pace(p));
  }
  Cut(p, now);
  round_end_ms_ = ms + static_cast<uint32_t>(rtt_ms);
  phase_ = Phase::kSteady;
  return true;
}

void CapacityEstimator::Cut(const DeferralParams& p, absl::Time now) {
  const double goodput = Goodput(now);
  const double answers = successes_ * absl::ToDoubleSeconds(kRateTau);
  const double target = answers >= kMinAnswers ? goodput * (1 + kProbeMargin)
                                               : Pace(p) / 2;
  pace_ = static_cast<float>(Cap(p, std::min(Pace(p), target)));
}

void CapacityEstimator::OnGateClosed(absl::Time now) {
  if (phase_ == Phase::kClosed) return;
  // Restart later from what the endpoint served: the goodput now, or the
  // pace a release had settled at (a measured capacity) if higher.
  double served = Goodput(now);
  if (phase_ == Phase::kSteady) {
    served = std::max<double>(served, pace_);
    const int32_t since_cut = MsSince(round_end_ms_, Ms32(now));
    if (since_cut <= absl::ToInt64Milliseconds(rtt())) {
      served = std::max<double>(served, pace_before_cuts_);  // undone
    }
  }
  pace_ = static_cast<float>(served);
  phase_ = Phase::kClosed;
}

void CapacityEstimator::OnGateOpened(const DeferralParams& p, absl::Time now) {
  if (phase_ != Phase::kClosed) return;
  pace_ = static_cast<float>(Cap(p, std::max<double>(pace_, kStartPace)));
  Decay(now);
  successes_ = 0;
  failures_ = 0;
  measured_from_ms_ = std::max<uint32_t>(1, Ms32(now));
  phase_ = Phase::kOpening;
}

}  // namespace stagger::engine
