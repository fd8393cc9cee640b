// SyncSession: one client's lease stream to one coordinator replica
// (proto/stagger/v1/sync.proto, protocol 2): gRPC and threads around the
// plain protocol code of core/lease/agent_link.h, which decides everything.
// stagger-agent and a C++ client with ClientOptions::leases run the same
// code.
//
//   * A writer thread keeps a stream open: AgentLink::OnOpen's messages
//     first (the hello, then every count report not yet applied), then
//     whatever AgentLink::Poll says is due (every flush_interval; within
//     AgentLink::kNudge of a change the replica waits to hear acknowledged),
//     and FlushFor's counts at once. A new stream waits for the channel to
//     connect (wait for ready), so it opens as soon as the replica is back.
//   * A reader thread hands every message down to the link (the set's
//     snapshot and deltas, renewals, applied counts) and answers held calls.
//   * An answerer thread ends the held calls whose time ran out and runs
//     the `done`s of calls dropped or ended. The writer may block in Write
//     for as long as the replica does not read (HTTP/2 flow control); no
//     held call waits for it.
//   * Admit / Report: the link's local answer, or nullopt (ask the
//     coordinator). LocalOk / Current / StandsInFor: what the client's
//     rule for local answers reads (lease::MayAnswerLocally).
//   * FlushFor(endpoint, timeout): that endpoint's counts go at once, and the
//     call waits (at most `timeout`) until the replica applied them; called
//     before a failure report is forwarded, so the replica learns the
//     successes before the failure.
//   * Hold(request, answer_by, done): a waiting Admit handed to the replica
//     over the stream (sync.proto, "Held calls"); the replica answers it
//     once. `done` gets that answer, at the latest by its give-up time,
//     min(now + request.wait + kHeldGrace, answer_by) (plus the answerer's
//     scheduling): DEADLINE_EXCEEDED then, the replica's answer late (the
//     caller decides by its fallback at once); UNAVAILABLE if the stream
//     broke first or the session ends (the caller sends the call another
//     way, unless it is closing); CANCELLED after Drop(id). `done` runs on
//     one of the session's threads, never inside Hold or Drop. An answer
//     that arrives for a dropped id and let a delivery go is sent back
//     (SyncUp.returns), so a probe goes on to the next waiter. Hold takes
//     nothing (nullopt) while the stream is not up, or while a write has
//     been blocked for kStuckWrite (the replica does not read).
//   * A broken stream is reopened with jittered backoff (kMinBackoff
//     doubling to max_backoff). Meanwhile the link keeps its lease until it
//     ends, its copy of the set, and its counts.
// Thread-safe. The channel must outlive the session.
#ifndef STAGGER_CLIENT_INTERNAL_SYNC_SESSION_H_
#define STAGGER_CLIENT_INTERNAL_SYNC_SESSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/clock.h"
#include "client/internal/held_book.h"
#include "core/lease/agent_link.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "stagger/v1/sync.grpc.pb.h"

namespace stagger::client {

class SyncSession final : public lease::LinkView {
 public:
  static constexpr absl::Duration kNudge = absl::Milliseconds(5);
  static constexpr absl::Duration kMinBackoff = absl::Milliseconds(100);

  struct Options {
    std::string agent_id;      // 1..256 bytes
    uint64_t incarnation = 0;  // != 0
    std::vector<std::string> members;  // the client's members, by name
    absl::Duration flush_interval = lease::kDefaultFlushInterval;
    absl::Duration max_backoff = absl::Seconds(1);
    // The lease's clock: monotonic (engine::MonotonicClock in production).
    const engine::Clock* clock = nullptr;
  };
  SyncSession(std::shared_ptr<grpc::Channel> channel, Options options);
  ~SyncSession();  // ends the stream and joins the threads
  SyncSession(const SyncSession&) = delete;
  SyncSession& operator=(const SyncSession&) = delete;

  const Options& options() const { return options_; }
  bool connected() const { return connected_.load(std::memory_order_relaxed); }
  // The members the client routes over (its hello names them). The first
  // stream waits for them; a change reopens the stream.
  void SetMembers(std::vector<std::string> members);

  std::optional<engine::Decision> Admit(const engine::AdmitInput& in,
                                        absl::BitGenRef rng);
  std::optional<engine::Decision> Report(const engine::ReportInput& in);
  bool LocalOk(absl::string_view key, absl::Time now) const override;
  bool Current(absl::Time now) const override;
  bool StandsInFor(absl::string_view member) const override;
  // The entry of the replica's set covering `key` (a fallback keeps to it).
  std::optional<lease::NotClearEntry> Covering(absl::string_view key) const;
  lease::AgentLink::Status status() const;
  lease::AgentLink::EntryPage ListEntries(absl::string_view after,
                                         size_t max) const;
  absl::Time Now() const { return options_.clock->Now(); }
  bool FlushFor(absl::string_view endpoint, absl::Duration timeout);

  // How long after its wait a held call's answer may come (HeldBook).
  static constexpr absl::Duration kHeldGrace = HeldBook::kHeldGrace;
  // A write blocked this long: the replica does not read; new held calls
  // go another way.
  static constexpr absl::Duration kStuckWrite = absl::Seconds(1);
  using HeldDone = HeldBook::Done;
  // Nothing taken (nullopt) if the stream is not up. request.wait > 0;
  // answer_by is real time.
  std::optional<uint64_t> Hold(v1::AdmitRequest request, absl::Time answer_by,
                               HeldDone done);
  void Drop(uint64_t id);
  int64_t held() const;

  // For metrics.
  int64_t flushes() const { return flushes_.load(std::memory_order_relaxed); }
  int64_t reconnects() const {
    return reconnects_.load(std::memory_order_relaxed);
  }

 private:
  void Run();       // the writer thread
  void Answerer();  // the answerer thread
  // One stream, from hello to break (or stop).
  void Stream(std::unique_ptr<v1::AgentSync::Stub>& stub);
  void Read(grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>* stream);
  // One message up; writing_since_ says how long it has been blocked.
  bool Write(grpc::ClientReaderWriter<v1::SyncUp, v1::SyncDown>* stream,
             const v1::SyncUp& up);
  // The next message due, blocking until one is (or the stream broke, or
  // stop). False: stop writing.
  bool NextMessage(v1::SyncUp* up);
  bool WriteStuck(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunFinished();  // the `done`s due, outside the lock

  const std::shared_ptr<grpc::Channel> channel_;
  const Options options_;
  std::atomic<bool> connected_{false};
  std::atomic<int64_t> flushes_{0};
  std::atomic<int64_t> reconnects_{0};

  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // the current stream ended
  bool nudged_ ABSL_GUARDED_BY(mu_) = false;   // held calls to send, or done
  bool members_set_ ABSL_GUARDED_BY(mu_) = false;
  lease::AgentLink link_ ABSL_GUARDED_BY(mu_);
  std::deque<lease::Up> urgent_ ABSL_GUARDED_BY(mu_);  // FlushFor's
  grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;  // to cancel
  // When the write in progress started (real time); InfiniteFuture: none.
  absl::Time writing_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // The held calls (held_book.h): each ends once, through a `done` the
  // answerer runs (RunFinished).
  HeldBook held_ ABSL_GUARDED_BY(mu_);
  bool new_give_up_ ABSL_GUARDED_BY(mu_) = false;  // an earlier one came
  std::thread writer_;
  std::thread answerer_;
};

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_SYNC_SESSION_H_
