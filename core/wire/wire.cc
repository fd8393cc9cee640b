#include "core/wire/wire.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace stagger::wire {
namespace {

using engine::BreakerState;
using engine::DisableTrigger;
using engine::Outcome;
using engine::Reason;
using engine::Verdict;
using Phase = engine::CapacityEstimator::Phase;
using Source = engine::CapacityEstimator::Source;

// Every engine enum is numbered as its proto enum; a mapping is a cast.
// These keep the two lists equal (a value added on one side only fails the
// build here, at the last value or at the count).
#define STAGGER_SAME(engine_value, proto_value)                   \
  static_assert(static_cast<int>(engine_value) == (proto_value), \
                #engine_value " != " #proto_value)

STAGGER_SAME(Outcome::kSuccess, v1::SUCCESS);
STAGGER_SAME(Outcome::kRetryableFailure, v1::RETRYABLE_FAILURE);
STAGGER_SAME(Outcome::kTimeout, v1::TIMEOUT);
STAGGER_SAME(Outcome::kRateLimited, v1::RATE_LIMITED);
STAGGER_SAME(Outcome::kNotRetryable, v1::PERMANENT_FAILURE);
static_assert(v1::Outcome_MAX == v1::PERMANENT_FAILURE);

STAGGER_SAME(Verdict::kProceed, v1::PROCEED);
STAGGER_SAME(Verdict::kDefer, v1::DEFER);
STAGGER_SAME(Verdict::kGiveUp, v1::GIVE_UP);
STAGGER_SAME(Verdict::kDone, v1::DONE);
static_assert(v1::Verdict_MAX == v1::DONE);

STAGGER_SAME(Reason::kInitialJitter, v1::INITIAL_JITTER);
STAGGER_SAME(Reason::kBackoff, v1::BACKOFF);
STAGGER_SAME(Reason::kRetryAfter, v1::RETRY_AFTER);
STAGGER_SAME(Reason::kCircuitOpen, v1::CIRCUIT_OPEN);
STAGGER_SAME(Reason::kHalfOpenProbe, v1::HALF_OPEN_PROBE);
STAGGER_SAME(Reason::kBudgetExhausted, v1::BUDGET_EXHAUSTED);
STAGGER_SAME(Reason::kAttemptsExhausted, v1::ATTEMPTS_EXHAUSTED);
STAGGER_SAME(Reason::kNotRetryable, v1::NOT_RETRYABLE);
STAGGER_SAME(Reason::kDeadline, v1::DEADLINE);
STAGGER_SAME(Reason::kSucceeded, v1::SUCCEEDED);
STAGGER_SAME(Reason::kHalfOpenBusy, v1::HALF_OPEN_BUSY);
STAGGER_SAME(Reason::kRetryAfterWindow, v1::RETRY_AFTER_WINDOW);
STAGGER_SAME(Reason::kAdmitted, v1::ADMITTED);
STAGGER_SAME(Reason::kPaced, v1::PACED);
STAGGER_SAME(Reason::kLastChance, v1::LAST_CHANCE);
STAGGER_SAME(Reason::kPaused, v1::PAUSED);
STAGGER_SAME(Reason::kReleased, v1::RELEASED);
STAGGER_SAME(Reason::kEndpointDisabled, v1::ENDPOINT_DISABLED);
static_assert(v1::Reason_MAX == engine::kMaxReason);

STAGGER_SAME(BreakerState::kClosed, v1::CLOSED);
STAGGER_SAME(BreakerState::kOpen, v1::OPEN);
STAGGER_SAME(BreakerState::kHalfOpen, v1::HALF_OPEN);
static_assert(v1::BreakerState_MAX == engine::kNumBreakerStates);

STAGGER_SAME(DisableTrigger::kOperator, v1::DISABLE_TRIGGER_OPERATOR);
STAGGER_SAME(DisableTrigger::kUnavailable, v1::DISABLE_TRIGGER_UNAVAILABLE);
STAGGER_SAME(DisableTrigger::kPermanentFailures,
             v1::DISABLE_TRIGGER_PERMANENT_FAILURES);
static_assert(v1::DisableTrigger_MAX == engine::kMaxDisableTrigger);

STAGGER_SAME(Source::kStart, v1::PACE_START);
STAGGER_SAME(Source::kServed, v1::PACE_SERVED);
STAGGER_SAME(Source::kBacklog, v1::PACE_BACKLOG);
STAGGER_SAME(Source::kGrowth, v1::PACE_GROWTH);
STAGGER_SAME(Source::kGoodput, v1::PACE_GOODPUT);
STAGGER_SAME(Source::kHalved, v1::PACE_HALVED);
static_assert(v1::PaceSource_MAX == v1::PACE_HALVED);

STAGGER_SAME(Phase::kIdle, v1::PACE_IDLE);
STAGGER_SAME(Phase::kClosed, v1::PACE_GATE_CLOSED);
STAGGER_SAME(Phase::kOpening, v1::PACE_OPENING);
STAGGER_SAME(Phase::kReleasing, v1::PACE_RELEASING);
static_assert(v1::PacePhase_MAX == v1::PACE_RELEASING);

#undef STAGGER_SAME

// A proto enum number read from the wire, as the engine enum, if it is one
// of the values 1..max (0 is every stagger.v1 enum's UNSPECIFIED).
template <typename EngineEnum>
std::optional<EngineEnum> InRange(int value, int max) {
  if (value < 1 || value > max) return std::nullopt;
  return static_cast<EngineEnum>(value);
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

template <typename Input, typename Request>
void WriteTimes(const Input& in, Request* req) {
  if (in.deadline != absl::InfiniteFuture()) {
    ToProto(in.deadline, req->mutable_deadline());
  }
  if (in.first_attempt_time != absl::InfinitePast()) {
    ToProto(in.first_attempt_time, req->mutable_first_attempt_time());
  }
}

}  // namespace

// --- Times -----------------------------------------------------------------

absl::StatusOr<absl::Duration> FromProto(const google::protobuf::Duration& d,
                                         absl::string_view field) {
  constexpr int64_t kMaxSeconds = 315576000000;  // google.protobuf.Duration
  const bool in_range = d.seconds() >= -kMaxSeconds &&
                        d.seconds() <= kMaxSeconds &&
                        d.nanos() > -1000000000 && d.nanos() < 1000000000;
  const bool same_sign = !(d.seconds() > 0 && d.nanos() < 0) &&
                         !(d.seconds() < 0 && d.nanos() > 0);
  if (!in_range || !same_sign) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": not a valid Duration (seconds=", d.seconds(),
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
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": not a valid Timestamp (seconds=", t.seconds(),
                     ", nanos=", t.nanos(), ")"));
  }
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

void ToProto(absl::Duration d, google::protobuf::Duration* out) {
  absl::Duration rem;
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &rem);
  out->set_seconds(seconds);  // seconds and nanos share the sign of d
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(rem)));
}

void ToProto(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t seconds = absl::ToUnixSeconds(t);  // floor: nanos >= 0
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(
      absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
}

// --- Enums -----------------------------------------------------------------

v1::Outcome ToProto(Outcome o) { return static_cast<v1::Outcome>(o); }
v1::Verdict ToProto(Verdict v) { return static_cast<v1::Verdict>(v); }
v1::Reason ToProto(Reason r) { return static_cast<v1::Reason>(r); }
v1::BreakerState ToProto(BreakerState s) {
  return static_cast<v1::BreakerState>(s);
}
v1::PaceSource ToProto(Source s) { return static_cast<v1::PaceSource>(s); }
v1::PacePhase ToProto(Phase p) { return static_cast<v1::PacePhase>(p); }

std::optional<Outcome> FromProto(v1::Outcome o) {
  return InRange<Outcome>(o, v1::Outcome_MAX);
}
std::optional<Verdict> FromProto(v1::Verdict v) {
  return InRange<Verdict>(v, v1::Verdict_MAX);
}
std::optional<Reason> FromProto(v1::Reason r) {
  return InRange<Reason>(r, v1::Reason_MAX);
}
std::optional<BreakerState> FromProto(v1::BreakerState s) {
  return InRange<BreakerState>(s, v1::BreakerState_MAX);
}

// --- Requests --------------------------------------------------------------

absl::StatusOr<engine::AdmitInput> FromProto(const v1::AdmitRequest& req) {
  engine::AdmitInput in;
  in.endpoint = req.endpoint();
  in.attempt = req.attempt();
  if (req.has_wait()) {
    absl::StatusOr<absl::Duration> w = FromProto(req.wait(), "wait");
    if (!w.ok()) return w.status();
    in.wait = *w;
  }
  if (absl::Status st = ReadTimes(req, &in); !st.ok()) return st;
  return in;
}

absl::StatusOr<engine::ReportInput> FromProto(const v1::ReportRequest& req) {
  engine::ReportInput in;
  in.endpoint = req.endpoint();
  in.attempt = req.attempt();
  if (req.outcome() == v1::OUTCOME_UNSPECIFIED) {
    return absl::InvalidArgumentError("outcome: must be set");
  }
  std::optional<Outcome> outcome = FromProto(req.outcome());
  if (!outcome.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "outcome: unknown value ", static_cast<int>(req.outcome())));
  }
  in.outcome = *outcome;
  in.admission = req.admission();
  if (req.has_retry_after()) {
    absl::StatusOr<absl::Duration> d =
        FromProto(req.retry_after(), "retry_after");
    if (!d.ok()) return d.status();
    in.retry_after = *d;
  }
  if (absl::Status st = ReadTimes(req, &in); !st.ok()) return st;
  return in;
}

void ToProto(const engine::AdmitInput& in, v1::AdmitRequest* out) {
  out->set_endpoint(std::string(in.endpoint));
  out->set_attempt(in.attempt);
  if (in.wait != absl::ZeroDuration()) ToProto(in.wait, out->mutable_wait());
  WriteTimes(in, out);
}

void ToProto(const engine::ReportInput& in, v1::ReportRequest* out) {
  out->set_endpoint(std::string(in.endpoint));
  out->set_attempt(in.attempt);
  out->set_outcome(ToProto(in.outcome));
  out->set_admission(in.admission);
  if (in.retry_after.has_value()) {
    ToProto(*in.retry_after, out->mutable_retry_after());
  }
  WriteTimes(in, out);
}

// --- Decisions -------------------------------------------------------------

void ToProto(const engine::Decision& d, absl::Time now, v1::Decision* out) {
  out->set_verdict(ToProto(d.verdict));
  out->set_reason(ToProto(d.reason));
  out->set_attempt(d.attempt);
  out->set_admission(d.admission);
  if (d.verdict == Verdict::kProceed) {
    ToProto(d.delay, out->mutable_delay());
  } else if (d.verdict == Verdict::kDefer) {
    ToProto(d.defer_until, out->mutable_defer_until());
    ToProto(std::max(absl::ZeroDuration(), d.defer_until - now),
            out->mutable_defer_for());
  }
}

absl::StatusOr<engine::Decision> FromProto(const v1::Decision& d,
                                           absl::Time now) {
  const std::optional<Verdict> verdict = FromProto(d.verdict());
  if (!verdict.has_value()) {
    return absl::InternalError(
        absl::StrCat("coordinator answered an unusable verdict ",
                     static_cast<int>(d.verdict())));
  }
  engine::Decision out;
  out.verdict = *verdict;
  // A reason this build does not know yet still comes through as a number
  // (the verdict is what the worker acts on).
  out.reason = static_cast<Reason>(d.reason());
  out.attempt = d.attempt();
  out.admission = d.admission();
  if (out.verdict == Verdict::kProceed && d.has_delay()) {
    absl::StatusOr<absl::Duration> delay = FromProto(d.delay(), "delay");
    if (!delay.ok()) return absl::InternalError(delay.status().message());
    out.delay = std::max(absl::ZeroDuration(), *delay);
  }
  if (out.verdict != Verdict::kDefer) return out;
  if (d.has_defer_for()) {
    absl::StatusOr<absl::Duration> f = FromProto(d.defer_for(), "defer_for");
    if (!f.ok()) return absl::InternalError(f.status().message());
    out.defer_until = now + std::max(absl::ZeroDuration(), *f);
  } else if (d.has_defer_until()) {
    absl::StatusOr<absl::Time> u = FromProto(d.defer_until(), "defer_until");
    if (!u.ok()) return absl::InternalError(u.status().message());
    out.defer_until = *u;
  } else {
    return absl::InternalError("coordinator answered DEFER without a time");
  }
  return out;
}

// --- Batches ---------------------------------------------------------------

absl::Status CheckBatchSize(size_t n, int max) {
  if (n < 1 || n > static_cast<size_t>(max)) {
    return absl::InvalidArgumentError(
        absl::StrCat("items: a batch holds 1..", max,
                     " items (limits.max_batch_size), got ", n));
  }
  return absl::OkStatus();
}

absl::Status PrefixItem(const absl::Status& s, size_t index) {
  return absl::Status(s.code(),
                      absl::StrCat("items[", index, "].", s.message()));
}

}  // namespace stagger::wire
