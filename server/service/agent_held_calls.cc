#include "server/service/agent_held_calls.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/lease/planted.h"
#include "core/wire/wire.h"

namespace stagger::service {

// One entry: an agent's call, as the room sees it. Ends (deleted) by
// Answer or Cancelled, each reporting to its owner first.
class AgentHeldCall final : public HeldCall {
 public:
  AgentHeldCall(std::shared_ptr<AgentHeldCalls> owner, uint64_t id,
                v1::AdmitRequest request, engine::AdmitInput in,
                engine::WaitState w)
      : HeldCall(std::move(request), in, w), owner_(std::move(owner)), id_(id) {}
  uint64_t id() const { return id_; }
  void MarkGone() { gone_.store(true, std::memory_order_release); }

  bool cancelled() const override {
    return gone_.load(std::memory_order_acquire);
  }
  bool for_agent() const override { return true; }
  absl::string_view agent() const override { return owner_->agent(); }
  void Answer(const engine::Decision& d, absl::Time now) override {
    owner_->Answered(this, d, now);
    delete this;
  }
  void Cancelled() override {
    owner_->Forget(this);
    delete this;
  }

 private:
  const std::shared_ptr<AgentHeldCalls> owner_;
  const uint64_t id_;
  std::atomic<bool> gone_{false};
};

std::shared_ptr<AgentHeldCalls> AgentHeldCalls::Make(
    engine::Engine* engine, WaitRoom* room, const engine::Clock* clock,
    WaitRoom::Answered answered, Send send, std::string agent) {
  return std::shared_ptr<AgentHeldCalls>(
      new AgentHeldCalls(engine, room, clock, std::move(answered),
                         std::move(send), std::move(agent)));
}

AgentHeldCalls::AgentHeldCalls(engine::Engine* engine, WaitRoom* room,
                               const engine::Clock* clock,
                               WaitRoom::Answered answered, Send send,
                               std::string agent)
    : engine_(engine),
      room_(room),
      clock_(clock),
      answered_(std::move(answered)),
      agent_(std::move(agent)),
      send_(std::move(send)) {}

AgentHeldCalls::~AgentHeldCalls() { Close(); }

size_t AgentHeldCalls::held() const {
  absl::MutexLock l(&mu_);
  return held_.size();
}

void AgentHeldCalls::SendDecision(uint64_t id, absl::string_view endpoint,
                                  const engine::Decision& d, absl::Time now) {
  if (!send_) return;
  if (answered_) answered_(d);
  v1::HeldAnswer a;
  a.set_id(id);
  v1::Decision* out = a.mutable_response()->mutable_decision();
  wire::ToProto(d, now, out);
  out->set_wait_supported(room_ != nullptr);
  send_(std::move(a), endpoint);
}

void AgentHeldCalls::SendError(uint64_t id, const absl::Status& status) {
  if (!send_) return;
  v1::HeldAnswer a;
  a.set_id(id);
  a.set_code(static_cast<int32_t>(status.code()));
  a.set_message(std::string(status.message()));
  send_(std::move(a), "");
}

absl::Status AgentHeldCalls::Hold(const v1::HeldAdmit& h) {
  if (h.id() == 0) return absl::InvalidArgumentError("holds.id: must not be 0");
  absl::MutexLock l(&mu_);
  if (held_.contains(h.id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("holds.id: ", h.id(), " is already held"));
  }
  if (!send_) return absl::OkStatus();  // closed: the stream is ending
  absl::StatusOr<engine::AdmitInput> in = wire::FromProto(h.request());
  if (in.ok() && in->wait <= absl::ZeroDuration()) {
    in = absl::InvalidArgumentError("wait: must be > 0 for a held call");
  }
  // A bad request gets the error its Admit would get from staggerd
  // ("endpoint: ..."): the worker sees it as that Admit's answer.
  const auto bad = [&](const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    SendError(h.id(), s);
    return absl::OkStatus();
  };
  if (!in.ok()) return bad(in.status());
  const absl::Time now = clock_->Now();
  if (room_ == nullptr || !room_->HasRoom(/*for_agent=*/true, agent_)) {
    absl::StatusOr<engine::Decision> d = engine_->Admit(*in);
    if (!d.ok()) return bad(d.status());
    SendDecision(h.id(), h.request().endpoint(), *d, now);
    return absl::OkStatus();
  }
  engine::WaitState w;
  w.since = now;
  w.until = now + in->wait;
  absl::StatusOr<engine::WaitOutcome> o =
      engine_->AdmitWaiting(*in, &w, engine::WaitStep::kArrive);
  if (!o.ok()) return bad(o.status());
  auto* call = new AgentHeldCall(shared_from_this(), h.id(), h.request(), *in, w);
  held_[h.id()] = call;
  if (!o->answer.has_value() && room_->Hold(call, o->recheck)) {
    return absl::OkStatus();
  }
  // Answered now: by the engine's arrival step, or as an Admit at once if
  // the room would not take it.
  absl::StatusOr<engine::WaitOutcome> now_answer =
      o->answer.has_value()
          ? o
          : engine_->AdmitWaiting(call->in(), &call->wait(),
                                  engine::WaitStep::kExpire);
  held_.erase(h.id());
  if (now_answer.ok() && now_answer->answer.has_value()) {
    SendDecision(h.id(), h.request().endpoint(), *now_answer->answer,
                 clock_->Now());
  } else {
    SendError(h.id(), now_answer.ok() ? absl::InternalError("no answer")
                                      : now_answer.status());
  }
  delete call;
  return absl::OkStatus();
}

void AgentHeldCalls::Drop(uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = held_.find(id);
  if (it == held_.end()) return;  // answered already: the agent returns it
  AgentHeldCall* call = it->second;
  if (room_ != nullptr && room_->Cancel(call)) {
    held_.erase(it);
    SendError(id, absl::CancelledError("dropped"));
    delete call;
    return;
  }
  call->MarkGone();  // an answer is on its way: Cancelled() ends it
}

void AgentHeldCalls::Return(absl::string_view endpoint, uint64_t admission) {
  engine_->ReturnProbe(endpoint, admission);
  if (room_ != nullptr) room_->Wake(endpoint);
}

void AgentHeldCalls::Unsent(const v1::HeldAnswer& answer,
                            absl::string_view endpoint) {
  // Planted (issue 27, item 1): the answer is thrown away, probe and all.
  if (lease::Planted().drop_answers_at_stream_end) return;
  const v1::Decision& d = answer.response().decision();
  if (answer.code() != 0 || d.verdict() != v1::PROCEED ||
      (d.admission() & engine::kProbeAdmissionBit) == 0) {
    return;
  }
  Return(endpoint, d.admission());
}

void AgentHeldCalls::Close() {
  absl::MutexLock l(&mu_);
  if (!send_) return;
  send_ = nullptr;
  for (auto it = held_.begin(); it != held_.end();) {
    AgentHeldCall* call = it->second;
    if (room_ != nullptr && room_->Cancel(call)) {
      held_.erase(it++);
      delete call;
    } else {
      call->MarkGone();
      ++it;
    }
  }
}

void AgentHeldCalls::Answered(AgentHeldCall* call, const engine::Decision& d,
                              absl::Time now) {
  absl::MutexLock l(&mu_);
  held_.erase(call->id());
  if (send_) {
    SendDecision(call->id(), call->in().endpoint, d, now);
  } else if (d.reason == engine::Reason::kHalfOpenProbe) {
    // Closed meanwhile: nobody will use it.
    engine_->ReturnProbe(call->in().endpoint, d.admission);
    if (room_ != nullptr) room_->Wake(call->in().endpoint);
  }
}

void AgentHeldCalls::Forget(AgentHeldCall* call) {
  absl::MutexLock l(&mu_);
  held_.erase(call->id());
  SendError(call->id(), absl::CancelledError("dropped"));
}

}  // namespace stagger::service
