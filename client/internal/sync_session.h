// SyncSession: one client's lease stream to one coordinator replica
// (proto/stagger/v1/sync.proto), and the LeaseBook it keeps
// (core/lease/lease_book.h). stagger-agent and a C++ client with
// ClientOptions::leases run the same code.
//
//   * A writer thread keeps a stream open: the hello first, then the
//     counts the replica has not acknowledged (after a reconnect: re-sent,
//     never lost), then every flush_interval the book's counts, asks and
//     acknowledgements; asks and acks go out within kNudge of being due.
//   * A reader thread applies what comes down: applied_seq, grants,
//     revokes (each acknowledged with the next message).
//   * FlushFor(endpoint, timeout): sends that endpoint's pending counts at
//     once and waits, at most `timeout`, until the replica has applied
//     them; called before a failure report is forwarded, so the replica
//     learns the successes before the failure.
//   * A broken stream is reopened with jittered backoff (kMinBackoff
//     doubling to max_backoff). Meanwhile the book keeps its leases until
//     they run out, and its counts; calls go to the coordinator or, if it
//     is away too, to the client's fallback.
// Thread-safe. The channel must outlive the session.
#ifndef STAGGER_CLIENT_INTERNAL_SYNC_SESSION_H_
#define STAGGER_CLIENT_INTERNAL_SYNC_SESSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/clock.h"
#include "core/lease/lease_book.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "stagger/v1/sync.grpc.pb.h"

namespace stagger::client {

class SyncSession {
 public:
  static constexpr absl::Duration kNudge = absl::Milliseconds(5);
  static constexpr absl::Duration kMinBackoff = absl::Milliseconds(100);

  struct Options {
    std::string agent_id;      // 1..256 bytes
    uint64_t incarnation = 0;  // != 0
    absl::Duration flush_interval = absl::Milliseconds(500);
    absl::Duration max_backoff = absl::Seconds(1);
    const engine::Clock* clock = nullptr;  // the book's time
  };
  SyncSession(std::shared_ptr<grpc::Channel> channel, Options options);
  ~SyncSession();  // ends the stream and joins the threads
  SyncSession(const SyncSession&) = delete;
  SyncSession& operator=(const SyncSession&) = delete;

  lease::LeaseBook& book() { return book_; }
  const lease::LeaseBook& book() const { return book_; }
  const Options& options() const { return options_; }
  bool connected() const { return connected_.load(std::memory_order_relaxed); }
  bool FlushFor(absl::string_view endpoint, absl::Duration timeout);
  // Something is due (a first attempt without a lease): send soon.
  void Nudge();

  // For metrics.
  int64_t flushes() const { return flushes_.load(std::memory_order_relaxed); }
  int64_t reconnects() const {
    return reconnects_.load(std::memory_order_relaxed);
  }

 private:
  void Run();  // the writer thread
  // One stream, from hello to break (or stop).
  void Stream(std::unique_ptr<v1::AgentSync::Stub>& stub);
  void Read(grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>* stream);
  // The next message due now, if any (blocks until one is, or the stream
  // broke, or stop). False: stop writing.
  bool NextMessage(absl::Time* next_flush, v1::SyncUp* up);

  const std::shared_ptr<grpc::Channel> channel_;
  const Options options_;
  lease::LeaseBook book_;
  std::atomic<bool> connected_{false};
  std::atomic<int64_t> flushes_{0};
  std::atomic<int64_t> reconnects_{0};

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // the current stream ended
  bool nudged_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<lease::CountReport> urgent_ ABSL_GUARDED_BY(mu_);
  uint64_t applied_ ABSL_GUARDED_BY(mu_) = 0;
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;  // to cancel
  std::thread writer_;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_SYNC_SESSION_H_
