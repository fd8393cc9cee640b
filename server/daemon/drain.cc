#include "server/daemon/drain.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/service/server_setup.h"

namespace stagger::daemon {

absl::Status CheckDrainOptions(const DrainOptions& options) {
  std::vector<std::string> errors;
  for (const auto& [flag, value] :
       {std::pair{"--drain_grace", options.grace},
        std::pair{"--drain_timeout", options.timeout}}) {
    if (value < absl::ZeroDuration() || value > kMaxDrainDuration) {
      errors.push_back(absl::StrCat(flag, ": must be in [0, ",
                                    absl::FormatDuration(kMaxDrainDuration),
                                    "], got ", absl::FormatDuration(value)));
    }
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

void Drain(Servers& servers, const DrainOptions& options,
           const DrainHooks& hooks) {
  service::SetServing({servers.server.get(), servers.health_server.get()},
                      false);
  absl::SleepFor(options.grace);
  if (hooks.before_close) hooks.before_close();
  servers.server->Shutdown(std::chrono::system_clock::now() +
                           absl::ToChronoMilliseconds(options.timeout));
  servers.server->Wait();
  if (hooks.after_last_answer) hooks.after_last_answer();
  if (servers.health_server) {
    servers.health_server->Shutdown(std::chrono::system_clock::now());
    servers.health_server->Wait();
  }
}

}  // namespace stagger::daemon
