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
    // A success stamped after `now` came before a step back of this clock:
    // its order with the failures since is unknown, so it ends no run.
    const absl::Time last =
        counts.last_success > now ? absl::InfinitePast()
        : counts.last_success == absl::InfinitePast()
            ? at
            : std::max(counts.last_success, at);
    // Successes after the last failure end its run, and with it the
    // fleet's decorrelated backoff grown from those failures (a success
    // reported then would reset it too: decision_path.cc). Else an
    // endpoint whose successes are all answered by agents would see its
    // retries' backoff climb to the cap on sparse failures.
    if (st.breaker.CountLateAnswers(p.breaker, now, at, last,
                                    counts.successes)) {
      st.previous_delay_ns = 0;
    }
    // Not last_success: counts are never evidence of recovery on their
    // own (a waiting call goes on a reported success, decision_path.h).
    st.served.OnSuccesses(at, counts.successes);
  }
}

}  // namespace stagger::engine
