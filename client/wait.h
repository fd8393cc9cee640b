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

#include <cstdint>
#include <functional>
#include <map>

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

  // Runs `fn` once when Cancel() is called (at once, on this thread, if it
  // was already), until the returned subscription is destroyed: for waits
  // that are not a sleep (a waiting call to the coordinator, cancelled
  // through its context). `fn` runs on Cancel()'s thread, without the
  // Canceller's lock; it must not destroy its own subscription.
  class Subscription {
   public:
    Subscription() = default;
    Subscription(Subscription&& o) noexcept : owner_(o.owner_), id_(o.id_) {
      o.owner_ = nullptr;
    }
    Subscription& operator=(Subscription&& o) noexcept {
      if (this != &o) {
        Reset();
        owner_ = o.owner_;
        id_ = o.id_;
        o.owner_ = nullptr;
      }
      return *this;
    }
    ~Subscription() { Reset(); }
    // Unsubscribes now (waiting for the callback if it is running).
    void Reset();

   private:
    friend class Canceller;
    Subscription(const Canceller* owner, uint64_t id)
        : owner_(owner), id_(id) {}
    const Canceller* owner_ = nullptr;
    uint64_t id_ = 0;
  };
  Subscription OnCancel(std::function<void()> fn) const;

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  mutable uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  mutable std::map<uint64_t, std::function<void()>> on_cancel_
      ABSL_GUARDED_BY(mu_);
  // The subscription whose callback runs now (its destructor waits).
  mutable uint64_t running_ ABSL_GUARDED_BY(mu_) = 0;
};

// Free-function form: canceller.WaitFor(timeout). True if the wait ran its
// full course, false if cancelled.
bool WaitFor(absl::Duration timeout, const Canceller& canceller);

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_WAIT_H_
