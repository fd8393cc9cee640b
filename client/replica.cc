#include "client/replica.h"

#include <chrono>
#include <utility>

namespace stagger::client {

Replica::Replica(std::string name, std::shared_ptr<grpc::Channel> channel,
                 absl::Duration recheck_interval, const engine::Clock* clock,
                 ClientMetrics* metrics, std::function<void()> on_change)
    : name_(std::move(name)),
      channel_(std::move(channel)),
      stub_(v1::RetryCoordinator::NewStub(channel_)),
      recheck_interval_(recheck_interval),
      clock_(clock),
      metrics_(metrics),
      on_change_(std::move(on_change)) {
  channel_->GetState(/*try_to_connect=*/true);  // connect before first call
  watcher_ = std::thread([this] { Watch(); });
}

Replica::~Replica() {
  stop_.Notify();
  watcher_.join();
}

void Replica::Watch() {
  // Period of one watch: bounds how long the destructor waits.
  constexpr absl::Duration kWatchPeriod = absl::Milliseconds(100);
  grpc_connectivity_state last = channel_->GetState(/*try_to_connect=*/true);
  while (!stop_.HasBeenNotified()) {
    // Returns on a state change or after the period; while it waits, this
    // thread polls the channel's connections.
    channel_->WaitForStateChange(
        last, absl::ToChronoTime(absl::Now() + kWatchPeriod));
    const grpc_connectivity_state now =
        channel_->GetState(/*try_to_connect=*/true);
    if (now == GRPC_CHANNEL_READY && last != GRPC_CHANNEL_READY) OnReady();
    last = now;
  }
}

void Replica::OnReady() {
  absl::MutexLock l(&mu_);
  if (!up_) next_probe_ = absl::InfinitePast();
}

bool Replica::TryUse() {
  absl::MutexLock l(&mu_);
  if (up_) return true;
  const absl::Time now = clock_->Now();
  if (now < next_probe_) return false;
  // This call is the probe; others skip the replica until it answers (or
  // for another interval if it fails).
  next_probe_ = now + recheck_interval_;
  return true;
}

void Replica::MarkUp() {
  {
    absl::MutexLock l(&mu_);
    if (up_) return;
    up_ = true;
  }
  on_change_();
}

void Replica::MarkDown(grpc::StatusCode code) {
  {
    absl::MutexLock l(&mu_);
    up_ = false;
    next_probe_ = clock_->Now() + recheck_interval_;
  }
  metrics_->CountCoordinatorError(code);
  on_change_();
}

bool Replica::up() const {
  absl::MutexLock l(&mu_);
  return up_;
}

bool Replica::WaitForConnected(absl::Duration timeout) {
  return channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace stagger::client
