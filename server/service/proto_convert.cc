#include "server/service/proto_convert.h"

#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace stagger::service {
namespace {

constexpr int64_t kMaxDurationSeconds = 315576000000;  // google.protobuf

absl::StatusOr<absl::Duration> FromProto(const google::protobuf::Duration& d,
                                         absl::string_view field) {
  const bool in_range = d.seconds() >= -kMaxDurationSeconds &&
                        d.seconds() <= kMaxDurationSeconds &&
                        d.nanos() > -1000000000 && d.nanos() < 1000000000;
  const bool same_sign = !(d.seconds() > 0 && d.nanos() < 0) &&
                         !(d.seconds() < 0 && d.nanos() > 0);
  if (!in_range || !same_sign) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": not a valid Duration (seconds=", d.seconds(),
        ", nanos=", d.nanos(), ")"));
  }
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::StatusOr<absl::Time> FromProto(const google::protobuf::Timestamp& t,
                                     absl::string_view field) {
  // 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z, as the Timestamp spec.
  constexpr int64_t kMin = -62135596800, kMax = 253402300799;
  if (t.seconds() < kMin || t.seconds() > kMax || t.nanos() < 0 ||
      t.nanos() > 999999999) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": not a valid Timestamp (seconds=", t.seconds(),
        ", nanos=", t.nanos(), ")"));
  }
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  const int64_t ns = absl::ToInt64Nanoseconds(d);
  out->set_seconds(ns / 1000000000);
  out->set_nanos(static_cast<int32_t>(ns % 1000000000));
}

void ToProto(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t s = absl::ToUnixSeconds(t);
  out->set_seconds(s);
  out->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(s))));
}

// The optional deadline and first_attempt_time both requests carry.
template <typename Request, typename Input>
absl::Status ReadTimes(const Request& req, Input* in) {
  if (req.has_deadline()) {
    absl::StatusOr<absl::Time> t = FromProto(req.deadline(), "deadline");
    if (!t.ok()) return t.status();
    in->deadline = *t;
  }
  if (req.has_first_attempt_time()) {
    absl::StatusOr<absl::Time> t =
        FromProto(req.first_attempt_time(), "first_attempt_time");
    if (!t.ok()) return t.status();
    in->first_attempt_time = *t;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<engine::AdmitInput> FromProto(const v1::AdmitRequest& req) {
  engine::AdmitInput in;
  in.endpoint = req.endpoint();
  in.attempt = req.attempt();
  if (absl::Status st = ReadTimes(req, &in); !st.ok()) return st;
  return in;
}

absl::StatusOr<engine::ReportInput> FromProto(const v1::ReportRequest& req) {
  engine::ReportInput in;
  in.endpoint = req.endpoint();
  in.attempt = req.attempt();
  switch (req.outcome()) {
    case v1::SUCCESS: in.outcome = engine::Outcome::kSuccess; break;
    case v1::RETRYABLE_FAILURE:
      in.outcome = engine::Outcome::kRetryableFailure;
      break;
    case v1::TIMEOUT: in.outcome = engine::Outcome::kTimeout; break;
    case v1::RATE_LIMITED: in.outcome = engine::Outcome::kRateLimited; break;
    case v1::PERMANENT_FAILURE: in.outcome = engine::Outcome::kNotRetryable; break;
    case v1::OUTCOME_UNSPECIFIED:
      return absl::InvalidArgumentError("outcome: must be set");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("outcome: unknown value ", static_cast<int>(req.outcome())));
  }
  if (req.has_retry_after()) {
    absl::StatusOr<absl::Duration> d =
        FromProto(req.retry_after(), "retry_after");
    if (!d.ok()) return d.status();
    in.retry_after = *d;
  }
  if (absl::Status st = ReadTimes(req, &in); !st.ok()) return st;
  return in;
}

void ToProto(const engine::Decision& d, absl::Time now, v1::Decision* out) {
  out->set_verdict(static_cast<v1::Verdict>(d.verdict));
  out->set_reason(static_cast<v1::Reason>(d.reason));
  out->set_attempt(d.attempt);
  if (d.verdict == engine::Verdict::kProceed) {
    ToProto(d.delay, out->mutable_delay());
  } else if (d.verdict == engine::Verdict::kDefer) {
    ToProto(d.defer_until, out->mutable_defer_until());
    ToProto(std::max(absl::ZeroDuration(), d.defer_until - now),
            out->mutable_defer_for());
  }
}

void ToProto(const engine::EndpointSnapshot& s, v1::EndpointState* out) {
  out->set_endpoint(s.endpoint);
  out->set_policy(s.policy);
  out->set_breaker_state(static_cast<v1::BreakerState>(s.breaker_state));
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
    pace->set_learned_from(static_cast<v1::PaceSource>(s.pace_source));
    pace->set_capped(s.pace_capped);
    pace->set_phase(static_cast<v1::PacePhase>(s.pace_phase));
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
}

std::optional<engine::BreakerState> FromProto(v1::BreakerState s) {
  switch (s) {
    case v1::CLOSED: return engine::BreakerState::kClosed;
    case v1::OPEN: return engine::BreakerState::kOpen;
    case v1::HALF_OPEN: return engine::BreakerState::kHalfOpen;
    default: return std::nullopt;
  }
}

absl::Status PrefixItem(const absl::Status& s, int index) {
  return absl::Status(s.code(),
                      absl::StrCat("items[", index, "].", s.message()));
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
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
