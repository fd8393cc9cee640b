// SyncWatcher: one lease stream to staggerd, opened as an agent opens it
// (proto/stagger/v1/sync.proto, protocol 2), that records when each key of
// the not-clear set reaches it. stagger-push-bench opens several.
//
// What it does as an agent would:
//   * the hello (protocol 2, no members: one coordinator, which owns every
//     key; next_count_seq 1), as message number 1;
//   * a message up every `flush_interval`, which renews the stream lease,
//     acknowledging the copy held (acked_incarnation, acked_version);
//   * an acknowledgement at once after a delta that added entries (an
//     agent sends it within 5 ms: the replica's probes wait for it);
//   * the snapshot replaces the copy; a delta applies from any version in
//     [from_version, to_version), otherwise a resync is asked for.
// It sends no counts and answers nothing: it only watches.
// What it records, on the steady clock (NowNs, steady_now.h): when
// each endpoint key first arrived as an added entry (a snapshot's entries
// included), each message down and its size (protobuf bytes: the
// serialized SyncDown, without gRPC's 5-byte and HTTP/2's framing), and
// entries added again for a key already held (the replica must not push
// changes within not-clear, e.g. OPEN to HALF_OPEN).
// Thread-safe: a reader and a writer thread of its own; read it from any.
//
//   SyncWatcher w({.target = "127.0.0.1:50051", .agent_id = "watch-1"});
//   if (!w.Start().ok()) ...;
//   ... until w.leased() ...;  ... w.ArrivedAt(key) ...;
//   w.Stop();
#ifndef STAGGER_BENCH_AGENT_SYNC_WATCHER_H_
#define STAGGER_BENCH_AGENT_SYNC_WATCHER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/lease/time_bounds.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/sync.grpc.pb.h"

namespace stagger::bench {

class SyncWatcher {
 public:
  struct Options {
    std::string target;    // staggerd, host:port
    std::string agent_id;  // 1..256 bytes
    uint64_t incarnation = 1;  // != 0
    absl::Duration flush_interval = lease::kDefaultFlushInterval;
    int channel_index = 0;  // makes the connection its own
  };
  // One message down: when it arrived and its serialized size.
  struct Message {
    int64_t at_ns = 0;
    int64_t bytes = 0;
  };

  explicit SyncWatcher(Options options);
  ~SyncWatcher();  // Stop()

  // Connects (within `timeout`), sends the hello and starts the threads.
  absl::Status Start(absl::Duration timeout);
  void Stop();

  bool leased() const;           // a renewal has come
  std::string refusal() const;   // the replica's, if it refused a lease
  std::string ended() const;     // why the stream ended, if it did
  std::optional<int64_t> ArrivedAt(const std::string& key) const;
  // How many of `keys` have arrived.
  size_t CountArrived(const std::vector<std::string>& keys) const;
  std::vector<Message> messages() const;
  int64_t readded() const;

 private:
  void ReadLoop();
  void WriteLoop();
  void Apply(const v1::SyncDown& down, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Added(const v1::NotClear& e, int64_t now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options o_;
  grpc::ClientContext ctx_;
  std::unique_ptr<v1::AgentSync::Stub> stub_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>> stream_;
  std::thread reader_, writer_;

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;  // Stop() was called
  bool done_ ABSL_GUARDED_BY(mu_) = false;  // the stream ended
  bool ack_due_ ABSL_GUARDED_BY(mu_) = false;
  bool resync_ ABSL_GUARDED_BY(mu_) = false;
  bool leased_ ABSL_GUARDED_BY(mu_) = false;
  std::string refusal_ ABSL_GUARDED_BY(mu_);
  std::string ended_ ABSL_GUARDED_BY(mu_);
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t number_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int64_t> arrived_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> held_ ABSL_GUARDED_BY(mu_);
  std::vector<Message> messages_ ABSL_GUARDED_BY(mu_);
  int64_t readded_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_SYNC_WATCHER_H_
