#include "core/engine/state_transfer.h"

#include <algorithm>
#include <memory>
#include <string>

namespace stagger::engine {

EndpointRecord SaveEndpoint(const EndpointState& st, const PolicyParams& p,
                            absl::Time now) {
  EndpointRecord r;
  r.key = std::string(st.key());
  r.last_seen_ns = st.last_seen_ns;
  r.previous_delay_ns = st.previous_delay_ns;
  r.retry_after_until_ns = st.retry_after_until_ns;
  r.breaker = st.breaker.Save(p.breaker, now);
  r.budget = st.budget.Save(p.budget, now);
  r.served = st.served.Save(now);
  if (const EndpointRelease* rel = st.release.get()) {
    r.has_release = true;
    r.capacity = rel->capacity.Save(now);
    r.pacer = rel->pacer.Save();
    r.unavailable_since_ns = rel->unavailable_since_ns;
  }
  return r;
}

void RestoreEndpoint(const EndpointRecord& r, const PolicyParams& p,
                     EndpointState* st) {
  st->last_seen_ns = r.last_seen_ns;
  st->previous_delay_ns = std::max<int64_t>(0, r.previous_delay_ns);
  st->retry_after_until_ns = r.retry_after_until_ns;
  st->breaker.Restore(r.breaker, p.breaker);
  st->budget.Restore(r.budget, p.budget);
  st->served.Restore(r.served);
  st->release.reset();
  if (r.has_release) {
    st->release = std::make_unique<EndpointRelease>();
    st->release->capacity.Restore(r.capacity);
    st->release->pacer.Restore(r.pacer);
    st->release->unavailable_since_ns = r.unavailable_since_ns;
  }
}

}  // namespace stagger::engine
