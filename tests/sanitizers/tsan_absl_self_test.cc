// Checks the TSan build's Abseil annotations (tests/sanitizers/absl_tsan_annotations.cc)
// both ways; built and registered only with STAGGER_SANITIZE=thread.
//   tsan_absl_self_test clean   correct code using every Abseil primitive the
//                               annotations cover, including Barrier and
//                               Notification, whose locking happens inside
//                               Abseil: TSan must report nothing.
//   tsan_absl_self_test race    a counter written under two different
//                               mutexes: TSan must still report this race
//                               (ctest checks the report names the counter).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace {

constexpr int kThreads = 4;
constexpr int kRounds = 200;

void RunThreads(int n, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) threads.emplace_back(body, i);
  for (auto& t : threads) t.join();
}

// Lock/Unlock, TryLock, reader locks and a counter guarded by one mutex.
void MutexAndReaderLocks() {
  absl::Mutex mu;
  long counter = 0;  // guarded by mu
  RunThreads(kThreads, [&](int i) {
    for (int r = 0; r < kRounds; ++r) {
      if (r % 3 == 0) {
        const auto always = [] { return true; };
        if (r % 2 == 0) {
          mu.ReaderLock();
        } else {
          mu.ReaderLockWhenWithTimeout(absl::Condition(&always),
                                       absl::Minutes(5));
        }
        if (counter < 0) std::abort();
        mu.ReaderUnlock();
      } else if (r % 3 == 1 && mu.TryLock()) {
        ++counter;
        mu.Unlock();
      } else {
        absl::MutexLock l(&mu);
        ++counter;
      }
    }
  });
  absl::MutexLock l(&mu);
  if (counter <= 0) std::abort();
}

// LockWhen, Await and CondVar waits, with and without timeouts: a handoff
// between two threads in strict turns.
void WaitsHandOff() {
  const absl::Duration kLong = absl::Minutes(5);  // never reached
  absl::Mutex mu;
  absl::CondVar cv;
  int turn = 0;          // guarded by mu
  std::vector<int> log;  // written by whoever has the turn
  RunThreads(2, [&](int me) {
    for (int r = 0; r < kRounds; ++r) {
      const auto mine = [&] { return turn % 2 == me; };
      const absl::Condition my_turn(&mine);
      switch (r % 6) {
        case 0: mu.LockWhen(my_turn); break;
        case 1: mu.LockWhenWithTimeout(my_turn, kLong); break;
        case 2: mu.Lock(); mu.Await(my_turn); break;
        case 3: mu.Lock(); mu.AwaitWithTimeout(my_turn, kLong); break;
        case 4: mu.Lock(); while (!mine()) cv.Wait(&mu); break;
        default:
          mu.Lock();
          while (!mine()) cv.WaitWithTimeout(&mu, kLong);
      }
      log.push_back(me);  // ordered only by the handoff
      ++turn;
      cv.SignalAll();
      mu.Unlock();
    }
  });
  if (log.size() != 2u * kRounds) std::abort();
}

// Data published through Notification (its wait and HasBeenNotified, whose
// fast path takes no lock), Barrier (its lock is taken inside Abseil) and
// BlockingCounter.
void PublishedData() {
  for (int r = 0; r < kRounds; ++r) {
    int data = 0;
    absl::Notification ready;
    std::thread writer([&] { data = r; ready.Notify(); });
    if (r % 2 == 0) {
      ready.WaitForNotification();
    } else {
      while (!ready.HasBeenNotified()) std::this_thread::yield();
    }
    if (data != r) std::abort();
    writer.join();
  }
  std::vector<int> slots(kThreads);
  absl::Barrier* barrier = new absl::Barrier(kThreads);
  RunThreads(kThreads, [&](int i) {
    slots[i] = i + 1;
    if (barrier->Block()) delete barrier;
    for (int s : slots) {
      if (s == 0) std::abort();  // read after the barrier: no race
    }
  });
  absl::BlockingCounter done(kThreads);
  std::vector<int> results(kThreads);
  std::vector<std::thread> workers;
  for (int i = 0; i < kThreads; ++i) {
    workers.emplace_back([&, i] {
      results[i] = i + 1;
      done.DecrementCount();
    });
  }
  done.Wait();
  for (int v : results) {
    if (v == 0) std::abort();
  }
  for (auto& t : workers) t.join();
}

// A real race: each thread holds a mutex, but not the same one.
long racy_counter = 0;
void RacyIncrement(absl::Mutex* mu) {
  absl::MutexLock l(mu);
  ++racy_counter;
}

void Race() {
  absl::Mutex a, b;
  std::thread t1([&] { RacyIncrement(&a); });
  std::thread t2([&] { RacyIncrement(&b); });
  t1.join();
  t2.join();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "clean") == 0) {
    MutexAndReaderLocks();
    WaitsHandOff();
    PublishedData();
    std::printf("clean: done\n");
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "race") == 0) {
    Race();
    // Read after the joins (no race), so that the counter is not optimised
    // away.
    std::printf("race: done, counter %ld (TSan should have reported)\n",
                racy_counter);
    return 0;
  }
  std::fprintf(stderr, "usage: tsan_absl_self_test clean|race\n");
  return 2;
}
