// CountBook: the counts an agent owes one replica: the first attempts and
// successes it answered itself, in kBucket-wide buckets by when they
// happened (on the replica's clock, as lower bounds), numbered into
// reports that the replica applies exactly once.
//
//   * Count(key, first_attempt, at, clock): one local answer at `at`, on
//     the clock of replica incarnation `clock`. A report carries the one
//     clock all its times are on, or 0 when its counts came under two
//     (a reconnect to a restarted replica).
//   * TakeReport(): every pending count as report seq = next; TakeFor(key)
//     does it for one key (before a failure report on it). A report stays
//     kept until OnApplied covers it; Unacked() is what a new stream sends
//     first, so a report is re-sent after a reconnect and never lost.
//   * At most kMaxUnacked reports are kept. Beyond, the oldest is dropped
//     and the next report kept says so (CountReport::lost), so the replica
//     counts the loss instead of refusing the gap.
// Not thread-safe (its owner locks).
#ifndef STAGGER_CORE_LEASE_COUNT_BOOK_H_
#define STAGGER_CORE_LEASE_COUNT_BOOK_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/lease/messages.h"

namespace stagger::lease {

class CountBook {
 public:
  static constexpr absl::Duration kBucket = absl::Milliseconds(100);
  static constexpr size_t kMaxUnacked = 1024;

  void Count(absl::string_view key, bool first_attempt, absl::Time at,
             uint64_t clock);
  std::optional<CountReport> TakeReport();
  std::optional<CountReport> TakeFor(absl::string_view key);
  void OnApplied(uint64_t seq);
  std::vector<CountReport> Unacked() const;
  // The first seq a new stream will carry (the oldest unacked, else next).
  uint64_t first_unacked() const {
    return unacked_.empty() ? next_seq_ : unacked_.front().seq;
  }
  bool has_pending() const { return !pending_.empty(); }
  uint64_t applied() const { return applied_; }
  // Reports dropped unsent so far (bound reached).
  int64_t dropped() const { return dropped_; }

 private:
  CountReport Number(std::vector<EndpointCounts> endpoints);
  void Keep(const CountReport& r);

  absl::flat_hash_map<std::string, std::vector<CountBucket>> pending_;
  uint64_t pending_clock_ = 0;  // what every pending time is on; 0: mixed
  std::deque<CountReport> unacked_;
  uint64_t next_seq_ = 1;
  uint64_t applied_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_COUNT_BOOK_H_
