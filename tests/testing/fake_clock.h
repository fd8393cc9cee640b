// FakeClock: a Clock that moves only when a test says so. Thread-safe.
#ifndef STAGGER_TESTS_TESTING_FAKE_CLOCK_H_
#define STAGGER_TESTS_TESTING_FAKE_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/clock.h"

namespace stagger::testing {

class FakeClock final : public engine::Clock {
 public:
  // Starts at an arbitrary fixed instant (2026-01-01T00:00:00Z).
  FakeClock() : now_(absl::FromUnixSeconds(1767225600)) {}
  explicit FakeClock(absl::Time start) : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock l(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock l(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock l(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stagger::testing

#endif  // STAGGER_TESTS_TESTING_FAKE_CLOCK_H_
