#include "client/wait.h"

#include <utility>

namespace stagger::client {

void Canceller::Cancel() {
  absl::MutexLock l(&mu_);
  if (cancelled_) return;
  cancelled_ = true;  // every AwaitWithTimeout re-evaluates on unlock
  while (!on_cancel_.empty()) {
    auto it = on_cancel_.begin();
    std::function<void()> fn = std::move(it->second);
    running_ = it->first;
    on_cancel_.erase(it);
    mu_.Unlock();
    fn();
    mu_.Lock();
    running_ = 0;
  }
}

Canceller::Subscription Canceller::OnCancel(std::function<void()> fn) const {
  {
    absl::MutexLock l(&mu_);
    if (!cancelled_) {
      const uint64_t id = next_id_++;
      on_cancel_.emplace(id, std::move(fn));
      return Subscription(this, id);
    }
  }
  fn();
  return Subscription();
}

void Canceller::Subscription::Reset() {
  if (owner_ == nullptr) return;
  absl::MutexLock l(&owner_->mu_);
  owner_->on_cancel_.erase(id_);
  // A callback running now on Cancel()'s thread may use what the
  // subscriber is about to destroy: wait for it to end.
  std::pair<const Canceller*, uint64_t> mine(owner_, id_);
  owner_->mu_.Await(absl::Condition(
      +[](std::pair<const Canceller*, uint64_t>* p) {
        return p->first->running_ != p->second;
      },
      &mine));
  owner_ = nullptr;
}

bool Canceller::cancelled() const {
  absl::MutexLock l(&mu_);
  return cancelled_;
}

bool Canceller::WaitFor(absl::Duration timeout) const {
  absl::MutexLock l(&mu_);
  if (cancelled_) return false;
  if (timeout <= absl::ZeroDuration()) return true;
  // AwaitWithTimeout returns true iff the condition (cancelled) held when it
  // returned; it re-checks the condition after the timeout, so a Cancel()
  // racing with the timeout is reported as a cancellation.
  return !mu_.AwaitWithTimeout(absl::Condition(&cancelled_), timeout);
}

bool Canceller::WaitUntil(absl::Time deadline) const {
  absl::MutexLock l(&mu_);
  if (cancelled_) return false;
  if (deadline <= absl::Now()) return true;
  return !mu_.AwaitWithDeadline(absl::Condition(&cancelled_), deadline);
}

bool WaitFor(absl::Duration timeout, const Canceller& canceller) {
  return canceller.WaitFor(timeout);
}

}  // namespace stagger::client
