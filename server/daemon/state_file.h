// The --state_file step of staggerd: the flags' check and the keeper.
//
// CheckStateFile: InvalidArgument naming the flag for a save interval
// under kMinStateSaveInterval (--state_save_interval); staggerd then exits
// kExitBadConfig before anything starts. The interval is checked even
// without a path, as it always was.
//
// StartStateKeeper: with a path, restores the engine's endpoint state from
// the snapshot (a bad or missing file is logged, counted, and the engine
// starts fresh: never an error) before the first call is answered, then
// saves it every save_interval; the caller stops the keeper after the last
// answer (Drain's after_last_answer), which saves once more. Without a
// path: nullptr. Logs through daemon::Log. `engine` and `metrics` must
// outlive the keeper.
#ifndef STAGGER_SERVER_DAEMON_STATE_FILE_H_
#define STAGGER_SERVER_DAEMON_STATE_FILE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/engine/engine.h"
#include "server/metrics/server_metrics.h"
#include "server/state/state_keeper.h"

namespace stagger::daemon {

struct StateFileOptions {
  std::string path;                                // --state_file; "" = none
  absl::Duration save_interval = absl::Seconds(30);  // --state_save_interval
};

inline constexpr absl::Duration kMinStateSaveInterval = absl::Seconds(1);

absl::Status CheckStateFile(const StateFileOptions& options);

std::unique_ptr<state::StateKeeper> StartStateKeeper(
    const StateFileOptions& options, engine::Engine* engine,
    metrics::ServerMetrics* metrics);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_STATE_FILE_H_
