// SyncHub: staggerd's side of the lease streams (proto/stagger/v1/sync.proto,
// protocol 2) around the plain protocol code (core/lease/replica_sync.h):
// the ReplicaSync, the open streams, and one thread that pushes the
// not-clear set's changes to them.
//
//   * Open(first, peer) / Receive(stream, up): the protocol's answer to a
//     message up (ReplicaSync), as bytes for the stream to write. Open
//     registers the peer; the snapshot it answers is ordered before any
//     push made after it.
//   * The pusher thread runs ReplicaSync::Tick at its NextTick (changes
//     wait at most ReplicaSync::kCoalesce). A delta is serialized ONCE and
//     the same bytes go to every open stream (SyncPeer::Push).
//   * Close(stream, peer): the stream ended (its lease record stays until
//     the lease has ended).
//   * Resync(stream): a snapshot, for a stream whose pushes were dropped
//     because it fell behind (SyncPeer decides; sync_service.h).
//   * Shutdown(): every stream ends (OK); later opens are refused: drain.
// Metrics (may be null): messages are counted by the stream; the hub keeps
// stagger_leases (live stream leases), stagger_not_clear_entries and the
// renewals granted.
// Thread-safe. Lock order: this hub's lock, then a stream's; the hub calls
// ReplicaSync (which may call the engine) with its lock held only from the
// pusher thread, and the engine never calls back into the hub.
#ifndef STAGGER_SERVER_SERVICE_SYNC_HUB_H_
#define STAGGER_SERVER_SERVICE_SYNC_HUB_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/engine/clock.h"
#include "core/lease/replica_sync.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/metrics/server_metrics.h"
#include "stagger/v1/sync.pb.h"

namespace stagger::service {

// What a stream offers the hub: pushes and an end. The hub calls them
// under its own lock; a stream's Close happens before it is destroyed.
class SyncPeer {
 public:
  // The stream is open as `stream`: `first` goes out before any push.
  virtual void Opened(uint64_t stream, const v1::SyncDown& first) = 0;
  // A push shared by every stream (droppable if the stream fell behind).
  virtual void Push(const grpc::ByteBuffer& shared) = 0;
  virtual void End() = 0;

 protected:
  ~SyncPeer() = default;
};

class SyncHub {
 public:
  // `engine`, `metrics` (null: none) and `mono` (the lease's monotonic
  // clock; tests pass a fake one) must outlive the hub. Starts the pusher
  // thread. `attach` connects the ReplicaSync to the engine's feeds (a
  // daemon's fan-outs); null: ReplicaSync::AttachToEngine() takes them.
  using Attach = std::function<void(lease::ReplicaSync&)>;
  SyncHub(engine::Engine* engine, lease::ReplicaSync::Options options,
          metrics::ServerMetrics* metrics,
          const engine::Clock* mono = engine::MonotonicClock::Instance(),
          Attach attach = nullptr);
  ~SyncHub();  // Shutdown(), then the thread stops

  // Unavailable after Shutdown, or the protocol's error (the stream ends
  // with it); else the peer is told its id and first message (Opened)
  // before this returns.
  absl::Status Open(const lease::Up& first, SyncPeer* peer);
  absl::StatusOr<v1::SyncDown> Receive(uint64_t stream, const lease::Up& up);
  void Close(uint64_t stream, SyncPeer* peer);
  v1::SyncDown Resync(uint64_t stream);
  void Shutdown();

  lease::ReplicaSync& sync() { return *sync_; }
  int64_t streams() const;

 private:
  void Run();  // the pusher thread
  void Publish(const lease::ReplicaSync::Stats& s);

  metrics::ServerMetrics* const metrics_;
  const engine::Clock* const mono_;
  std::unique_ptr<lease::ReplicaSync> sync_;
  // The pusher sleeps on this leaf lock; a change's first notice wakes it.
  absl::Mutex wake_mu_;
  bool woken_ ABSL_GUARDED_BY(wake_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(wake_mu_) = false;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<uint64_t, SyncPeer*> peers_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_SYNC_HUB_H_
