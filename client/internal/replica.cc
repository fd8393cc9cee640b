#include "client/internal/replica.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "grpcpp/client_context.h"

namespace stagger::client {

Replica::Replica(std::string name, std::string target,
                 std::shared_ptr<grpc::Channel> channel, Options options)
    : name_(std::move(name)),
      target_(std::move(target)),
      channel_(std::move(channel)),
      stub_(v1::RetryCoordinator::NewStub(channel_)),
      waiting_stub_(v1::RetryCoordinator::NewStub(
          options.waiting_channel != nullptr ? options.waiting_channel
                                             : channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)),
      options_(std::move(options)) {
  channel_->GetState(/*try_to_connect=*/true);  // connect before first call
  watcher_ = std::thread([this] { Watch(); });
  if (options_.sync.has_value()) {
    sync_ = std::make_unique<SyncSession>(channel_, *options_.sync);
  }
}

Replica::~Replica() {
  sync_.reset();
  stop_.Notify();
  watcher_.join();
}

void Replica::Watch() {
  // Period of one watch: bounds how long the destructor waits.
  constexpr absl::Duration kWatchPeriod = absl::Milliseconds(100);
  grpc_connectivity_state last = channel_->GetState(/*try_to_connect=*/true);
  absl::Time next_health = absl::Now();
  while (!stop_.HasBeenNotified()) {
    if (options_.health_interval > absl::ZeroDuration() &&
        absl::Now() >= next_health) {
      CheckHealth();
      next_health = absl::Now() + options_.health_interval;
    }
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

void Replica::CheckHealth() {
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("stagger.v1.RetryCoordinator");
  grpc::health::v1::HealthCheckResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(
      absl::Now() + std::max(options_.health_interval, absl::Milliseconds(100))));
  if (!health_->Check(&ctx, req, &resp).ok()) return;
  const bool serving =
      resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  const bool was = serving_.exchange(serving, std::memory_order_relaxed);
  if (serving && !was) OnReady();  // back: its keys may return at once
}

void Replica::OnReady() {
  absl::MutexLock l(&mu_);
  if (!up_) next_probe_ = absl::InfinitePast();
}

bool Replica::TryUse() {
  absl::MutexLock l(&mu_);
  if (up_) return true;
  const absl::Time now = options_.clock->Now();
  if (now < next_probe_) return false;
  // This call is the probe; others skip the replica until it answers (or
  // for another interval if it fails).
  next_probe_ = now + options_.recheck_interval;
  return true;
}

void Replica::MarkUp() {
  {
    absl::MutexLock l(&mu_);
    if (up_) return;
    up_ = true;
  }
  options_.on_change();
}

void Replica::MarkDown(grpc::StatusCode code) {
  {
    absl::MutexLock l(&mu_);
    up_ = false;
    next_probe_ = options_.clock->Now() + options_.recheck_interval;
  }
  options_.metrics->CountCoordinatorError(code);
  options_.on_change();
}

bool Replica::up() const {
  absl::MutexLock l(&mu_);
  return up_;
}

bool Replica::WaitForConnected(absl::Duration timeout) {
  return channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace stagger::client
