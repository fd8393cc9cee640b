// Signals for Stagger's programs: SIGTERM, SIGINT and SIGHUP are blocked in
// every thread (BlockHandledSignals, first thing in main, before any
// library starts a thread, so every thread inherits the mask and a signal
// during start-up is never taken by its default action) and taken
// synchronously with sigwait() on the main thread.
//
// WaitForShutdownSignal: each SIGHUP runs on_hangup (may be null) and keeps
// waiting; SIGTERM or SIGINT is returned, and the caller shuts down.
#ifndef STAGGER_CORE_CLI_BLOCKED_SIGNALS_H_
#define STAGGER_CORE_CLI_BLOCKED_SIGNALS_H_

#include <signal.h>

#include <functional>

namespace stagger::cli {

// {SIGTERM, SIGINT, SIGHUP}.
sigset_t HandledSignals();

// Blocks HandledSignals() in the calling thread (and the threads it starts).
void BlockHandledSignals();

// Returns SIGTERM or SIGINT.
int WaitForShutdownSignal(const std::function<void()>& on_hangup);

}  // namespace stagger::cli

#endif  // STAGGER_CORE_CLI_BLOCKED_SIGNALS_H_
