// AckHistory: when one stream's acknowledgements of set versions arrived
// at the replica, kept small. A probe asks "since when does this agent
// hold version v?" (FirstCovering), and the answer may only err late.
//
// The newest kRecent acknowledgements are kept exactly; older ones fold
// into one floor (version, time): "held v_floor by t_floor". Folding moves
// an answer later, never earlier, so a probe never goes too soon.
// Not thread-safe (its owner locks).
#ifndef STAGGER_CORE_LEASE_ACK_HISTORY_H_
#define STAGGER_CORE_LEASE_ACK_HISTORY_H_

#include <cstdint>
#include <deque>
#include <utility>

#include "absl/time/time.h"

namespace stagger::lease {

class AckHistory {
 public:
  static constexpr size_t kRecent = 16;

  // Version `v` acknowledged at `at` (non-decreasing). Older or equal
  // versions than the latest change nothing.
  void Add(uint64_t v, absl::Time at);
  // The arrival of the first acknowledgement of a version >= v (an upper
  // bound after folding); InfiniteFuture if none has come.
  absl::Time FirstCovering(uint64_t v) const;
  uint64_t latest() const { return latest_; }

 private:
  uint64_t latest_ = 0;
  uint64_t floor_version_ = 0;
  absl::Time floor_time_ = absl::InfinitePast();
  std::deque<std::pair<uint64_t, absl::Time>> recent_;
};

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_ACK_HISTORY_H_
