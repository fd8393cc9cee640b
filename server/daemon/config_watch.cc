#include "server/daemon/config_watch.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stagger::daemon {

absl::Status CheckConfigPollInterval(absl::Duration poll_interval) {
  if (poll_interval > absl::ZeroDuration() &&
      poll_interval <= kMaxConfigPollInterval) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--config_poll_interval: must be in (0, ",
      absl::FormatDuration(kMaxConfigPollInterval), "], got ",
      absl::FormatDuration(poll_interval)));
}

absl::StatusOr<std::unique_ptr<config::ConfigReloader>> StartConfigWatch(
    const StartupConfig& startup, absl::Duration poll_interval,
    engine::Engine* engine, metrics::ServerMetrics* metrics,
    std::function<void()> on_applied) {
  if (startup.path.empty()) return nullptr;
  config::ConfigReloader::Options options;
  options.poll_interval = poll_interval;
  options.applied_content = startup.bytes;
  options.on_result = [metrics, on_applied = std::move(on_applied)](
                          bool ok, const absl::Status&) {
    metrics->RecordConfigReload(ok);
    if (ok && on_applied) on_applied();
  };
  auto reloader = std::make_unique<config::ConfigReloader>(
      startup.path, engine, std::move(options));
  if (absl::Status s = reloader->Start(); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("--config_poll_interval: ", s.message()));
  }
  return reloader;
}

}  // namespace stagger::daemon
