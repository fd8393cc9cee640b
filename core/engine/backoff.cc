#include "core/engine/backoff.h"

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
      // The previous delay is below base when there is none yet, and above
      // the cap only after a configuration change lowered the cap: clamping
      // it to [base, cap] guards prev * 3 (no overflow, no infinity).
      const double prev =
          std::clamp(absl::ToDoubleSeconds(previous), base, std::max(base, cap));
      // min(cap, uniform[base, 3 * prev]), the formula as written: the draw is
      // taken over the whole interval and then capped, so once 3 * prev
      // exceeds the cap a share of the draws sits at the cap (drawing over
      // [base, min(cap, 3 * prev)] instead pulls the delay down to ~cap/2
      // during a long outage).
      s = std::min(cap, UniformSeconds(rng, base, prev * 3.0));
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
