#include "server/service/sync_hub.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "core/wire/sync_wire.h"

namespace stagger::service {
namespace {

grpc::ByteBuffer Serialize(const v1::SyncDown& down) {
  std::string bytes;
  down.SerializeToString(&bytes);
  grpc::Slice slice(std::move(bytes));
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace

SyncHub::SyncHub(engine::Engine* engine, lease::ReplicaSync::Options options,
                 metrics::ServerMetrics* metrics, const engine::Clock* mono,
                 Attach attach)
    : metrics_(metrics),
      mono_(mono),
      guard_(mono,
             [metrics](CountGuard::Cause cause, int64_t entries) {
               if (metrics != nullptr) {
                 metrics->RecordCountsDropped(
                     cause == CountGuard::Cause::kBucketCap
                         ? metrics::ServerMetrics::CountsDrop::kBucketCap
                         : metrics::ServerMetrics::CountsDrop::kAgentRate,
                     entries);
               }
             }),
      sync_(std::make_unique<lease::ReplicaSync>(std::move(options), engine,
                                                 mono)) {
  if (attach) {
    attach(*sync_);
  } else {
    sync_->AttachToEngine();
  }
  sync_->set_counts_filter(
      [this](const lease::AgentKey& agent, lease::CountReport* report) {
        guard_.Trim(agent, report);
      });
  if (metrics_ != nullptr) {
    sync_->set_counts_observer(
        [metrics](const lease::AgentKey&, const lease::CountReport& r) {
          int64_t first_attempts = 0, successes = 0;
          for (const lease::EndpointCounts& e : r.endpoints) {
            for (const lease::CountBucket& b : e.buckets) {
              first_attempts += b.first_attempts;
              successes += b.successes;
            }
          }
          metrics->RecordCounted(first_attempts, successes);
        });
  }
  sync_->set_on_pending([this] {
    absl::MutexLock l(&wake_mu_);
    woken_ = true;
  });
  thread_ = std::thread([this] { Run(); });
}

SyncHub::~SyncHub() {
  Shutdown();
  thread_.join();
}

absl::Status SyncHub::Open(const lease::Up& first, SyncPeer* peer,
                           const std::string& agent) {
  absl::MutexLock l(&mu_);  // the snapshot before any later push
  if (stop_) return absl::UnavailableError("draining");
  absl::StatusOr<lease::ReplicaSync::Opened> o = sync_->Open(first, agent);
  if (!o.ok()) return o.status();
  peers_[o->stream] = peer;
  v1::SyncDown down;
  wire::ToProto(o->first, &down);
  peer->Opened(o->stream, down);
  return absl::OkStatus();
}

absl::StatusOr<v1::SyncDown> SyncHub::Receive(uint64_t stream,
                                              const lease::Up& up) {
  absl::StatusOr<lease::Down> d = sync_->Receive(stream, up);
  if (!d.ok()) return d.status();
  v1::SyncDown out;
  wire::ToProto(*d, &out);
  return out;
}

void SyncHub::Close(uint64_t stream, SyncPeer* peer) {
  {
    absl::MutexLock l(&mu_);
    auto it = peers_.find(stream);
    if (it != peers_.end() && it->second == peer) peers_.erase(it);
  }
  if (stream != 0) sync_->Close(stream);
}

v1::SyncDown SyncHub::Resync(uint64_t stream) {
  resyncs_.fetch_add(1, std::memory_order_relaxed);
  v1::SyncDown out;
  wire::ToProto(sync_->Resync(stream), &out);
  return out;
}

void SyncHub::Shutdown() {
  {
    absl::MutexLock l(&wake_mu_);
    stopping_ = true;
  }
  absl::MutexLock l(&mu_);
  if (stop_) return;
  stop_ = true;
  for (auto& [id, peer] : peers_) peer->End();
}

int64_t SyncHub::streams() const {
  absl::MutexLock l(&mu_);
  return static_cast<int64_t>(peers_.size());
}

void SyncHub::Publish(const lease::ReplicaSync::Stats& s) {
  if (metrics_ == nullptr) return;
  metrics_->SetLeases(s.leases);
  metrics_->SetNotClearEntries(s.entries);
  metrics_->SetLeaseRenewals(s.renewals);
  metrics_->SetCountReports(s.counts_applied, s.counts_lost,
                            s.counts_duplicate);
}

void SyncHub::Run() {
  const engine::Clock* mono = mono_;
  absl::Time next_stats = absl::InfinitePast();
  while (true) {
    const absl::Duration wait =
        std::max(absl::ZeroDuration(), sync_->NextTick() - mono->Now());
    {
      absl::MutexLock l(&wake_mu_);
      const auto due = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(wake_mu_) {
        return woken_ || stopping_;
      };
      wake_mu_.AwaitWithTimeout(absl::Condition(&due), wait);
      if (stopping_) return;
      woken_ = false;
    }
    // Woken early: wait more (a fake clock in tests moves only when told;
    // look again every millisecond meanwhile).
    if (sync_->NextTick() > mono->Now()) {
      absl::SleepFor(absl::Milliseconds(1));
      continue;
    }
    {
      absl::MutexLock l(&mu_);
      // Under the lock: a stream opening now gets a snapshot either before
      // this delta's changes were taken, or after (then this delta starts
      // at or before its version, which an agent applies).
      if (std::optional<lease::Down> d = sync_->Tick()) {
        v1::SyncDown down;
        wire::ToProto(*d, &down);
        const grpc::ByteBuffer shared = Serialize(down);
        for (auto& [id, peer] : peers_) peer->Push(shared);
      }
    }
    if (mono->Now() >= next_stats) {
      next_stats = mono->Now() + absl::Seconds(1);
      Publish(sync_->stats());
    }
  }
}

}  // namespace stagger::service
