#include "server/service/condition_refresher.h"

#include <algorithm>
#include <vector>

namespace stagger::service {

ConditionRefresher::ConditionRefresher(engine::Engine* engine,
                                       const engine::Clock* clock,
                                       PauseRanOut ran_out)
    : engine_(engine), clock_(clock), ran_out_(std::move(ran_out)) {}

ConditionRefresher::~ConditionRefresher() { Stop(); }

absl::Time ConditionRefresher::DueOf(const engine::ConditionChange& c,
                                     absl::Time now) {
  const engine::EndpointCondition& to = c.to;
  absl::Time due = absl::InfiniteFuture();
  if (to.breaker == engine::BreakerState::kOpen) {
    due = std::min(due, c.open_until);
  }
  if (to.retry_after) due = std::min(due, c.retry_after_until);
  if (to.releasing || to.near_trip) due = std::min(due, now + kPoll);
  if (to.breaker == engine::BreakerState::kHalfOpen && !to.disabled) {
    due = std::min(due, now + kSlowPoll);
  }
  return due;
}

void ConditionRefresher::Schedule(const std::string& key, absl::Time due,
                                  engine::EndpointCondition condition) {
  Unschedule(key);
  if (due == absl::InfiniteFuture()) return;
  entries_[key] = Entry{due, condition};
  due_.emplace(due, key);
}

void ConditionRefresher::Unschedule(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  due_.erase({it->second.due, key});
  entries_.erase(it);
}

void ConditionRefresher::OnConditionChange(const engine::ConditionChange& c) {
  const std::string key(c.endpoint);
  absl::MutexLock l(&mu_);
  Schedule(key, DueOf(c, c.at), c.to);
}

void ConditionRefresher::OnPause(const engine::Pause& p, bool removed) {
  absl::MutexLock l(&mu_);
  if (removed) {
    pauses_.erase({p.prefix, p.target});
  } else {
    pauses_[{p.prefix, p.target}] = p;
  }
}

int ConditionRefresher::RunOnce() {
  const absl::Time now = clock_->Now();
  std::vector<std::string> keys;
  std::vector<engine::Pause> ended;
  {
    absl::MutexLock l(&mu_);
    while (!due_.empty() && due_.begin()->first <= now &&
           keys.size() < static_cast<size_t>(kMaxPerRound)) {
      const std::string key = due_.begin()->second;
      const engine::EndpointCondition c = entries_[key].condition;
      // Looked at again later unless the refresh reports a change (which
      // schedules it anew).
      const bool fast = c.releasing || c.near_trip;
      Schedule(key, now + (fast ? kPoll : kSlowPoll), c);
      keys.push_back(key);
    }
    for (auto it = pauses_.begin(); it != pauses_.end();) {
      if (it->second.until <= now) {
        ended.push_back(std::move(it->second));
        pauses_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const std::string& key : keys) engine_->RefreshCondition(key);
  if (ran_out_) {
    for (const engine::Pause& p : ended) ran_out_(p);
  }
  return static_cast<int>(keys.size());
}

void ConditionRefresher::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(kPeriod)) RunOnce();
  });
}

void ConditionRefresher::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

size_t ConditionRefresher::endpoints() const {
  absl::MutexLock l(&mu_);
  return entries_.size();
}

size_t ConditionRefresher::pauses() const {
  absl::MutexLock l(&mu_);
  return pauses_.size();
}

}  // namespace stagger::service
