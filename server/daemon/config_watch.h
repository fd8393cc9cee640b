// StartConfigWatch: the live-reload step of staggerd. For a start-up config
// read from a file, starts a ConfigReloader polling that file every
// `poll_interval` (--config_poll_interval; it knows the bytes the engine
// runs, so an unchanged file does not reload) and counting every reload's
// result in stagger_config_reloads_total{result}. Without a file (embedded
// defaults) there is nothing to watch: returns nullptr.
//
// Errors: InvalidArgument for poll_interval <= 0 (the message names
// --config_poll_interval); staggerd then exits kExitStartupFailure.
// `engine` and `metrics` must outlive the returned reloader.
#ifndef STAGGER_SERVER_DAEMON_CONFIG_WATCH_H_
#define STAGGER_SERVER_DAEMON_CONFIG_WATCH_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/config/config_reloader.h"
#include "server/daemon/startup_config.h"
#include "server/engine/engine.h"
#include "server/metrics/server_metrics.h"

namespace stagger::daemon {

absl::StatusOr<std::unique_ptr<config::ConfigReloader>> StartConfigWatch(
    const StartupConfig& startup, absl::Duration poll_interval,
    engine::Engine* engine, metrics::ServerMetrics* metrics);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_CONFIG_WATCH_H_
