#include "server/service/wait_room.h"

#include <algorithm>

#include "core/wire/wire.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace stagger::service {

HeldCall::HeldCall(v1::AdmitRequest request, engine::AdmitInput in,
                   engine::WaitState w)
    : request_(std::move(request)), in_(in), w_(w) {
  in_.endpoint = request_.endpoint();  // borrow our own copy
}

WaitingCall::WaitingCall(WaitRoom* room, grpc::CallbackServerContext* ctx,
                         grpc::ByteBuffer* resp, v1::AdmitRequest request,
                         engine::AdmitInput in, engine::WaitState w)
    : HeldCall(std::move(request), in, w),
      room_(room),
      ctx_(ctx),
      resp_(resp) {}

void WaitingCall::Answer(const engine::Decision& d, absl::Time now) {
  v1::AdmitResponse response;
  wire::ToProto(d, now, response.mutable_decision());
  response.mutable_decision()->set_wait_supported(true);
  bool own_buffer = false;
  Finish(grpc::SerializationTraits<v1::AdmitResponse>::Serialize(
      response, resp_, &own_buffer));
}

void WaitingCall::Cancelled() {
  Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
}

void WaitingCall::OnCancel() {
  if (room_->Cancel(this)) Cancelled();
}

WaitRoom::WaitRoom(engine::Engine* engine, const engine::Clock* clock,
                   Options options, Answered answered,
                   metrics::ServerMetrics* metrics)
    : engine_(engine),
      clock_(clock),
      options_(options),
      answered_(std::move(answered)),
      metrics_(metrics) {
  if (options_.driver == Driver::kOwnThread) {
    thread_ = std::thread([this] { Run(); });
  }
}

WaitRoom::~WaitRoom() { Shutdown(); }

bool WaitRoom::HasRoom(bool for_agent, absl::string_view agent) {
  const int64_t agents = held_for_agents();
  bool room =
      for_agent ? agents < static_cast<int64_t>(options_.max_agent_held)
                : waiting() - agents < static_cast<int64_t>(options_.max_waiting);
  if (room && for_agent && !agent.empty()) {
    room = held_for(agent) < static_cast<int64_t>(AgentShare());
  }
  if (!room) CountOverflow();
  return room;
}

int64_t WaitRoom::held_for(absl::string_view agent) {
  absl::MutexLock l(&mu_);
  auto it = by_agent_.find(agent);
  return it == by_agent_.end() ? 0 : it->second;
}

bool WaitRoom::Fits(const HeldCall& call) {
  const size_t agents = static_cast<size_t>(held_for_agents());
  if (!call.for_agent()) return where_.size() - agents < options_.max_waiting;
  if (agents >= options_.max_agent_held) return false;
  if (call.agent().empty()) return true;
  auto it = by_agent_.find(call.agent());
  return it == by_agent_.end() ||
         static_cast<size_t>(it->second) < AgentShare();
}

void WaitRoom::CountOverflow() {
  overflows_.fetch_add(1, std::memory_order_relaxed);
  if (metrics_ != nullptr) metrics_->RecordWaitingOverflow();
}

bool WaitRoom::Hold(HeldCall* call, absl::Time recheck) {
  absl::MutexLock l(&mu_);
  if (stop_) return false;  // shutting down: answered now, no overflow
  if (!Fits(*call)) {
    CountOverflow();
    return false;
  }
  if (call->for_agent()) agent_held_.fetch_add(1, std::memory_order_relaxed);
  if (!call->agent().empty()) ++by_agent_[call->agent()];
  std::string key(call->in().endpoint);
  Line& line = lines_[key];
  const engine::WaitState& w = call->wait();
  line.calls.Add(call, {call->in().deadline, w.since, w.until, w.backoff});
  where_[call] = key;
  const int64_t n = waiting_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (metrics_ != nullptr) metrics_->SetWaitingCalls(n);
  Schedule(key, line, std::min(recheck, call->expiry()));
  return true;
}

void WaitRoom::Remove(Line& line, HeldCall* call) {
  auto it = where_.find(call);
  if (it == where_.end()) return;
  line.calls.Remove(call);
  where_.erase(it);
  if (call->for_agent()) agent_held_.fetch_sub(1, std::memory_order_relaxed);
  if (!call->agent().empty()) {
    auto a = by_agent_.find(call->agent());
    if (a != by_agent_.end() && --a->second <= 0) by_agent_.erase(a);
  }
  const int64_t n = waiting_.fetch_sub(1, std::memory_order_relaxed) - 1;
  if (metrics_ != nullptr) metrics_->SetWaitingCalls(n);
}

void WaitRoom::Schedule(const std::string& key, Line& line, absl::Time at) {
  if (at >= line.next_look) return;
  line.next_look = at;
  timers_.push({at, key});
}

void WaitRoom::Wake(absl::string_view endpoint) {
  if (waiting() == 0) return;
  absl::MutexLock l(&mu_);
  auto it = lines_.find(endpoint);
  if (it == lines_.end()) return;
  poked_ = true;
  Schedule(it->first, it->second, clock_->Now());
}

void WaitRoom::WakeIf(const std::function<bool(absl::string_view)>& match) {
  if (waiting() == 0) return;
  absl::MutexLock l(&mu_);
  const absl::Time now = clock_->Now();
  for (auto& [key, line] : lines_) {
    if (match(key)) Schedule(key, line, now);
  }
  poked_ = true;
}

bool WaitRoom::Cancel(HeldCall* call) {
  absl::MutexLock l(&mu_);
  auto it = where_.find(call);
  if (it == where_.end()) return false;  // already answered: that answer stands
  Remove(lines_[it->second], call);
  return true;
}

void WaitRoom::DropStale() {
  while (!timers_.empty()) {
    const Timer& t = timers_.top();
    auto it = lines_.find(t.second);
    if (it != lines_.end() && it->second.next_look == t.first) return;
    timers_.pop();
  }
}

std::optional<std::string> WaitRoom::TakeDue(absl::Time now) {
  DropStale();
  if (timers_.empty() || timers_.top().first > now) return std::nullopt;
  std::string key = timers_.top().second;
  timers_.pop();
  return key;
}

void WaitRoom::Run() {
  absl::MutexLock l(&mu_);
  while (!stop_) {
    if (std::optional<std::string> key = TakeDue(clock_->Now())) {
      mu_.Unlock();
      Look(*key);
      mu_.Lock();
      continue;
    }
    const absl::Time next =
        timers_.empty() ? absl::InfiniteFuture() : timers_.top().first;
    // Sleeps until the first timer, or until an earlier one (or the stop)
    // arrives. The sleep is measured on `clock_` (a test's fake clock too:
    // a test that moves it on wakes the line it means).
    const auto woken = [this, next]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || poked_ ||
             (!timers_.empty() && timers_.top().first < next);
    };
    mu_.AwaitWithTimeout(absl::Condition(&woken), next - clock_->Now());
    poked_ = false;
  }
}

absl::Time WaitRoom::NextDue() {
  absl::MutexLock l(&mu_);
  DropStale();
  return timers_.empty() ? absl::InfiniteFuture() : timers_.top().first;
}

void WaitRoom::RunDue() {
  const absl::Time now = clock_->Now();
  while (true) {
    std::optional<std::string> key;
    {
      absl::MutexLock l(&mu_);
      if (stop_) return;
      key = TakeDue(now);
    }
    if (!key.has_value()) return;
    Look(*key);
  }
}

void WaitRoom::Look(const std::string& key) {
  std::vector<Answer> answers;
  {
    absl::MutexLock l(&mu_);
    auto it = lines_.find(key);
    if (it == lines_.end()) return;
    Line& line = it->second;
    line.next_look = absl::InfiniteFuture();
    Expire(line, clock_->Now(), &answers);
    absl::Time next = Release(key, line, &answers);
    if (line.calls.empty()) {
      lines_.erase(it);
    } else {
      next = std::min(next, line.calls.next_expiry());
      Schedule(key, line, next);
    }
    looks_.fetch_add(1, std::memory_order_release);  // after its calls
  }
  Deliver(std::move(answers));
}

absl::StatusOr<engine::WaitOutcome> WaitRoom::Step(HeldCall* call,
                                                   engine::WaitStep step) {
  engine_calls_.fetch_add(1, std::memory_order_relaxed);
  return engine_->AdmitWaiting(call->in(), &call->wait(), step);
}

void WaitRoom::Expire(Line& line, absl::Time now, std::vector<Answer>* out) {
  while (line.calls.next_expiry() <= now) {
    HeldCall* call = line.calls.FirstToExpire();
    absl::StatusOr<engine::WaitOutcome> o =
        Step(call, engine::WaitStep::kExpire);
    Remove(line, call);
    if (o.ok() && o->answer.has_value()) out->push_back({call, *o->answer});
  }
}

// Backoff waiters with evidence since they arrived join the line first;
// then the line goes from its head until the gates hold a call.
absl::Time WaitRoom::Release(const std::string& key, Line& line,
                             std::vector<Answer>* out) {
  if (line.calls.in_backoff() > 0) {
    engine_calls_.fetch_add(1, std::memory_order_relaxed);
    line.calls.TakeEvidence(engine_->LastEvidence(key));
  }
  absl::Time next = absl::InfiniteFuture();
  for (HeldCall* call = line.calls.FirstGated(); call != nullptr;) {
    HeldCall* const after = line.calls.GatedAfter(call);
    absl::StatusOr<engine::WaitOutcome> o =
        Step(call, engine::WaitStep::kRecheck);
    if (o.ok() && o->answer.has_value()) {
      Remove(line, call);
      out->push_back({call, *o->answer});
    } else if (o.ok()) {
      next = std::min(next, o->recheck);
      if (o->gated) break;  // the endpoint holds the rest of the line too
      line.calls.MoveToBackoff(call);  // the evidence went away
    }
    call = after;
  }
  return next;
}

void WaitRoom::Deliver(std::vector<Answer> answers) {
  const absl::Time now = clock_->Now();
  for (Answer& a : answers) {
    if (a.call->cancelled()) {
      // Gone before its answer: a probe goes back for the next call.
      if (a.decision.reason == engine::Reason::kHalfOpenProbe) {
        engine_->ReturnProbe(a.call->in().endpoint, a.decision.admission);
        Wake(a.call->in().endpoint);
      }
      a.call->Cancelled();
      continue;
    }
    if (answered_) answered_(a.decision);
    a.call->Answer(a.decision, now);
  }
}

void WaitRoom::Shutdown() {
  std::vector<Answer> answers;
  {
    absl::MutexLock l(&mu_);
    if (stop_) return;
    stop_ = true;
    const absl::Time now = clock_->Now();
    for (auto& [key, line] : lines_) {
      while (!line.calls.empty()) {
        HeldCall* call = line.calls.FirstToExpire();
        Remove(line, call);  // before its expiry (part of the key) changes
        call->wait().until = now;
        absl::StatusOr<engine::WaitOutcome> o =
            Step(call, engine::WaitStep::kExpire);
        if (o.ok() && o->answer.has_value()) answers.push_back({call, *o->answer});
      }
    }
    lines_.clear();
  }
  if (thread_.joinable()) thread_.join();
  Deliver(std::move(answers));
}

}  // namespace stagger::service
