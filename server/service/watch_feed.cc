#include "server/service/watch_feed.h"

#include <utility>

#include "server/service/watch_events.h"

namespace stagger::service {

void WatchFeed::OnConditionChange(const engine::ConditionChange& c) {
  for (v1::WatchEvent& e : EventsOf(c)) log_->Append(std::move(e));
}

void WatchFeed::OnPause(const engine::Pause& p, bool removed) {
  log_->Append(
      PauseEvent(p, removed ? PauseChange::kResumed : PauseChange::kPaused));
}

void WatchFeed::OnPauseRanOut(const engine::Pause& p) {
  log_->Append(PauseEvent(p, PauseChange::kRanOut));
}

}  // namespace stagger::service
