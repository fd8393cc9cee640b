#include "core/engine/lease_terms.h"

#include <algorithm>

namespace stagger::engine {

LeaseTerms TermsFor(EndpointState& st, const PolicyParams& p, absl::Time now,
                    bool paused) {
  LeaseTerms t;
  t.initial_jitter = p.backoff.initial_jitter;
  t.served_per_second =
      std::max(st.served.PerSecond(now),
               st.budget.FirstAttemptsPerSecond(p.budget, now));
  const bool releasing =
      st.release != nullptr && st.release->pacer.Releasing(now);
  t.clear = !paused && !releasing &&
            st.breaker.StateAt(now) == BreakerState::kClosed &&
            st.retry_after_until_ns <= absl::ToUnixNanos(now) &&
            (!p.breaker.enabled ||
             st.breaker.TripShare(p.breaker, now) < kLeaseFailureShare);
  return t;
}

void ApplyLateCounts(EndpointState& st, const PolicyParams& p, absl::Time now,
                     const LateCounts& counts) {
  const absl::Time at = std::min(counts.at, now);
  if (counts.first_attempts > 0) {
    st.budget.RecordFirstAttempts(p.budget, now, at, counts.first_attempts);
  }
  if (counts.successes > 0) {
    st.breaker.CountLateAnswers(p.breaker, now, at, counts.successes);
    st.served.OnSuccesses(at, counts.successes);
    st.last_success_ns =
        std::max(st.last_success_ns, absl::ToUnixNanos(at));
  }
}

}  // namespace stagger::engine
