// Signals: how staggerd takes SIGTERM, SIGINT and SIGHUP (core/cli/blocked_signals.h
// blocks them in every thread and waits for them on the main thread).
//
// WaitForShutdownSignal: SIGHUP reloads the config file now (or logs that
// there is none: `reloader` null) and keeps waiting; SIGTERM or SIGINT is
// logged ("SIGTERM: draining (health NOT_SERVING)") and returned, and the
// caller drains.
#ifndef STAGGER_SERVER_DAEMON_SIGNAL_WAIT_H_
#define STAGGER_SERVER_DAEMON_SIGNAL_WAIT_H_

#include "server/config/config_reloader.h"

namespace stagger::daemon {

// Returns SIGTERM or SIGINT.
int WaitForShutdownSignal(config::ConfigReloader* reloader);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_SIGNAL_WAIT_H_
