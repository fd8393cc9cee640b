#include "bench/sim/wait_room_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/sim/fleet.h"

namespace stagger::sim {

WaitRoomModel::WaitRoomModel(engine::Engine* engine,
                             const engine::Clock* clock, int endpoints,
                             int calls, ScheduleLook schedule, Answer answer)
    : engine_(engine),
      clock_(clock),
      schedule_(std::move(schedule)),
      answer_(std::move(answer)),
      lines_(endpoints),
      calls_(calls),
      held_seq_(calls, 0) {}

absl::Status WaitRoomModel::Hold(int call, int endpoint,
                                 const engine::AdmitInput& in,
                                 const engine::WaitState& w,
                                 absl::Time recheck) {
  if (seq_ == UINT32_MAX) {
    return absl::ResourceExhaustedError("wait room: 2^32 calls held");
  }
  Call& c = calls_[call];
  c.in = in;
  c.w = w;
  c.endpoint = endpoint;
  held_seq_[call] = ++seq_;
  Line& line = lines_[endpoint];
  line.by_urgency.insert({CeilNs(in.deadline), seq_, call});
  line.by_expiry.push({CeilNs(w.until), seq_, call});
  ++line.held;
  ++waiting_;
  Schedule(endpoint, std::min(recheck, w.until));
  return absl::OkStatus();
}

void WaitRoomModel::Schedule(int endpoint, absl::Time at) {
  if (at == absl::InfiniteFuture()) return;
  // Rounded up: a look never comes before the instant it is for.
  const int64_t ns = CeilNs(at);
  Line& line = lines_[endpoint];
  if (ns >= line.next_look_ns) return;
  line.next_look_ns = ns;
  schedule_(ns, endpoint);
}

void WaitRoomModel::Wake(int endpoint) {
  if (lines_[endpoint].held > 0) {
    Schedule(endpoint, clock_->Now());
  }
}

void WaitRoomModel::NoteSuccess(int endpoint) {
  lines_[endpoint].success_ns = VirtualNs(clock_->Now());
}

void WaitRoomModel::NoteRetryAfter(int endpoint) {
  lines_[endpoint].retry_after = true;
}

bool WaitRoomModel::StillBackingOff(const Line& line, const Call& c) {
  return c.w.backoff && !line.retry_after &&
         line.success_ns <= VirtualNs(c.w.since);
}

void WaitRoomModel::Remove(Line& line, int call) {
  held_seq_[call] = 0;
  --line.held;
  --waiting_;
}

int64_t WaitRoomModel::NextExpiry(Line& line) {
  while (!line.by_expiry.empty() && !Current(line.by_expiry.top())) {
    line.by_expiry.pop();
  }
  return line.by_expiry.empty() ? kNever : line.by_expiry.top().order_ns;
}

absl::Status WaitRoomModel::Look(int endpoint, int64_t t_ns) {
  Line& line = lines_[endpoint];
  if (line.next_look_ns != t_ns) return absl::OkStatus();  // replaced
  line.next_look_ns = kNever;
  std::vector<Answered> answers;
  absl::Time next = absl::InfiniteFuture();
  absl::Status st = Expire(line, clock_->Now(), &answers);
  if (st.ok()) st = Release(line, &answers, &next);
  if (!st.ok()) return st;
  if (line.held > 0) {
    const int64_t expiry = NextExpiry(line);
    Schedule(endpoint, std::min(next, expiry == kNever
                                          ? absl::InfiniteFuture()
                                          : Epoch() + absl::Nanoseconds(expiry)));
  }
  for (const Answered& a : answers) {
    if (absl::Status s = answer_(a.call, a.decision, a.expired); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status WaitRoomModel::Expire(Line& line, absl::Time now,
                                   std::vector<Answered>* out) {
  const int64_t now_ns = VirtualNs(now);
  while (NextExpiry(line) <= now_ns) {
    const int call = line.by_expiry.top().call;
    line.by_expiry.pop();
    Call& c = calls_[call];
    absl::StatusOr<engine::WaitOutcome> o =
        engine_->AdmitWaiting(c.in, &c.w, engine::WaitStep::kExpire);
    Remove(line, call);
    if (!o.ok() || !o->answer.has_value()) {
      return absl::InternalError(absl::StrCat(
          "engine did not answer an expired wait: ",
          o.ok() ? "held it" : o.status().message()));
    }
    out->push_back({call, *o->answer, /*expired=*/true});
  }
  return absl::OkStatus();
}

absl::Status WaitRoomModel::Release(Line& line, std::vector<Answered>* out,
                                    absl::Time* next) {
  auto it = line.by_urgency.begin();
  while (it != line.by_urgency.end()) {
    const Entry e = *it;
    if (!Current(e)) {  // answered at its expiry
      it = line.by_urgency.erase(it);
      continue;
    }
    Call& c = calls_[e.call];
    if (StillBackingOff(line, c)) {
      *next = std::min(*next, c.w.until);
      ++it;
      continue;
    }
    absl::StatusOr<engine::WaitOutcome> o =
        engine_->AdmitWaiting(c.in, &c.w, engine::WaitStep::kRecheck);
    if (!o.ok()) {
      return absl::InternalError(absl::StrCat(
          "engine refused a waiting call's recheck: ", o.status().message()));
    }
    if (o->answer.has_value()) {
      Remove(line, e.call);
      out->push_back({e.call, *o->answer, /*expired=*/false});
      it = line.by_urgency.erase(it);
      continue;
    }
    *next = std::min(*next, o->recheck);
    if (o->gated) break;  // the endpoint holds the rest of the line too
    ++it;
  }
  return absl::OkStatus();
}

}  // namespace stagger::sim
