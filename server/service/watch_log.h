// WatchLog: one replica's change log, what the watch streams
// (stagger.v1.EndpointWatch, watch_service.h) and the status page's feed
// (api/events) read. Events are numbered 1, 2, 3, ... within the log's
// incarnation (random, new at every start of staggerd): contiguous, in the
// order they were appended.
//
// Contract:
//  - Append(e) numbers `e` and stamps it with the log's clock; the caller
//    sets its kind, endpoint and details. Cheap (one lock, a move): the
//    engine's condition feed calls it under an endpoint's shard lock.
//  - The history is bounded twice: at most `max_events` events, and none
//    older than `max_age` (trimmed at every append and read). Memory is
//    about 300 bytes per event plus its key.
//  - Read(from, filter, max): the events numbered >= `from` that pass the
//    filter, at most `max`, examining at most kMaxExamined events; `next`
//    is where the following read starts (past everything examined, so a
//    filtered-out stretch is not examined twice). When `from` is older
//    than the history, the gap comes back as missed_from..missed_to and
//    the page starts at the oldest event held. Events come back with the
//    replica's name and incarnation filled in.
//  - WaitForNew(seen, deadline): blocks until an event numbered >= `seen`
//    exists, the deadline passes, or WakeWaiters() is called.
//  - Resume tokens: TokenFor(next) is "<incarnation, 16 hex>.<next>";
//    ParseToken refuses anything else with InvalidArgument naming
//    "resume_token".
//
//   WatchLog log({.replica = "stagger-0"}, &clock);
//   v1::WatchEvent e;
//   e.set_kind(v1::EVENT_DISABLED);
//   e.set_endpoint("https://a/");
//   log.Append(std::move(e));                    // sequence 1
//   WatchLog::Page p = log.Read(1, {}, 100);     // p.events[0], p.next == 2
//
// Thread-safe.
#ifndef STAGGER_SERVER_SERVICE_WATCH_LOG_H_
#define STAGGER_SERVER_SERVICE_WATCH_LOG_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/clock.h"
#include "stagger/v1/watch.pb.h"

namespace stagger::service {

class WatchLog {
 public:
  static constexpr int64_t kDefaultMaxEvents = 100000;
  static constexpr int64_t kMinMaxEvents = 100;
  static constexpr int64_t kMaxMaxEvents = 10000000;
  static constexpr absl::Duration kDefaultMaxAge = absl::Hours(1);
  static constexpr absl::Duration kMinMaxAge = absl::Seconds(10);
  static constexpr absl::Duration kMaxMaxAge = absl::Hours(24 * 7);
  static constexpr size_t kMaxExamined = 10000;

  struct Options {
    std::string replica;
    uint64_t incarnation = 0;  // 0: a random one
    int64_t max_events = kDefaultMaxEvents;
    absl::Duration max_age = kDefaultMaxAge;
  };
  // The events a reader wants.
  struct Filter {
    std::string prefix;     // empty: every endpoint (watch.proto's rule)
    uint32_t kinds = 0;     // bit k: EventKind k; 0: every kind
    bool Matches(const v1::WatchEvent& e) const;
  };
  struct Page {
    std::vector<v1::WatchEvent> events;
    uint64_t next = 1;
    uint64_t missed_from = 0;  // 0: nothing missed
    uint64_t missed_to = 0;
  };
  struct Position {
    uint64_t incarnation = 0;
    uint64_t next = 1;
  };

  WatchLog(Options options, const engine::Clock* clock);
  WatchLog(const WatchLog&) = delete;
  WatchLog& operator=(const WatchLog&) = delete;

  uint64_t Append(v1::WatchEvent e);
  Page Read(uint64_t from, const Filter& filter, size_t max);
  bool WaitForNew(uint64_t seen, absl::Time deadline);
  void WakeWaiters();

  // Told the number of every event appended, after the log's lock is
  // released (metrics). Set before use.
  void set_on_append(std::function<void()> f) { on_append_ = std::move(f); }

  uint64_t incarnation() const { return incarnation_; }
  const std::string& replica() const { return replica_; }
  // The number the next event will get; the oldest one held (== next
  // when none is).
  uint64_t next_sequence() const;
  uint64_t oldest() const;
  size_t size() const;

  std::string TokenFor(uint64_t next) const;
  static absl::StatusOr<Position> ParseToken(absl::string_view token);

  // Checks for the flags (--watch_history_events, --watch_history_age):
  // InvalidArgument naming the flag.
  static absl::Status CheckOptions(const Options& o);

 private:
  void TrimLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string replica_;
  const uint64_t incarnation_;
  const size_t max_events_;
  const absl::Duration max_age_;
  const engine::Clock* clock_;
  std::function<void()> on_append_;
  mutable absl::Mutex mu_;
  std::deque<v1::WatchEvent> events_ ABSL_GUARDED_BY(mu_);
  uint64_t first_ ABSL_GUARDED_BY(mu_) = 1;  // number of events_.front()
  uint64_t wakes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_WATCH_LOG_H_
