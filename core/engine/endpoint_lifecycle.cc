#include "core/engine/endpoint_lifecycle.h"

#include "absl/strings/str_cat.h"

namespace stagger::engine {

void TrackUnavailable(EndpointState& st, absl::Time now) {
  EndpointRelease* rel = st.release.get();
  if (rel == nullptr) return;  // allocated whenever the breaker leaves CLOSED
  if (st.breaker.state() == BreakerState::kClosed) {
    rel->unavailable_since_ns = 0;
  } else if (rel->unavailable_since_ns == 0) {
    rel->unavailable_since_ns = absl::ToUnixNanos(now);
  }
}

std::optional<Disable> UnavailableTrigger(const EndpointState& st,
                                          const PolicyParams& p,
                                          absl::Time now) {
  const absl::Duration after = p.disable.after_unavailable;
  if (st.disabled || after <= absl::ZeroDuration() || !p.breaker.enabled) {
    return std::nullopt;
  }
  const EndpointRelease* rel = st.release.get();
  if (rel == nullptr || rel->unavailable_since_ns == 0 ||
      st.breaker.state() == BreakerState::kClosed) {
    return std::nullopt;
  }
  const absl::Time since = absl::FromUnixNanos(rel->unavailable_since_ns);
  if (now - since < after) return std::nullopt;
  Disable d;
  d.endpoint = std::string(st.key());
  d.trigger = DisableTrigger::kUnavailable;
  d.since = now;
  d.reason = absl::StrCat("breaker away from CLOSED for ",
                          absl::FormatDuration(now - since),
                          " (disable.after_unavailable: ",
                          absl::FormatDuration(after), ")");
  return d;
}

std::optional<Disable> CountPermanentFailure(EndpointState& st,
                                             const PolicyParams& p,
                                             absl::Time now,
                                             DisableTable& table) {
  const int n = p.disable.permanent_failures;
  if (st.disabled || n <= 0) return std::nullopt;
  st.counting_strikes = 1;
  if (!table.CountStrike(st.key(), now, n, p.disable.window)) {
    return std::nullopt;
  }
  st.counting_strikes = 0;  // the table forgot them
  Disable d;
  d.endpoint = std::string(st.key());
  d.trigger = DisableTrigger::kPermanentFailures;
  d.since = now;
  d.reason = absl::StrCat(n, " permanent failures within ",
                          absl::FormatDuration(p.disable.window),
                          " (disable.permanent_failures)");
  return d;
}

void ForgetPermanentFailures(EndpointState& st, DisableTable& table) {
  if (!st.counting_strikes) return;
  table.ForgetStrikes(st.key());
  st.counting_strikes = 0;
}

void RestartTriggers(EndpointState& st, absl::Time now, DisableTable& table) {
  ForgetPermanentFailures(st, table);
  if (st.release != nullptr && st.breaker.state() != BreakerState::kClosed) {
    st.release->unavailable_since_ns = absl::ToUnixNanos(now);
  }
}

}  // namespace stagger::engine
