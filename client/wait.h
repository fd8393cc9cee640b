// Cancellable waits for delivery workers.
//
// A Canceller is a one-way latch shared by every wait that a single event
// should interrupt (process shutdown, a breaker trip the worker learned of,
// the end of a test). Cancel() wakes every waiter at once; waits that start
// after Cancel() return immediately. There is no polling: waiters block on
// the Canceller's absl::Mutex with absl::Mutex::AwaitWithTimeout.
//
// Waits use the real (monotonic-enough) time of absl::Mutex, not an injected
// engine::Clock: they are how a worker actually sleeps. Code that must be
// tested without sleeping (RetryLoop) takes the wait as an injectable
// function whose default is WaitFor below.
//
// Thread-safe: Cancel(), cancelled() and the waits may be called from any
// thread, concurrently.
#ifndef STAGGER_CLIENT_WAIT_H_
#define STAGGER_CLIENT_WAIT_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stagger::client {

class Canceller {
 public:
  Canceller() = default;
  Canceller(const Canceller&) = delete;
  Canceller& operator=(const Canceller&) = delete;

  // Latches the cancelled state and wakes every current waiter. Idempotent;
  // there is no way back (make a new Canceller).
  void Cancel();
  bool cancelled() const;

  // Blocks for up to `timeout` (<= 0: does not block) or until Cancel().
  // Returns true if the whole timeout elapsed without cancellation, false
  // if cancelled (also when already cancelled on entry).
  bool WaitFor(absl::Duration timeout) const;
  // As WaitFor, until the real-time instant `deadline`.
  bool WaitUntil(absl::Time deadline) const;

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// Free-function form: canceller.WaitFor(timeout). True if the wait ran its
// full course, false if cancelled.
bool WaitFor(absl::Duration timeout, const Canceller& canceller);

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_WAIT_H_
