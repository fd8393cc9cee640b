#include "server/daemon/signals.h"

#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "server/daemon/log.h"

namespace stagger::daemon {

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

int WaitForShutdownSignal(config::ConfigReloader* reloader) {
  const sigset_t signals = HandledSignals();
  for (;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig != SIGHUP) {
      Log(absl::StrCat(sig == SIGTERM ? "SIGTERM" : "SIGINT",
                       ": draining (health NOT_SERVING)"));
      return sig;
    }
    if (reloader == nullptr) {
      Log("SIGHUP: no --config file to reload");
      continue;
    }
    Log("SIGHUP: reloading config");
    (void)reloader->ReloadNow();
  }
}

}  // namespace stagger::daemon
