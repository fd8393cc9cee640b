#include "server/daemon/endpoint_watch.h"

#include <utility>

namespace stagger::daemon {

absl::Status CheckWatchFlags(const service::WatchLog::Options& options) {
  return service::WatchLog::CheckOptions(options);
}

EndpointWatch::EndpointWatch(engine::Engine* engine,
                             service::WatchLog::Options options)
    : engine_(engine),
      log_(std::move(options), engine->clock()),
      feed_(&log_),
      refresher_(engine, engine->clock(),
                 [this](const engine::Pause& p) { feed_.OnPauseRanOut(p); }) {
  fan_out_.Add(&feed_);
  fan_out_.Add(&refresher_);
  engine_->set_condition_sink(&fan_out_);
  pause_fan_out_.Add([this](const engine::Pause& p, bool removed) {
    feed_.OnPause(p, removed);
  });
  pause_fan_out_.Add([this](const engine::Pause& p, bool removed) {
    refresher_.OnPause(p, removed);
  });
  engine_->pauses().set_listener(pause_fan_out_.listener());
}

EndpointWatch::~EndpointWatch() {
  refresher_.Stop();
  service_.reset();
}

void EndpointWatch::HookMetrics(metrics::ServerMetrics* metrics) {
  metrics_ = metrics;
  if (metrics != nullptr) {
    log_.set_on_append([metrics] { metrics->RecordWatchEvents(1); });
  }
}

void EndpointWatch::Start() {
  service_ = std::make_unique<service::WatchService>(&log_, metrics_);
  refresher_.Start();
}

void EndpointWatch::StopRefresher() { refresher_.Stop(); }

void EndpointWatch::Shutdown() {
  if (service_ != nullptr) service_->Shutdown();
}

}  // namespace stagger::daemon
