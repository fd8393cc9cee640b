#include "server/state/state_record.h"

#include <algorithm>

namespace stagger::state {
namespace {

void WindowToProto(const engine::WindowRecord& in, v1::state::Window* out) {
  out->set_slot_nanos(in.slot_ns);
  out->set_head_slot(in.head_slot);
  // Trailing empty slots are left out (a reader takes them as zero).
  int n = engine::WindowRecord::kSlots;
  while (n > 0 && in.slots[n - 1][0] == 0 && in.slots[n - 1][1] == 0) --n;
  for (int k = 0; k < n; ++k) {
    v1::state::Counts* c = out->add_slots();
    c->set_a(in.slots[k][0]);
    c->set_b(in.slots[k][1]);
  }
}

engine::WindowRecord WindowFromProto(const v1::state::Window& in) {
  engine::WindowRecord r;
  r.slot_ns = in.slot_nanos();
  r.head_slot = in.head_slot();
  const int n = std::min(in.slots_size(), engine::WindowRecord::kSlots);
  for (int k = 0; k < n; ++k) r.slots[k] = {in.slots(k).a(), in.slots(k).b()};
  return r;
}

void BreakerToProto(const engine::BreakerRecord& in, v1::state::Breaker* out) {
  out->set_state(static_cast<v1::BreakerState>(in.state));
  if (in.state == engine::BreakerState::kOpen) {
    out->set_open_until_unix_nanos(in.time_ns);
  } else if (in.state == engine::BreakerState::kHalfOpen) {
    out->set_last_probe_unix_nanos(in.time_ns);
  }
  out->set_consecutive_failures(in.consecutive_failures);
  out->set_probes_in_flight(in.probes_in_flight);
  out->set_probe_successes(in.probe_successes);
  out->set_trips(in.trips);
  WindowToProto(in.window, out->mutable_window());
}

engine::BreakerRecord BreakerFromProto(const v1::state::Breaker& in) {
  engine::BreakerRecord r;
  switch (in.state()) {
    case v1::OPEN:
      r.state = engine::BreakerState::kOpen;
      r.time_ns = in.open_until_unix_nanos();
      break;
    case v1::HALF_OPEN:
      r.state = engine::BreakerState::kHalfOpen;
      r.time_ns = in.last_probe_unix_nanos();
      break;
    default:
      r.state = engine::BreakerState::kClosed;
  }
  r.consecutive_failures = in.consecutive_failures();
  r.probes_in_flight = in.probes_in_flight();
  r.probe_successes = in.probe_successes();
  r.trips = in.trips();
  r.window = WindowFromProto(in.window());
  return r;
}

void ReleaseToProto(const engine::EndpointRecord& in, v1::state::Release* out) {
  const engine::CapacityRecord& c = in.capacity;
  out->set_pace(c.pace);
  out->set_threshold(c.threshold);
  out->set_before_cuts(c.before_cuts);
  out->set_successes_per_second(c.successes);
  out->set_failures_per_second(c.failures);
  out->set_rates_at_unix_millis(c.rates_at_ms);
  out->set_measured_from_unix_millis(c.measured_from_ms);
  out->set_last_success_unix_millis(c.last_success_ms);
  out->set_cut_round_end_unix_millis(c.cut_round_end_ms);
  out->set_streak_start_unix_millis(c.streak_start_ms);
  out->set_rtt_millis(c.rtt_ms);
  out->set_phase(static_cast<v1::PacePhase>(c.phase));
  out->set_source(static_cast<v1::PaceSource>(c.source));
  const engine::PacerRecord& q = in.pacer;
  out->set_queue_tail_unix_nanos(q.tail_ns);
  out->set_gate_unix_nanos(q.gate_ns);
  out->set_release_end_unix_nanos(q.release_end_ns);
  out->set_closed_since_unix_nanos(q.closed_since_ns);
  out->set_parked_seconds(q.parked_seconds);
  out->set_backlog(q.backlog);
  out->set_unavailable_since_unix_nanos(in.unavailable_since_ns);
}

void ReleaseFromProto(const v1::state::Release& in, engine::EndpointRecord* r) {
  engine::CapacityRecord& c = r->capacity;
  c.pace = in.pace();
  c.threshold = in.threshold();
  c.before_cuts = in.before_cuts();
  c.successes = in.successes_per_second();
  c.failures = in.failures_per_second();
  c.rates_at_ms = in.rates_at_unix_millis();
  c.measured_from_ms = in.measured_from_unix_millis();
  c.last_success_ms = in.last_success_unix_millis();
  c.cut_round_end_ms = in.cut_round_end_unix_millis();
  c.streak_start_ms = in.streak_start_unix_millis();
  c.rtt_ms = in.rtt_millis();
  // Out-of-range enum values (a newer writer) are left for the engine to
  // replace with its defaults.
  c.phase = static_cast<uint8_t>(std::clamp<int>(in.phase(), 0, 255));
  c.source = static_cast<uint8_t>(std::clamp<int>(in.source(), 0, 255));
  engine::PacerRecord& q = r->pacer;
  q.tail_ns = in.queue_tail_unix_nanos();
  q.gate_ns = in.gate_unix_nanos();
  q.release_end_ns = in.release_end_unix_nanos();
  q.closed_since_ns = in.closed_since_unix_nanos();
  q.parked_seconds = in.parked_seconds();
  q.backlog = in.backlog();
  r->unavailable_since_ns = in.unavailable_since_unix_nanos();
}

}  // namespace

void ToProto(const engine::EndpointRecord& in, v1::state::Endpoint* out) {
  out->Clear();
  out->set_key(in.key);
  out->set_last_seen_unix_nanos(in.last_seen_ns);
  out->set_previous_delay_nanos(in.previous_delay_ns);
  out->set_retry_after_until_unix_nanos(in.retry_after_until_ns);
  BreakerToProto(in.breaker, out->mutable_breaker());
  WindowToProto(in.budget, out->mutable_budget()->mutable_window());
  out->mutable_served()->set_unix_second(in.served.unix_second);
  out->mutable_served()->set_this_second(in.served.this_second);
  out->mutable_served()->set_previous_second(in.served.previous_second);
  if (in.has_release) ReleaseToProto(in, out->mutable_release());
}

engine::EndpointRecord FromProto(const v1::state::Endpoint& in) {
  engine::EndpointRecord r;
  r.key = in.key();
  r.last_seen_ns = in.last_seen_unix_nanos();
  r.previous_delay_ns = std::max<int64_t>(0, in.previous_delay_nanos());
  r.retry_after_until_ns = in.retry_after_until_unix_nanos();
  r.breaker = BreakerFromProto(in.breaker());
  r.budget = WindowFromProto(in.budget().window());
  r.served.unix_second = in.served().unix_second();
  r.served.this_second = in.served().this_second();
  r.served.previous_second = in.served().previous_second();
  r.has_release = in.has_release();
  if (r.has_release) ReleaseFromProto(in.release(), &r);
  return r;
}

void ToProto(const engine::Pause& in, v1::state::Pause* out) {
  out->Clear();
  out->set_target(in.target);
  out->set_prefix(in.prefix);
  out->set_since_unix_nanos(absl::ToUnixNanos(in.since));
  out->set_until_unix_nanos(absl::ToUnixNanos(in.until));
  out->set_reason(in.reason);
  out->set_paused_by(in.paused_by);
  out->set_id(in.id);
}

engine::Pause FromProto(const v1::state::Pause& in) {
  auto instant = [](int64_t unix_nanos) {
    return unix_nanos == 0 ? absl::InfinitePast() : absl::FromUnixNanos(unix_nanos);
  };
  engine::Pause p;
  p.target = in.target();
  p.prefix = in.prefix();
  p.since = instant(in.since_unix_nanos());
  p.until = instant(in.until_unix_nanos());
  p.reason = in.reason();
  p.paused_by = in.paused_by();
  p.id = in.id();
  return p;
}

void ToProto(const engine::Disable& in, v1::state::Disabled* out) {
  out->Clear();
  out->set_endpoint(in.endpoint);
  out->set_trigger(static_cast<v1::DisableTrigger>(in.trigger));
  out->set_since_unix_nanos(absl::ToUnixNanos(in.since));
  out->set_reason(in.reason);
  out->set_disabled_by(in.by);
  out->set_operation_id(in.operation_id);
}

engine::Disable FromProto(const v1::state::Disabled& in) {
  engine::Disable d;
  d.endpoint = in.endpoint();
  const int t = in.trigger();
  d.trigger = t >= 1 && t <= engine::kMaxDisableTrigger
                  ? static_cast<engine::DisableTrigger>(t)
                  : engine::DisableTrigger::kOperator;
  d.since = absl::FromUnixNanos(in.since_unix_nanos());
  d.reason = in.reason();
  d.by = in.disabled_by();
  d.operation_id = in.operation_id();
  return d;
}

}  // namespace stagger::state
