// StartupConfig: the configuration staggerd starts with. With a --config
// path the file is read once and validated (textproto or JSON, by its
// extension); the bytes read are kept so the config watch knows what the
// engine runs. Without a path the embedded defaults apply.
//
// Errors: the loader's (the file name, then every field path, one per
// line) for a file that cannot be read or does not validate; staggerd then
// exits kExitBadConfig. Logs one line saying where the configuration came
// from.
#ifndef STAGGER_SERVER_DAEMON_STARTUP_CONFIG_H_
#define STAGGER_SERVER_DAEMON_STARTUP_CONFIG_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/engine/engine_config.h"

namespace stagger::daemon {

struct StartupConfig {
  std::string path;                  // "" = embedded defaults
  engine::EngineConfig config;       // valid (ValidateEngineConfig)
  std::optional<std::string> bytes;  // the file's bytes; unset without path
};

absl::StatusOr<StartupConfig> LoadStartupConfig(const std::string& path);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_STARTUP_CONFIG_H_
