#include "server/engine/backoff.h"

#include <algorithm>
#include <cmath>

#include "absl/random/distributions.h"

namespace stagger::engine {
namespace {

// Uniform over [lo, hi], in double seconds; lo when the range is empty.
double UniformSeconds(absl::BitGenRef rng, double lo, double hi) {
  if (!(hi > lo)) return lo;
  return absl::Uniform(absl::IntervalClosed, rng, lo, hi);
}

}  // namespace

absl::Duration ExponentialInterval(const BackoffParams& p, int retry) {
  const double base = absl::ToDoubleSeconds(p.base);
  const double cap = absl::ToDoubleSeconds(p.cap);
  // 2^(retry-1) overflows nothing in double until retry ~ 1024; stop early:
  // once base * 2^k >= cap, every later interval is the cap.
  const int exponent = std::clamp(retry - 1, 0, 1023);
  const double v = std::ldexp(base, exponent);
  return absl::Seconds(std::min(cap, v));
}

absl::Duration NextBackoff(const BackoffParams& p, int retry,
                           absl::Duration previous, absl::BitGenRef rng) {
  const double cap = absl::ToDoubleSeconds(p.cap);
  double s = 0;
  switch (p.kind) {
    case BackoffKind::kExponential:
      return ExponentialInterval(p, retry);
    case BackoffKind::kEqualJitter: {
      const double v = absl::ToDoubleSeconds(ExponentialInterval(p, retry));
      s = v / 2 + UniformSeconds(rng, 0, v / 2);
      break;
    }
    case BackoffKind::kFullJitter: {
      const double v = absl::ToDoubleSeconds(ExponentialInterval(p, retry));
      s = UniformSeconds(rng, 0, v);
      break;
    }
    case BackoffKind::kDecorrelatedJitter: {
      const double base = absl::ToDoubleSeconds(p.base);
      const double prev = std::max(base, absl::ToDoubleSeconds(previous));
      // prev <= cap <= 1h, so prev * 3 cannot overflow; min() keeps the
      // upper bound at the cap, and the draw is never below base.
      const double hi = std::min(cap, prev * 3.0);
      s = UniformSeconds(rng, base, std::max(base, hi));
      break;
    }
  }
  return absl::Seconds(std::clamp(s, 0.0, cap));
}

absl::Duration UniformDuration(absl::BitGenRef rng, absl::Duration d) {
  if (d <= absl::ZeroDuration()) return absl::ZeroDuration();
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  return absl::Nanoseconds(absl::Uniform<int64_t>(rng, 0, ns));
}

}  // namespace stagger::engine
