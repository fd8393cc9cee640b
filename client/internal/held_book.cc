#include "client/internal/held_book.h"

#include <algorithm>

#include "core/lease/planted.h"

namespace stagger::client {

HeldNext NextStep(const absl::StatusOr<v1::AdmitResponse>& result) {
  if (result.ok()) return HeldNext::kFollow;
  switch (result.status().code()) {
    case absl::StatusCode::kDeadlineExceeded:
      return HeldNext::kFallback;
    case absl::StatusCode::kUnavailable:
      return HeldNext::kResend;
    default:
      return HeldNext::kFail;
  }
}

uint64_t HeldBook::Hold(v1::AdmitRequest request, absl::Duration wait,
                        absl::Time now, absl::Time answer_by, Done done) {
  const uint64_t id = next_id_++;
  const absl::Time give_up = std::min(now + wait + kHeldGrace, answer_by);
  held_[id] = Held{std::move(request), std::move(done), give_up, false};
  give_ups_.insert({give_up, id});
  holds_out_.push_back(id);
  return id;
}

HeldBook::Held HeldBook::Take(uint64_t id) {
  auto it = held_.find(id);
  Held h = std::move(it->second);
  held_.erase(it);
  give_ups_.erase({h.give_up, id});
  if (h.sent) {
    drops_out_.push_back(id);
    dropped_[id] = h.request.endpoint();
  }
  return h;
}

void HeldBook::Drop(uint64_t id) {
  if (held_.count(id) == 0) return;  // answered already
  finished_.push_back(
      {Take(id).done, absl::CancelledError("cancelled while waiting")});
}

void HeldBook::GiveUp(absl::Time now) {
  while (!give_ups_.empty() && give_ups_.begin()->first <= now) {
    finished_.push_back(
        {Take(give_ups_.begin()->second).done,
         absl::DeadlineExceededError(
             "the coordinator did not answer a held call in time")});
  }
}

absl::Time HeldBook::NextGiveUp() const {
  return give_ups_.empty() ? absl::InfiniteFuture()
                           : give_ups_.begin()->first;
}

void HeldBook::Answer(const v1::HeldAnswer& a) {
  if (auto it = held_.find(a.id()); it != held_.end()) {
    Held h = std::move(it->second);
    held_.erase(it);
    give_ups_.erase({h.give_up, a.id()});
    absl::StatusOr<v1::AdmitResponse> result =
        a.code() == 0 ? absl::StatusOr<v1::AdmitResponse>(a.response())
                      : absl::Status(static_cast<absl::StatusCode>(a.code()),
                                     a.message());
    finished_.push_back({std::move(h.done), std::move(result)});
    return;
  }
  auto d = dropped_.find(a.id());
  if (d == dropped_.end()) return;
  const v1::Decision& decision = a.response().decision();
  if (a.code() == 0 && decision.verdict() == v1::PROCEED &&
      decision.admission() != 0) {
    v1::ReturnedRelease r;
    r.set_endpoint(d->second);
    r.set_admission(decision.admission());
    returns_out_.push_back(std::move(r));
  }
  dropped_.erase(d);
}

void HeldBook::EndAll(const absl::Status& status) {
  for (auto& [id, h] : held_) finished_.push_back({std::move(h.done), status});
  held_.clear();
  give_ups_.clear();
  holds_out_.clear();
  drops_out_.clear();
  returns_out_.clear();
  dropped_.clear();
}

void HeldBook::EndAllLeft() {
  // Planted (issue 27, item 3): the calls are cancelled, not re-routed.
  if (lease::Planted().cancel_on_membership_change) {
    return EndAll(absl::CancelledError("the replica left the members"));
  }
  EndAll(absl::UnavailableError(
      "the lease stream to this replica closed (it left the members, or "
      "the client is closing)"));
}

bool HeldBook::FillUp(v1::SyncUp* up) {
  while (!holds_out_.empty() && up->holds_size() < kPerMessage) {
    const uint64_t id = holds_out_.front();
    holds_out_.pop_front();
    auto it = held_.find(id);
    if (it == held_.end()) continue;  // ended before it went
    it->second.sent = true;
    v1::HeldAdmit* h = up->add_holds();
    h->set_id(id);
    *h->mutable_request() = it->second.request;
  }
  while (!drops_out_.empty() && up->drops_size() < kPerMessage) {
    up->add_drops(drops_out_.back());
    drops_out_.pop_back();
  }
  while (!returns_out_.empty() && up->returns_size() < kPerMessage) {
    *up->add_returns() = std::move(returns_out_.back());
    returns_out_.pop_back();
  }
  return up->holds_size() > 0 || up->drops_size() > 0 ||
         up->returns_size() > 0;
}

std::vector<HeldBook::Finished> HeldBook::TakeFinished() {
  std::vector<Finished> out;
  out.swap(finished_);
  return out;
}

}  // namespace stagger::client
