// Signals: how staggerd takes SIGTERM, SIGINT and SIGHUP. They are blocked
// in every thread (BlockHandledSignals, first thing in main, before any
// library starts a thread, so every thread inherits the mask and a signal
// during start-up is never taken by its default action: a SIGTERM then is
// a clean drain once start-up is done) and taken synchronously with
// sigwait() by WaitForShutdownSignal on the main thread.
//
// WaitForShutdownSignal: SIGHUP reloads the config file now (or logs that
// there is none: `reloader` null) and keeps waiting; SIGTERM or SIGINT is
// logged ("SIGTERM: draining (health NOT_SERVING)") and returned, and the
// caller drains.
#ifndef STAGGER_SERVER_DAEMON_SIGNALS_H_
#define STAGGER_SERVER_DAEMON_SIGNALS_H_

#include <signal.h>

#include "server/config/config_reloader.h"

namespace stagger::daemon {

// {SIGTERM, SIGINT, SIGHUP}.
sigset_t HandledSignals();

// Blocks HandledSignals() in the calling thread (and the threads it starts).
void BlockHandledSignals();

// Returns SIGTERM or SIGINT.
int WaitForShutdownSignal(config::ConfigReloader* reloader);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_SIGNALS_H_
