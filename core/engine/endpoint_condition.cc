#include "core/engine/endpoint_condition.h"

namespace stagger::engine {
namespace {

// Pack(): breaker in bits 0-1 (0 is CLOSED), then one bit per flag.
constexpr uint8_t kRetryAfterBit = 1 << 2;
constexpr uint8_t kReleasingBit = 1 << 3;
constexpr uint8_t kNearTripBit = 1 << 4;
constexpr uint8_t kDisabledBit = 1 << 5;

}  // namespace

uint8_t EndpointCondition::Pack() const {
  uint8_t b = static_cast<uint8_t>(static_cast<uint8_t>(breaker) - 1);
  if (retry_after) b |= kRetryAfterBit;
  if (releasing) b |= kReleasingBit;
  if (near_trip) b |= kNearTripBit;
  if (disabled) b |= kDisabledBit;
  return b;
}

EndpointCondition EndpointCondition::Unpack(uint8_t b) {
  EndpointCondition c;
  const int breaker = (b & 3) + 1;
  c.breaker = breaker <= kNumBreakerStates ? static_cast<BreakerState>(breaker)
                                           : BreakerState::kClosed;
  c.retry_after = (b & kRetryAfterBit) != 0;
  c.releasing = (b & kReleasingBit) != 0;
  c.near_trip = (b & kNearTripBit) != 0;
  c.disabled = (b & kDisabledBit) != 0;
  return c;
}

EndpointCondition ConditionOf(EndpointState& st, const PolicyParams& p,
                              absl::Time now) {
  EndpointCondition c;
  c.breaker = st.breaker.StateAt(now);
  c.retry_after = st.retry_after_until_ns > absl::ToUnixNanos(now);
  c.releasing = st.release != nullptr && st.release->pacer.Releasing(now);
  c.near_trip = c.breaker == BreakerState::kClosed && p.breaker.enabled &&
                st.breaker.TripShare(p.breaker, now) >= kNearTripShare;
  c.disabled = st.disabled;
  return c;
}

void ReportCondition(EndpointState& st, const PolicyParams& p, absl::Time now,
                     ConditionSink* sink, ConditionNotes notes) {
  if (sink == nullptr) return;
  const EndpointCondition to = ConditionOf(st, p, now);
  const uint8_t packed = to.Pack();
  if (packed == st.reported_condition) return;
  ConditionChange c;
  c.endpoint = st.key();
  c.at = now;
  c.from = EndpointCondition::Unpack(st.reported_condition);
  c.to = to;
  if (to.breaker == BreakerState::kOpen) {
    c.open_cause = st.breaker.open_cause();
    c.open_until = st.breaker.open_until();
  }
  if (to.retry_after) {
    c.retry_after_until = absl::FromUnixNanos(st.retry_after_until_ns);
  }
  if (st.release != nullptr) {
    c.release_pace = st.release->capacity.Pace(p.deferral);
  }
  if (to.disabled != c.from.disabled) {
    c.disabled = to.disabled ? notes.disabled : nullptr;
    c.enabled = to.disabled ? nullptr : notes.enabled;
  }
  st.reported_condition = packed;
  sink->OnConditionChange(c);
}

void ReportForgotten(const EndpointState& st, absl::Time now,
                     ConditionSink* sink) {
  if (sink == nullptr || st.reported_condition == 0) return;
  ConditionChange c;
  c.endpoint = st.key();
  c.at = now;
  c.from = EndpointCondition::Unpack(st.reported_condition);
  c.to.disabled = c.from.disabled;  // a disable outlives the state
  c.forgotten = true;
  sink->OnConditionChange(c);
}

}  // namespace stagger::engine
