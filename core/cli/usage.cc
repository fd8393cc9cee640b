#include "core/cli/usage.h"

#include <utility>

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stagger::cli {

bool IsFlagFileUnder(absl::string_view filename, absl::string_view folder) {
  const std::string dir = absl::StrCat(folder, "/");
  return absl::StartsWith(filename, dir) ||
         absl::StrContains(filename, absl::StrCat("/", dir));
}

void InstallUsage(std::string message, std::string folder) {
  absl::SetProgramUsageMessage(message);
  absl::FlagsUsageConfig config;
  const auto ours = [folder = std::move(folder)](absl::string_view file) {
    return IsFlagFileUnder(file, folder);
  };
  config.contains_helpshort_flags = ours;
  config.contains_help_flags = ours;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace stagger::cli
