#include "server/daemon/eviction_loop.h"

#include <utility>

namespace stagger::daemon {

EvictionLoop::EvictionLoop(engine::Engine* engine)
    : engine_(engine), wait_([this](absl::Duration period) {
        return stop_.WaitForNotificationWithTimeout(period);
      }) {}

EvictionLoop::EvictionLoop(engine::Engine* engine, Wait wait)
    : engine_(engine), wait_(std::move(wait)) {}

EvictionLoop::~EvictionLoop() { Stop(); }

absl::Duration EvictionLoop::CurrentPeriod() const {
  return engine::EvictionPeriod(engine_->config().limits.idle_eviction);
}

void EvictionLoop::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void EvictionLoop::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void EvictionLoop::Run() {
  while (!wait_(CurrentPeriod())) {
    engine_->EvictIdle();
    if (each_round_) each_round_();
  }
}

}  // namespace stagger::daemon
