#include "bench/sim/coordinated.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stagger::sim {
namespace {

constexpr char kEndpoint[] = "https://hooks.example.com/geofence";

// A failure Report's PROCEED that the waiting client turns into a waiting
// Admit: a backoff or a Retry-After delay (proto AdmitRequest.wait).
bool WaitableDelay(const engine::Decision& d) {
  return d.delay > absl::ZeroDuration() &&
         (d.reason == engine::Reason::kBackoff ||
          d.reason == engine::Reason::kRetryAfter);
}

}  // namespace

CoordinatedDriver::CoordinatedDriver(Fleet& fleet)
    : f_(fleet), s_(fleet.scenario()) {
  for (size_t e = 0; e < s_.endpoints.size(); ++e) {
    keys_.push_back(e == 0 ? std::string(kEndpoint)
                           : absl::StrCat(kEndpoint, "-", e));
    endpoint_of_[keys_.back()] = static_cast<int>(e);
  }
  engine_ = std::make_unique<engine::Engine>(CoordinatedConfig(s_),
                                             &f_.clock(), &f_.random());
  if (s_.waiting_admission) {
    room_ = std::make_unique<WaitRoomModel>(
        engine_.get(), &f_.clock(), static_cast<int>(keys_.size()),
        f_.deliveries(),
        [this](int64_t t_ns, int endpoint) {
          f_.Push(t_ns, endpoint, EventType::kLook);
        },
        [this](int call, const engine::Decision& d, bool expired) {
          ++(expired ? f_.result().expired : f_.result().released);
          return FollowWaiting(f_.clock().now_ns(), call, d);
        });
  }
  if (s_.leases.agents > 0) {
    LeaseNetwork::Hooks hooks;
    hooks.push = [this](int64_t t_ns, int id, EventType type) {
      f_.Push(t_ns, id, type);
    };
    hooks.wake = [this](absl::string_view key) {
      if (room_ == nullptr) return;
      room_->NoteSuccess(endpoint_of_.at(key));
      room_->Wake(endpoint_of_.at(key));
    };
    hooks.done = [this] { return f_.AllSettled(); };
    leases_ = std::make_unique<LeaseNetwork>(
        s_.leases, s_.seed, engine_.get(), &f_.clock(), std::move(hooks),
        &f_.result());
  }
}

CoordinatedDriver::~CoordinatedDriver() = default;

void CoordinatedDriver::Start() {
  deadline_.resize(f_.deliveries());
  first_attempt_.resize(f_.deliveries());
  for (int i = 0; i < f_.deliveries(); ++i) {
    Delivery& d = f_.delivery(i);
    d.attempt = 1;
    const std::optional<int64_t> deadline = f_.DeadlineNs(d);
    deadline_[i] = deadline ? Epoch() + absl::Nanoseconds(*deadline)
                            : absl::InfiniteFuture();
    first_attempt_[i] = Epoch() + absl::Nanoseconds(d.created_ns);
  }
  if (leases_ != nullptr) leases_->Start();
}

engine::AdmitInput CoordinatedDriver::AdmitFor(int id,
                                               absl::Duration wait) const {
  const Delivery& d = f_.delivery(id);
  engine::AdmitInput in;
  in.endpoint = keys_[d.endpoint];
  in.attempt = d.attempt;
  in.deadline = deadline_[id];
  in.first_attempt_time = first_attempt_[id];
  in.wait = wait;
  return in;
}

engine::ReportInput CoordinatedDriver::ReportFor(int id) const {
  const Delivery& d = f_.delivery(id);
  engine::ReportInput in;
  in.endpoint = keys_[d.endpoint];
  in.attempt = d.attempt;
  in.outcome = d.last.outcome;
  in.retry_after = d.last.retry_after;
  in.deadline = deadline_[id];
  in.first_attempt_time = first_attempt_[id];
  in.admission = d.admission;
  return in;
}

absl::Status CoordinatedDriver::Refused(const char* call, int attempt,
                                        const absl::Status& st) {
  return absl::InternalError(absl::StrCat("engine refused ", call,
                                          "(attempt=", attempt,
                                          "): ", st.message()));
}

// --- Events --------------------------------------------------------------------

absl::Status CoordinatedDriver::OnWorker(int64_t now, int id) {
  Delivery& d = f_.delivery(id);
  if (d.admitted) {  // a waiting call's PROCEED: send it now
    d.admitted = false;
    f_.Push(now + d.send_delay_ns, id, EventType::kSend);
    return absl::OkStatus();
  }
  return Admit(now, id);  // attempt 1, or the parked one again
}

absl::Status CoordinatedDriver::OnEvent(const Event& e) {
  const int64_t now = e.t_ns;
  const int id = static_cast<int>(e.id);
  switch (e.type) {
    case EventType::kSend:
      f_.Send(now, id);
      return absl::OkStatus();
    case EventType::kAdmit:
      return Admit(now, id);
    case EventType::kReport:  // its counts went first (lease_model.h)
      if (!leases_->ReportDue(id)) return absl::OkStatus();
      return ReportFailure(now, id);
    case EventType::kLook:
      return room_->Look(id, now);
    case EventType::kPoll:
    case EventType::kTick:
    case EventType::kMessage:
      return leases_->OnEvent(e);
    default:
      return absl::InternalError("coordinated row: unexpected event");
  }
}

absl::Status CoordinatedDriver::OnAnswer(int64_t now, int id) {
  Delivery& d = f_.delivery(id);
  if (d.last.ok) {
    f_.Delivered(now, id);
    absl::Status st = ReportSuccess(now, id);
    f_.FreeWorker(now, id);  // after the Report, as a worker would
    return st;
  }
  if (leases_ != nullptr &&
      leases_->FlushFor(AgentOf(id), id, keys_[d.endpoint])) {
    return absl::OkStatus();  // the Report goes once the counts are applied
  }
  return ReportFailure(now, id);
}

// --- Calls to the coordinator ------------------------------------------------

absl::Status CoordinatedDriver::Admit(int64_t now, int id) {
  Delivery& d = f_.delivery(id);
  const engine::AdmitInput in = AdmitFor(id, absl::ZeroDuration());
  if (leases_ != nullptr && d.attempt == 1) {
    if (std::optional<engine::Decision> local =
            leases_->Admit(AgentOf(id), in)) {
      return Follow(now, id, *local);
    }
  }
  ++f_.result().admits;
  absl::StatusOr<engine::Decision> dec = engine_->Admit(in);
  if (!dec.ok()) return Refused("Admit", d.attempt, dec.status());
  Observe(now, *dec);
  return Follow(now, id, *dec);
}

absl::Status CoordinatedDriver::AdmitWaiting(int64_t now, int id,
                                             absl::Duration wait) {
  Delivery& d = f_.delivery(id);
  const engine::AdmitInput in = AdmitFor(id, wait);
  if (leases_ != nullptr && d.attempt == 1) {
    if (std::optional<engine::Decision> local =
            leases_->Admit(AgentOf(id), in)) {
      return FollowWaiting(now, id, *local);
    }
  }
  PolicyResult& r = f_.result();
  ++r.admits;
  ++r.waiting_admits;
  engine::WaitState w;
  w.since = f_.clock().Now();
  w.until = w.since + wait;
  absl::StatusOr<engine::WaitOutcome> o =
      engine_->AdmitWaiting(in, &w, engine::WaitStep::kArrive);
  if (!o.ok()) return Refused("AdmitWaiting", d.attempt, o.status());
  if (o->answer.has_value()) return FollowWaiting(now, id, *o->answer);
  ++r.held;
  absl::Status st = room_->Hold(id, d.endpoint, in, w, o->recheck);
  r.peak_held = std::max(r.peak_held, room_->waiting());
  return st;
}

absl::Status CoordinatedDriver::ReportSuccess(int64_t now, int id) {
  const Delivery& d = f_.delivery(id);
  const engine::ReportInput in = ReportFor(id);
  if (leases_ != nullptr && leases_->Report(AgentOf(id), in).has_value()) {
    return absl::OkStatus();  // DONE, answered by the agent
  }
  ++f_.result().reports;
  absl::StatusOr<engine::Decision> dec = engine_->Report(in);
  if (!dec.ok()) return Refused("Report", d.attempt, dec.status());
  Observe(now, *dec);
  if (room_ != nullptr) {
    room_->NoteSuccess(d.endpoint);
    room_->Wake(d.endpoint);
  }
  if (dec->verdict != engine::Verdict::kDone) {
    return absl::InternalError(absl::StrCat(
        "engine answered a success with ", engine::VerdictName(dec->verdict)));
  }
  return absl::OkStatus();
}

absl::Status CoordinatedDriver::ReportFailure(int64_t now, int id) {
  const Delivery& d = f_.delivery(id);
  const engine::ReportInput in = ReportFor(id);
  ++f_.result().reports;
  absl::StatusOr<engine::Decision> dec = engine_->Report(in);
  if (!dec.ok()) return Refused("Report", d.attempt, dec.status());
  Observe(now, *dec);
  // As staggerd after a failure Report: the waiting calls look again (the
  // lease replica heard of the endpoint's condition from the engine).
  if (room_ != nullptr) {
    if (in.retry_after.has_value()) room_->NoteRetryAfter(d.endpoint);
    room_->Wake(d.endpoint);
  }
  return Follow(now, id, *dec);
}

// --- What the client does with an answer -------------------------------------

absl::Status CoordinatedDriver::Follow(int64_t now, int id,
                                       const engine::Decision& dec) {
  Delivery& d = f_.delivery(id);
  switch (dec.verdict) {
    case engine::Verdict::kProceed: {
      if (dec.attempt == d.attempt) {  // Admit: send after the delay
        d.admission = dec.admission;
        f_.Push(now + std::max<int64_t>(0, Ns(dec.delay)), id,
                EventType::kSend);
        return absl::OkStatus();
      }
      d.attempt = dec.attempt;  // Report: the next attempt, after the delay
      if (room_ != nullptr && WaitableDelay(dec)) {
        return WaitWithoutWorker(now, id, std::min(dec.delay, engine::kMaxWait));
      }
      f_.Push(now + std::max<int64_t>(0, Ns(dec.delay)), id, EventType::kAdmit);
      return absl::OkStatus();
    }
    case engine::Verdict::kDefer:
      return Park(now, id, dec);
    case engine::Verdict::kGiveUp:
      f_.GiveUp(now, id, dec.reason);
      return absl::OkStatus();
    case engine::Verdict::kDone:
      break;
  }
  return absl::InternalError("engine answered DONE to a non-success");
}

absl::Status CoordinatedDriver::Park(int64_t now, int id,
                                     const engine::Decision& dec) {
  Delivery& d = f_.delivery(id);
  const absl::Duration defer_for = dec.defer_until - f_.clock().Now();
  if (defer_for < absl::ZeroDuration()) {
    return absl::InternalError(absl::StrCat(
        "engine deferred into the past (", ReasonName(dec.reason), ")"));
  }
  d.attempt = dec.attempt;  // unchanged on Admit; the next on Report
  if (room_ != nullptr && defer_for > absl::ZeroDuration()) {
    return WaitWithoutWorker(now, id, std::min(defer_for, engine::kMaxWait));
  }
  f_.Push(VirtualNs(dec.defer_until), id, EventType::kReady);
  f_.FreeWorker(now, id);
  return absl::OkStatus();
}

absl::Status CoordinatedDriver::WaitWithoutWorker(int64_t now, int id,
                                                  absl::Duration wait) {
  f_.ReleaseWorker(now, id);
  absl::Status st = AdmitWaiting(now, id, wait);
  f_.Dispatch(now);
  return st;
}

absl::Status CoordinatedDriver::FollowWaiting(int64_t now, int id,
                                              const engine::Decision& dec) {
  Delivery& d = f_.delivery(id);
  Observe(now, dec);
  switch (dec.verdict) {
    case engine::Verdict::kProceed:
      d.admission = dec.admission;
      d.admitted = true;
      d.send_delay_ns = std::max<int64_t>(0, Ns(dec.delay));
      f_.QueueForWorker(now, id, /*front=*/true);
      return absl::OkStatus();
    case engine::Verdict::kDefer: {
      const absl::Duration defer_for = dec.defer_until - f_.clock().Now();
      if (defer_for > absl::ZeroDuration()) {
        return AdmitWaiting(now, id, std::min(defer_for, engine::kMaxWait));
      }
      f_.Push(now, id, EventType::kReady);
      return absl::OkStatus();
    }
    case engine::Verdict::kGiveUp:
      f_.GiveUp(now, id, dec.reason, /*holds_worker=*/false);
      return absl::OkStatus();
    case engine::Verdict::kDone:
      break;
  }
  return absl::InternalError("engine answered DONE to a waiting Admit");
}

void CoordinatedDriver::Observe(int64_t now, const engine::Decision& d) {
  PolicyResult& r = f_.result();
  if (d.verdict == engine::Verdict::kDefer) {
    ++r.deferrals;
    ++r.deferred_by_reason[static_cast<int>(d.reason)];
  }
  for (int i = 0; i < d.num_transitions; ++i) {
    const engine::BreakerTransition& t = d.transitions[i];
    if (t.from == engine::BreakerState::kClosed &&
        t.to == engine::BreakerState::kOpen) {
      ++r.trips;
      if (!r.first_trip_s) r.first_trip_s = now / 1e9;
    }
  }
  if (d.verdict == engine::Verdict::kProceed &&
      d.reason == engine::Reason::kHalfOpenProbe && r.first_trip_s &&
      !r.first_probe_s) {
    r.first_probe_s = now / 1e9;
  }
}

}  // namespace stagger::sim
