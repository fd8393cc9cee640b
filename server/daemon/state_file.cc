#include "server/daemon/state_file.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/daemon/log.h"
#include "core/engine/clock.h"

namespace stagger::daemon {

absl::Status CheckStateFile(const StateFileOptions& options) {
  if (options.save_interval >= kMinStateSaveInterval) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--state_save_interval must be >= ",
                   absl::FormatDuration(kMinStateSaveInterval), ", got ",
                   absl::FormatDuration(options.save_interval)));
}

std::unique_ptr<state::StateKeeper> StartStateKeeper(
    const StateFileOptions& options, engine::Engine* engine,
    metrics::ServerMetrics* metrics) {
  if (options.path.empty()) return nullptr;
  state::StateKeeper::Options keeper_options;
  keeper_options.path = options.path;
  keeper_options.save_interval = options.save_interval;
  keeper_options.log = [](const std::string& line) { Log(line); };
  keeper_options.metrics = metrics;
  auto keeper = std::make_unique<state::StateKeeper>(
      engine, engine->clock(), std::move(keeper_options));
  keeper->Load();
  keeper->Start();
  return keeper;
}

}  // namespace stagger::daemon
