#include "server/daemon/usage_message.h"

#include "absl/strings/str_cat.h"
#include "server/daemon/exit_codes.h"

namespace stagger::daemon {

std::string UsageMessage() {
  return absl::StrCat(
      "Stagger retry coordinator: gRPC on --address, Prometheus /metrics on "
      "--metrics_address, configuration from --config (embedded defaults "
      "without it). SIGHUP reloads the config file; SIGTERM/SIGINT drain "
      "and exit ", kExitClean, ". Exit codes: ", kExitClean,
      " clean shutdown, ", kExitStartupFailure, " start-up failure, ",
      kExitBadConfig,
      " bad configuration or flag. Every flag is listed below and in "
      "docs/OPERATING.md (\"Flags\").");
}

}  // namespace stagger::daemon
