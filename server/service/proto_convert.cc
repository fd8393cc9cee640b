#include "server/service/proto_convert.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace stagger::service {

void ToProto(const engine::EndpointSnapshot& s, v1::EndpointState* out) {
  out->set_endpoint(s.endpoint);
  out->set_policy(s.policy);
  out->set_breaker_state(ToProto(s.breaker_state));
  if (s.breaker_state == engine::BreakerState::kOpen) {
    ToProto(s.open_until, out->mutable_open_until());
  }
  out->set_consecutive_trips(s.consecutive_trips);
  out->set_consecutive_failures(s.consecutive_failures);
  out->set_probes_in_flight(s.probes_in_flight);
  out->set_probe_successes(s.probe_successes);
  ToProto(s.previous_delay, out->mutable_previous_delay());
  out->set_budget_remaining(s.budget_remaining);
  if (s.retry_after_until != absl::InfinitePast()) {
    ToProto(s.retry_after_until, out->mutable_retry_after_until());
  }
  if (s.last_seen != absl::InfinitePast()) {
    ToProto(s.last_seen, out->mutable_last_seen());
  }
  if (s.has_release) {
    v1::ReleasePace* pace = out->mutable_release_pace();
    pace->set_per_second(s.release_rate);
    pace->set_learned_from(ToProto(s.pace_source));
    pace->set_capped(s.pace_capped);
    pace->set_phase(ToProto(s.pace_phase));
    pace->set_capacity_per_second(s.pace_threshold);
    pace->set_releasing(s.releasing);
    pace->set_backlog(s.backlog);
    pace->set_served_per_second(s.served_per_second);
    ToProto(s.round_trip, pace->mutable_round_trip());
  }
  if (s.pause.has_value()) {
    v1::EndpointPause* pause = out->mutable_pause();
    ToProto(s.pause->until, pause->mutable_until());
    pause->set_reason(s.pause->reason);
    pause->set_paused_by(s.pause->paused_by);
    if (s.pause->prefix) pause->set_prefix(s.pause->target);
  }
  if (s.disable.has_value()) ToProto(*s.disable, out->mutable_disabled());
}

void ToProto(const engine::Disable& d, v1::EndpointDisable* out) {
  out->set_trigger(static_cast<v1::DisableTrigger>(d.trigger));
  ToProto(d.since, out->mutable_since());
  out->set_reason(d.reason);
  out->set_disabled_by(d.by);
  out->set_operation_id(d.operation_id);
}


std::string EncodePageToken(absl::string_view last_key) {
  return absl::BytesToHexString(last_key);
}

absl::StatusOr<std::string> DecodePageToken(absl::string_view token) {
  if (token.size() % 2 != 0 ||
      token.find_first_not_of("0123456789abcdefABCDEF") !=
          absl::string_view::npos) {
    return absl::InvalidArgumentError(
        "page_token: not a token from a previous response");
  }
  return absl::HexStringToBytes(token);
}

}  // namespace stagger::service
