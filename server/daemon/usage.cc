#include "server/daemon/usage.h"

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/daemon/exit_codes.h"

namespace stagger::daemon {

bool IsStaggerdFlagFile(absl::string_view filename) {
  return absl::StartsWith(filename, "server/") ||
         absl::StrContains(filename, "/server/");
}

void InstallUsage() {
  absl::SetProgramUsageMessage(absl::StrCat(
      "Stagger retry coordinator: gRPC on --address, Prometheus /metrics on "
      "--metrics_address, configuration from --config (embedded defaults "
      "without it). SIGHUP reloads the config file; SIGTERM/SIGINT drain "
      "and exit ", kExitClean, ". Exit codes: ", kExitClean,
      " clean shutdown, ", kExitStartupFailure, " start-up failure, ",
      kExitBadConfig,
      " bad configuration or flag. Every flag is listed below and in "
      "docs/OPERATING.md (\"Flags\")."));
  absl::FlagsUsageConfig config;
  config.contains_helpshort_flags = IsStaggerdFlagFile;
  config.contains_help_flags = IsStaggerdFlagFile;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace stagger::daemon
