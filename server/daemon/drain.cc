#include "server/daemon/drain.h"

#include <chrono>

#include "absl/time/clock.h"
#include "server/service/server_setup.h"

namespace stagger::daemon {

void Drain(Servers& servers, const DrainOptions& options,
           const std::function<void()>& after_last_answer) {
  service::SetServing({servers.server.get(), servers.health_server.get()},
                      false);
  absl::SleepFor(options.grace);
  servers.server->Shutdown(std::chrono::system_clock::now() +
                           absl::ToChronoMilliseconds(options.timeout));
  servers.server->Wait();
  if (after_last_answer) after_last_answer();
  if (servers.health_server) {
    servers.health_server->Shutdown(std::chrono::system_clock::now());
    servers.health_server->Wait();
  }
}

}  // namespace stagger::daemon
