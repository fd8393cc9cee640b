#include "core/engine/lease_terms.h"

#include <algorithm>

#include "core/engine/endpoint_condition.h"

namespace stagger::engine {

LeaseTerms TermsFor(EndpointState& st, const PolicyParams& p, absl::Time now,
                    bool paused) {
  LeaseTerms t;
  t.initial_jitter = p.backoff.initial_jitter;
  t.served_per_second =
      std::max(st.served.PerSecond(now),
               st.budget.FirstAttemptsPerSecond(p.budget, now));
  t.clear = !paused && ConditionOf(st, p, now).clear();
  return t;
}

void ApplyLateCounts(EndpointState& st, const PolicyParams& p, absl::Time now,
                     const LateCounts& counts) {
  const absl::Time at = std::min(counts.at, now);
  if (counts.first_attempts > 0) {
    st.budget.RecordFirstAttempts(p.budget, now, at, counts.first_attempts);
  }
  if (counts.successes > 0) {
    // Not last_success: counts are never evidence of recovery on their
    // own (a waiting call goes on a reported success, decision_path.h).
    const absl::Time last =
        counts.last_success == absl::InfinitePast()
            ? at
            : std::min(std::max(counts.last_success, at), now);
    st.breaker.CountLateAnswers(p.breaker, now, at, last, counts.successes);
    st.served.OnSuccesses(at, counts.successes);
    // TODO(lead, issue 25/27): counts are never evidence of recovery on
    // their own; dropped with the stream protocol that replaces this one.
    st.last_success_ns = std::max(st.last_success_ns, absl::ToUnixNanos(at));
  }
}

}  // namespace stagger::engine
