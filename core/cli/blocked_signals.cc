#include "core/cli/blocked_signals.h"

#include <pthread.h>

namespace stagger::cli {

sigset_t HandledSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  return signals;
}

void BlockHandledSignals() {
  const sigset_t signals = HandledSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

int WaitForShutdownSignal(const std::function<void()>& on_hangup) {
  const sigset_t signals = HandledSignals();
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) return sig;
    if (on_hangup) on_hangup();
  }
}

}  // namespace stagger::cli
