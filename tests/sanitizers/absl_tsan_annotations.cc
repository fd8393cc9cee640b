// ThreadSanitizer annotations for an uninstrumented Abseil (TSan builds only;
// sanitizers.cmake links this file into every executable).
//
// Debian's libabsl_synchronization.so is not built with -fsanitize=thread.
// absl::Mutex waits on futexes, not pthread mutexes, so TSan sees none of its
// happens-before edges and would report a race on every ABSL_GUARDED_BY
// field. When Abseil itself is built with TSan it calls the
// __tsan_mutex_* hooks from inside mutex.cc; this file makes the same calls
// from outside:
//  - It defines absl::Mutex's locking entry points (Lock, Unlock, TryLock,
//    the Reader* forms, LockWhen*, Await*, ~Mutex), CondVar's waits and the
//    lock-free paths of Notification and BlockingCounter in the executable.
//    The dynamic linker binds every call to these names to the executable's
//    definition first, so calls from libgrpc, libgpr and from Abseil itself
//    (Notification, Barrier, BlockingCounter call Mutex::Lock through the
//    PLT) come here too, not only our own.
//  - Each definition announces the operation to TSan, calls the real
//    function in libabsl_synchronization.so (found with dlsym(RTLD_NEXT)),
//    and announces its end: pre_lock / real / post_lock, pre_unlock / real /
//    post_unlock. Between pre and post TSan ignores memory accesses, so a
//    Condition that Abseil evaluates on another thread is not reported.
//  - The *WithTimeout forms are their *WithDeadline forms at Now() +
//    timeout, here as inside Abseil 20220623 (whose WithTimeout functions
//    call WithDeadline through the PLT: annotating both would announce one
//    lock twice).
//  - Waits that release the mutex inside (Await*, CondVar::Wait*) are
//    announced as an unlock followed by a lock, in the mode the mutex is held
//    in (tracked per thread for reader locks).
//  - Notification::Notify / BlockingCounter::DecrementCount release, and
//    their waits acquire, on the object's atomic (what the instrumented
//    atomic would do), which covers HasBeenNotified() (inline, instrumented
//    in our code) and the waits' fast paths that take no lock.
// Only Abseil's exported, public member functions are used; the symbol
// names are checked when first resolved (abort naming the missing one).
// tests/sanitizers/tsan_absl_self_test.cc checks both directions: no report for
// correct code using each primitive, a report for a real race.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#if !defined(__has_feature) || !__has_feature(thread_sanitizer)
#error "absl_tsan_annotations.cc is for -fsanitize=thread builds only"
#endif
static_assert(ABSL_OPTION_USE_INLINE_NAMESPACE == 1,
              "the symbol names below assume Abseil's inline namespace");

namespace {

// "_ZN4absl@5Mutex4LockEv" with @ replaced by Abseil's inline namespace,
// e.g. "7debian3": the mangled name of the real function.
std::string Mangle(const char* pattern) {
#define STAGGER_STR2(x) #x
#define STAGGER_STR(x) STAGGER_STR2(x)
  const char* ns = STAGGER_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  std::string name(pattern);
  name.replace(name.find('@'), 1, std::to_string(std::strlen(ns)) + ns);
  return name;
}

template <typename Fn>
Fn Real(const char* pattern) {
  const std::string name = Mangle(pattern);
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_tsan_annotations: %s not found: %s\n",
                 name.c_str(), dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

// Mutexes this thread holds in reader mode, so that a wait announces the
// unlock/lock in the mode the mutex is held in. Nesting deeper than this
// would be unusual; it aborts rather than mis-annotate.
constexpr int kMaxReaderLocks = 32;
thread_local const void* reader_held[kMaxReaderLocks];
thread_local int reader_count = 0;

void AddReader(const void* mu) {
  if (reader_count == kMaxReaderLocks) {
    std::fprintf(stderr, "absl_tsan_annotations: over %d reader locks held\n",
                 kMaxReaderLocks);
    std::abort();
  }
  reader_held[reader_count++] = mu;
}

void RemoveReader(const void* mu) {
  for (int i = reader_count - 1; i >= 0; --i) {
    if (reader_held[i] == mu) {
      reader_held[i] = reader_held[--reader_count];
      return;
    }
  }
}

unsigned HeldMode(const void* mu) {
  for (int i = 0; i < reader_count; ++i) {
    if (reader_held[i] == mu) return __tsan_mutex_read_lock;
  }
  return 0;
}

// A call that blocks with `mu` released and returns with it held again.
template <typename Call>
auto ReleaseAndReacquire(absl::Mutex* mu, Call call) {
  const unsigned mode = HeldMode(mu);
  __tsan_mutex_pre_unlock(mu, mode);
  __tsan_mutex_post_unlock(mu, mode);
  __tsan_mutex_pre_lock(mu, mode);
  auto result = call();
  __tsan_mutex_post_lock(mu, mode, 0);
  return result;
}

// A call that acquires `mu` (in `mode`), always.
template <typename Call>
auto Acquiring(absl::Mutex* mu, unsigned mode, Call call) {
  __tsan_mutex_pre_lock(mu, mode);
  auto result = call();
  __tsan_mutex_post_lock(mu, mode, 0);
  if (mode & __tsan_mutex_read_lock) AddReader(mu);
  return result;
}

// Private members named only to take their address (explicit instantiation
// may name private members): the atomics that the lock-free paths of
// Notification and BlockingCounter synchronise on.
template <typename Tag, typename Tag::type kMember>
struct MemberOf {
  friend typename Tag::type Member(Tag) { return kMember; }
};
struct NotifiedYet {
  using type = std::atomic<bool> absl::Notification::*;
  friend type Member(NotifiedYet);
};
template struct MemberOf<NotifiedYet, &absl::Notification::notified_yet_>;
struct Count {
  using type = std::atomic<int> absl::BlockingCounter::*;
  friend type Member(Count);
};
template struct MemberOf<Count, &absl::BlockingCounter::count_>;

void* SyncAddress(const absl::Notification* n) {
  return const_cast<std::atomic<bool>*>(&(n->*Member(NotifiedYet{})));
}
void* SyncAddress(absl::BlockingCounter* c) { return &(c->*Member(Count{})); }

using Cond = const absl::Condition&;

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// ---- Mutex: plain and reader locks ----------------------------------------

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN4absl@5Mutex4LockEv");
  Acquiring(this, 0, [&] { real(this); return 0; });
}

void Mutex::ReaderLock() {
  static const auto real =
      Real<void (*)(Mutex*)>("_ZN4absl@5Mutex10ReaderLockEv");
  Acquiring(this, __tsan_mutex_read_lock, [&] { real(this); return 0; });
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("_ZN4absl@5Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(
      this, __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed),
      0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real =
      Real<bool (*)(Mutex*)>("_ZN4absl@5Mutex13ReaderTryLockEv");
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_read_lock);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this,
                         locked ? __tsan_mutex_try_read_lock
                                : __tsan_mutex_try_read_lock_failed,
                         0);
  if (locked) AddReader(this);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN4absl@5Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  static const auto real =
      Real<void (*)(Mutex*)>("_ZN4absl@5Mutex12ReaderUnlockEv");
  RemoveReader(this);
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

Mutex::~Mutex() {
  static const auto real = Real<void (*)(Mutex*)>("_ZN4absl@5MutexD2Ev");
  __tsan_mutex_destroy(this, __tsan_mutex_not_static);
  real(this);
}

// ---- Mutex: conditional locks and waits -----------------------------------

void Mutex::LockWhen(Cond cond) {
  static const auto real =
      Real<void (*)(Mutex*, Cond)>("_ZN4absl@5Mutex8LockWhenERKNS0_9ConditionE");
  Acquiring(this, 0, [&] { real(this, cond); return 0; });
}

bool Mutex::LockWhenWithTimeout(Cond cond, absl::Duration timeout) {
  return LockWhenWithDeadline(cond, absl::Now() + timeout);
}

bool Mutex::LockWhenWithDeadline(Cond cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, Cond, absl::Time)>(
      "_ZN4absl@5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquiring(this, 0, [&] { return real(this, cond, deadline); });
}

void Mutex::ReaderLockWhen(Cond cond) {
  static const auto real = Real<void (*)(Mutex*, Cond)>(
      "_ZN4absl@5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  Acquiring(this, __tsan_mutex_read_lock, [&] { real(this, cond); return 0; });
}

bool Mutex::ReaderLockWhenWithTimeout(Cond cond, absl::Duration timeout) {
  return ReaderLockWhenWithDeadline(cond, absl::Now() + timeout);
}

bool Mutex::ReaderLockWhenWithDeadline(Cond cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, Cond, absl::Time)>(
      "_ZN4absl@5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_"
      "4TimeE");
  return Acquiring(this, __tsan_mutex_read_lock,
                   [&] { return real(this, cond, deadline); });
}

void Mutex::Await(Cond cond) {
  static const auto real =
      Real<void (*)(Mutex*, Cond)>("_ZN4absl@5Mutex5AwaitERKNS0_9ConditionE");
  ReleaseAndReacquire(this, [&] { real(this, cond); return 0; });
}

bool Mutex::AwaitWithTimeout(Cond cond, absl::Duration timeout) {
  return AwaitWithDeadline(cond, absl::Now() + timeout);
}

bool Mutex::AwaitWithDeadline(Cond cond, absl::Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, Cond, absl::Time)>(
      "_ZN4absl@5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return ReleaseAndReacquire(this, [&] { return real(this, cond, deadline); });
}

// ---- CondVar: waits release and reacquire the mutex -----------------------

void CondVar::Wait(Mutex* mu) {
  static const auto real =
      Real<void (*)(CondVar*, Mutex*)>("_ZN4absl@7CondVar4WaitEPNS0_5MutexE");
  ReleaseAndReacquire(mu, [&] { real(this, mu); return 0; });
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  return WaitWithDeadline(mu, absl::Now() + timeout);
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      "_ZN4absl@7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return ReleaseAndReacquire(mu, [&] { return real(this, mu, deadline); });
}

// ---- Notification and BlockingCounter: their lock-free paths --------------

void Notification::Notify() {
  static const auto real =
      Real<void (*)(Notification*)>("_ZN4absl@12Notification6NotifyEv");
  __tsan_release(SyncAddress(this));
  real(this);
}

void Notification::WaitForNotification() const {
  static const auto real = Real<void (*)(const Notification*)>(
      "_ZNK4absl@12Notification19WaitForNotificationEv");
  real(this);
  __tsan_acquire(SyncAddress(this));
}

bool Notification::WaitForNotificationWithTimeout(
    absl::Duration timeout) const {
  static const auto real =
      Real<bool (*)(const Notification*, absl::Duration)>(
          "_ZNK4absl@12Notification30WaitForNotificationWithTimeoutENS0_"
          "8DurationE");
  const bool notified = real(this, timeout);
  if (notified) __tsan_acquire(SyncAddress(this));
  return notified;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  static const auto real = Real<bool (*)(const Notification*, absl::Time)>(
      "_ZNK4absl@12Notification31WaitForNotificationWithDeadlineENS0_4TimeE");
  const bool notified = real(this, deadline);
  if (notified) __tsan_acquire(SyncAddress(this));
  return notified;
}

bool BlockingCounter::DecrementCount() {
  static const auto real = Real<bool (*)(BlockingCounter*)>(
      "_ZN4absl@15BlockingCounter14DecrementCountEv");
  __tsan_release(SyncAddress(this));
  const bool last = real(this);
  if (last) __tsan_acquire(SyncAddress(this));
  return last;
}

void BlockingCounter::Wait() {
  static const auto real =
      Real<void (*)(BlockingCounter*)>("_ZN4absl@15BlockingCounter4WaitEv");
  real(this);
  __tsan_acquire(SyncAddress(this));
}

ABSL_NAMESPACE_END
}  // namespace absl
