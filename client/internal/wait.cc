#include "client/wait.h"

namespace stagger::client {

void Canceller::Cancel() {
  absl::MutexLock l(&mu_);
  cancelled_ = true;  // every AwaitWithTimeout re-evaluates on unlock
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
