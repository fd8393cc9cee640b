// StateKeeper: staggerd's --state_file. Load() restores the engine's
// endpoint state and the operators' pauses from the snapshot at start; Start() saves a new snapshot
// every save_interval on its own thread; Stop() (on drain, once the server
// has stopped answering) ends that thread and saves one last time.
//
// A load never fails the start: a missing, unreadable, truncated, corrupt
// or incompatible file is logged (naming the file and what was wrong),
// counted (stagger_state_load_failures_total{reason}), and the engine
// starts fresh.
// Records older than limits.idle_eviction are dropped by the engine's
// import, as the running engine would have evicted them; pauses that have
// ended by then are dropped too. A failed save is
// logged and counted (stagger_state_saves_total) and leaves the previous snapshot in place
// (snapshot_file.h writes atomically); the next period tries again.
//
// Memory: the snapshot streams both ways (one shard's records, or
// kImportBatch records, at a time), never the whole table.
// Thread-safe: saves are serialised; Load() runs before Start().
#ifndef STAGGER_SERVER_STATE_STATE_KEEPER_H_
#define STAGGER_SERVER_STATE_STATE_KEEPER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "server/metrics/server_metrics.h"
#include "server/state/snapshot_file.h"

namespace stagger::state {

class StateKeeper {
 public:
  static constexpr size_t kImportBatch = 4096;

  struct Options {
    std::string path;
    absl::Duration save_interval = absl::Seconds(30);
    // Names this process in the snapshot; empty: "staggerd pid N on HOST".
    std::string writer;
    std::function<void(const std::string&)> log;  // may be empty
    metrics::ServerMetrics* metrics = nullptr;    // may be null
  };
  struct LoadSummary {
    LoadOutcome outcome = LoadOutcome::kMissing;
    engine::ImportStats import;
    // Operators' pauses: put back, ended by load time, refused (a limit of
    // engine::PauseTable; each refusal is logged).
    int64_t pauses_restored = 0;
    int64_t pauses_ended = 0;
    int64_t pauses_refused = 0;
    // Disabled endpoints: put back, refused (each refusal is logged).
    int64_t disabled_restored = 0;
    int64_t disabled_refused = 0;
  };

  // `engine`, `clock` and options.metrics must outlive the keeper.
  StateKeeper(engine::Engine* engine, const engine::Clock* clock,
              Options options);
  // Stops the periodic thread (no final save: call Stop() for that).
  ~StateKeeper();
  StateKeeper(const StateKeeper&) = delete;
  StateKeeper& operator=(const StateKeeper&) = delete;

  LoadSummary Load();
  absl::Status SaveNow();
  void Start();
  // Idempotent; the first call saves.
  void Stop();

 private:
  void Loop();
  void EndThread();
  void CountLoad(LoadOutcome outcome, int64_t restored);
  void RestorePause(const v1::state::Pause& proto, LoadSummary* summary);
  void RestoreDisabled(const engine::Disable& d, LoadSummary* summary);

  engine::Engine* engine_;
  const engine::Clock* clock_;
  Options options_;
  absl::Mutex save_mu_;
  absl::Notification stop_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace stagger::state

#endif  // STAGGER_SERVER_STATE_STATE_KEEPER_H_
