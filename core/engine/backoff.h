// The four backoff policies (exponential; equal, full and decorrelated
// jitter), as pure functions of
// (params, attempt, previous delay, rng). No state: the caller keeps the
// decorrelated policy's previous delay (the engine keeps it per endpoint,
// shared by the fleet). All arithmetic is in double seconds, guarded
// against overflow; results are always within [0, cap].
#ifndef STAGGER_CORE_ENGINE_BACKOFF_H_
#define STAGGER_CORE_ENGINE_BACKOFF_H_

#include "absl/random/bit_gen_ref.h"
#include "absl/time/time.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {

// min(cap, base * 2^(retry-1)) for the retry-th retry (retry >= 1), without
// overflow for any retry.
absl::Duration ExponentialInterval(const BackoffParams& p, int retry);

// The delay before retry number `retry` (1 = the first retry, i.e. the
// second attempt). `previous` is the decorrelated policy's previous delay
// (ZeroDuration or anything below base means "none yet": base is used).
//   kExponential:        ExponentialInterval
//   kEqualJitter:        v/2 + uniform[0, v/2]     (never below v/2)
//   kFullJitter:         uniform[0, v]
//   kDecorrelatedJitter: min(cap, uniform[base, max(base, previous) * 3])
absl::Duration NextBackoff(const BackoffParams& p, int retry,
                           absl::Duration previous, absl::BitGenRef rng);

// Uniform in [0, d) (zero for d <= 0).
absl::Duration UniformDuration(absl::BitGenRef rng, absl::Duration d);

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_BACKOFF_H_
