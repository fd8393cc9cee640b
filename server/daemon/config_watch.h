// StartConfigWatch: the live-reload step of staggerd. For a start-up config
// read from a file, starts a ConfigReloader polling that file every
// `poll_interval` (--config_poll_interval; it knows the bytes the engine
// runs, so an unchanged file does not reload) and counting every reload's
// result in stagger_config_reloads_total{result}. Without a file (embedded
// defaults) there is nothing to watch: returns nullptr.
//
// CheckConfigPollInterval runs with the other flag checks, before anything
// starts: the interval must be in (0, kMaxConfigPollInterval], with or
// without a file (InvalidArgument naming --config_poll_interval; staggerd
// exits kExitBadConfig). StartConfigWatch still refuses an interval <= 0
// the same way. `engine` and `metrics` must outlive the returned reloader.
#ifndef STAGGER_SERVER_DAEMON_CONFIG_WATCH_H_
#define STAGGER_SERVER_DAEMON_CONFIG_WATCH_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/config/config_reloader.h"
#include "server/daemon/startup_config.h"
#include "core/engine/engine.h"
#include "server/metrics/server_metrics.h"

namespace stagger::daemon {

inline constexpr absl::Duration kMaxConfigPollInterval = absl::Hours(1);
absl::Status CheckConfigPollInterval(absl::Duration poll_interval);

// `on_applied` (may be null) runs after each reload the engine took.
absl::StatusOr<std::unique_ptr<config::ConfigReloader>> StartConfigWatch(
    const StartupConfig& startup, absl::Duration poll_interval,
    engine::Engine* engine, metrics::ServerMetrics* metrics,
    std::function<void()> on_applied = nullptr);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_CONFIG_WATCH_H_
