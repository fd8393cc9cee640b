#include "server/daemon/startup_config.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/config/config_loader.h"
#include "server/daemon/log.h"

namespace stagger::daemon {

absl::StatusOr<StartupConfig> LoadStartupConfig(const std::string& path) {
  StartupConfig out;
  out.path = path;
  if (path.empty()) {
    out.config = config::DefaultEngineConfig();
    Log("no --config: running on embedded defaults");
    return out;
  }
  absl::StatusOr<std::string> bytes = config::ReadConfigFile(path);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<engine::EngineConfig> loaded =
      config::LoadConfigText(*bytes, path);
  if (!loaded.ok()) return loaded.status();
  out.config = *std::move(loaded);
  out.bytes = *std::move(bytes);
  Log(absl::StrCat("config loaded from ", path));
  return out;
}

}  // namespace stagger::daemon
