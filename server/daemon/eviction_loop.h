// EvictionLoop: the thread that drops idle endpoints from the engine's
// table. Each round it asks the engine for its current configuration and
// waits EvictionPeriod(limits.idle_eviction) before calling EvictIdle(), so
// a reload that changes limits.idle_eviction changes the period from the
// next round on (the round already waiting keeps its period).
//
// The period is the engine's EvictionPeriod (engine_config.h): a tenth of
// the idle-eviction age, clamped to [1s, 60s].
//
// Waiting is injected: `wait(period)` blocks for up to `period` and returns
// true when the loop must stop. The default waits on a Notification that
// Stop() (and the destructor) notifies; tests pass a wait that records the
// periods asked for and moves a fake clock instead of sleeping.
//
// Thread-safety: Start/Stop from one owning thread. `engine` must outlive
// the loop.
#ifndef STAGGER_SERVER_DAEMON_EVICTION_LOOP_H_
#define STAGGER_SERVER_DAEMON_EVICTION_LOOP_H_

#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"

namespace stagger::daemon {

class EvictionLoop {
 public:
  // Returns true to stop the loop.
  using Wait = std::function<bool(absl::Duration period)>;

  // Waits on the loop's own stop notification.
  explicit EvictionLoop(engine::Engine* engine);
  EvictionLoop(engine::Engine* engine, Wait wait);
  ~EvictionLoop();  // Stop()
  EvictionLoop(const EvictionLoop&) = delete;
  EvictionLoop& operator=(const EvictionLoop&) = delete;

  // The period the next round waits, from the engine's current config.
  absl::Duration CurrentPeriod() const;

  // Also run `fn` every round, after the eviction (e.g. forgetting leases
  // that ran out). Set before Start().
  void set_each_round(std::function<void()> fn) { each_round_ = std::move(fn); }

  // Starts the thread (once).
  void Start();
  // Notifies the default wait and joins the thread. Idempotent. With an
  // injected wait, that wait must return true by itself.
  void Stop();

  // The rounds, on the calling thread: until wait() returns true,
  // wait(CurrentPeriod()) then EvictIdle(). Start() runs it on a thread.
  void Run();

 private:
  engine::Engine* const engine_;
  absl::Notification stop_;
  const Wait wait_;
  std::function<void()> each_round_;
  std::thread thread_;
};

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_EVICTION_LOOP_H_
