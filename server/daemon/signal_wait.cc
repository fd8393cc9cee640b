#include "server/daemon/signal_wait.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "core/cli/blocked_signals.h"
#include "server/daemon/log.h"

namespace stagger::daemon {

int WaitForShutdownSignal(config::ConfigReloader* reloader) {
  const int sig = cli::WaitForShutdownSignal([reloader] {
    if (reloader == nullptr) {
      Log("SIGHUP: no --config file to reload");
      return;
    }
    Log("SIGHUP: reloading config");
    (void)reloader->ReloadNow();
  });
  Log(absl::StrCat(sig == SIGTERM ? "SIGTERM" : "SIGINT",
                   ": draining (health NOT_SERVING)"));
  return sig;
}

}  // namespace stagger::daemon
