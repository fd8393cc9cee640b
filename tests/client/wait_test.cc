// Canceller / WaitFor: a wait runs its full course unless cancelled, and
// Cancel() wakes every waiter at once. Real time, but the assertions are
// one-sided with generous slack: "returned long before its timeout", never
// "slept exactly this long".
#include "client/wait.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace stagger::client {
namespace {

// Far longer than any test may take: a waiter that returns before this was
// woken by Cancel(), not by its timeout.
constexpr absl::Duration kLongWait = absl::Minutes(10);
// "At once" on a slow, noisy machine.
constexpr absl::Duration kPromptly = absl::Seconds(10);

TEST(WaitTest, RunsItsFullCourseWhenNotCancelled) {
  Canceller c;
  const absl::Time start = absl::Now();
  EXPECT_TRUE(WaitFor(absl::Milliseconds(20), c));
  // It waited at least the timeout (absl::Mutex does not return early).
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(20));
  EXPECT_FALSE(c.cancelled());
}

TEST(WaitTest, ZeroAndNegativeDoNotBlock) {
  Canceller c;
  EXPECT_TRUE(c.WaitFor(absl::ZeroDuration()));
  EXPECT_TRUE(c.WaitFor(absl::Seconds(-5)));
  EXPECT_TRUE(c.WaitUntil(absl::Now() - absl::Seconds(1)));
  c.Cancel();
  // Cancelled: every form reports it, even without blocking.
  EXPECT_FALSE(c.WaitFor(absl::ZeroDuration()));
  EXPECT_FALSE(c.WaitFor(absl::Seconds(-5)));
  EXPECT_FALSE(c.WaitUntil(absl::Now() - absl::Seconds(1)));
}

TEST(WaitTest, AlreadyCancelledReturnsAtOnce) {
  Canceller c;
  c.Cancel();
  c.Cancel();  // idempotent
  const absl::Time start = absl::Now();
  EXPECT_FALSE(WaitFor(kLongWait, c));
  EXPECT_FALSE(c.WaitUntil(absl::Now() + kLongWait));
  EXPECT_LT(absl::Now() - start, kPromptly);
  EXPECT_TRUE(c.cancelled());
}

TEST(WaitTest, CancelWakesEveryWaiterAtOnce) {
  Canceller c;
  constexpr int kWaiters = 8;
  std::atomic<int> started{0};
  absl::Notification all_started;
  std::vector<int> result(kWaiters, -1);
  std::vector<absl::Duration> took(kWaiters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      if (started.fetch_add(1) + 1 == kWaiters) all_started.Notify();
      const absl::Time t0 = absl::Now();
      // Half use WaitFor, half WaitUntil: both must wake.
      const bool full = i % 2 == 0 ? c.WaitFor(kLongWait)
                                   : c.WaitUntil(absl::Now() + kLongWait);
      took[i] = absl::Now() - t0;
      result[i] = full ? 1 : 0;
    });
  }
  // Every thread is running (some may not be blocked yet: a wait that
  // starts after Cancel() returns false at once, which is the contract too).
  ASSERT_TRUE(all_started.WaitForNotificationWithTimeout(kPromptly));
  const absl::Time cancel_at = absl::Now();
  c.Cancel();
  for (auto& t : threads) t.join();
  const absl::Duration all_done = absl::Now() - cancel_at;

  for (int i = 0; i < kWaiters; ++i) {
    EXPECT_EQ(result[i], 0) << "waiter " << i << " was not cancelled";
    EXPECT_LT(took[i], kPromptly) << "waiter " << i;
  }
  EXPECT_LT(all_done, kPromptly);
}

TEST(WaitTest, CancelFromAnotherThreadWhileBlocked) {
  Canceller c;
  absl::Notification done;
  bool full = true;
  std::thread waiter([&] {
    full = c.WaitFor(kLongWait);
    done.Notify();
  });
  // The waiter is blocked (it cannot return: kLongWait is 10 minutes).
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  c.Cancel();
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(kPromptly));
  waiter.join();
  EXPECT_FALSE(full);
}

}  // namespace
}  // namespace stagger::client
