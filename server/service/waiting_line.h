// WaitingLine: one endpoint's waiting calls (server/service/wait_room.h),
// kept in three orders so that a look at the line touches only the calls
// that can go now.
//
//   * The gated line: calls that the endpoint's gates hold (an open
//     breaker, a Retry-After window, a pause, the release pace), most
//     urgent deadline first, then arrival. A release walks it from its
//     head and stops at the first call the gates hold: the calls behind it
//     wait for the same gates.
//   * The backoff set: calls held only by their own backoff
//     (engine::WaitState::backoff: a retry asked during its backoff), by
//     arrival. Such a call may go early only on evidence that the endpoint
//     recovered after it arrived (a success, or the end of a Retry-After
//     window: engine::Engine::LastEvidence). TakeEvidence(at) moves the
//     calls that arrived before `at` into the gated line, oldest first,
//     and never touches the others. A line of backoff waiters without new
//     evidence therefore costs a look nothing but that one question.
//   * By expiry: every call, soonest first (a look answers those whose
//     time is up, wherever they are).
//
// Usage (the room, under its lock):
//   line.Add(call, {deadline, since, expiry, backoff});
//   line.TakeEvidence(engine.LastEvidence(key));
//   for (Call c = line.FirstGated(); c != nullptr;) {
//     Call next = line.GatedAfter(c);
//     ... recheck c: answer it (Remove), stop (the gates hold it), or
//     MoveToBackoff(c) (only its own backoff holds it) ...
//     c = next;
//   }
//
// Plain code: no lock, no clock, no engine. `Call` is a pointer type the
// line never dereferences; each call is in at most one line, once.
#ifndef STAGGER_SERVER_SERVICE_WAITING_LINE_H_
#define STAGGER_SERVER_SERVICE_WAITING_LINE_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

namespace stagger::service {

template <typename Call>
class WaitingLine {
 public:
  struct Position {
    absl::Time deadline;  // urgency: the worker's deadline
    absl::Time since;     // arrival
    absl::Time expiry;    // when its wait runs out
    bool backoff = false;  // held only by its own backoff (on arrival)
  };

  // `call` must not be in the line.
  void Add(Call call, const Position& p) {
    const Slot slot{p, next_seq_++, p.backoff};
    slots_[call] = slot;
    by_expiry_.insert({p.expiry, slot.seq, call});
    (p.backoff ? backoff_ : gated_).insert(KeyOf(call, slot));
  }

  // False if `call` is not in the line.
  bool Remove(Call call) {
    auto it = slots_.find(call);
    if (it == slots_.end()) return false;
    const Slot& s = it->second;
    by_expiry_.erase({s.pos.expiry, s.seq, call});
    (s.in_backoff ? backoff_ : gated_).erase(KeyOf(call, s));
    slots_.erase(it);
    return true;
  }

  bool empty() const { return slots_.empty(); }
  size_t size() const { return slots_.size(); }
  size_t gated() const { return gated_.size(); }
  size_t in_backoff() const { return backoff_.size(); }

  // The call that expires first, and when (InfiniteFuture if none).
  Call FirstToExpire() const {
    return by_expiry_.empty() ? Call() : by_expiry_.begin()->call;
  }
  absl::Time next_expiry() const {
    return by_expiry_.empty() ? absl::InfiniteFuture()
                              : by_expiry_.begin()->order;
  }

  // Moves every backoff call that arrived before `evidence` into the gated
  // line; returns how many.
  size_t TakeEvidence(absl::Time evidence) {
    size_t moved = 0;
    while (!backoff_.empty() && backoff_.begin()->order < evidence) {
      const Call call = backoff_.begin()->call;
      backoff_.erase(backoff_.begin());
      Slot& s = slots_[call];
      s.in_backoff = false;
      gated_.insert(KeyOf(call, s));
      ++moved;
    }
    return moved;
  }

  // A gated-line call that only its own backoff holds after all (the
  // evidence that moved it went away: a new Retry-After window began).
  void MoveToBackoff(Call call) {
    auto it = slots_.find(call);
    if (it == slots_.end() || it->second.in_backoff) return;
    gated_.erase(KeyOf(call, it->second));
    it->second.in_backoff = true;
    backoff_.insert(KeyOf(call, it->second));
  }

  // The gated line, most urgent first: its head, and the call after `call`
  // (which must be in the line); null at the end.
  Call FirstGated() const {
    return gated_.empty() ? Call() : gated_.begin()->call;
  }
  Call GatedAfter(Call call) const {
    auto it = slots_.find(call);
    if (it == slots_.end() || it->second.in_backoff) return Call();
    auto next = gated_.upper_bound(KeyOf(call, it->second));
    return next == gated_.end() ? Call() : next->call;
  }

 private:
  struct Slot {
    Position pos;
    uint64_t seq = 0;
    bool in_backoff = false;
  };
  struct Key {
    absl::Time order;
    uint64_t seq;
    Call call;
    bool operator<(const Key& o) const {
      return order != o.order ? order < o.order : seq < o.seq;
    }
  };
  // Its key in the set it is in: the backoff set by arrival, the gated
  // line by deadline.
  static Key KeyOf(Call call, const Slot& s) {
    return {s.in_backoff ? s.pos.since : s.pos.deadline, s.seq, call};
  }

  uint64_t next_seq_ = 0;
  absl::flat_hash_map<Call, Slot> slots_;
  absl::btree_set<Key> gated_;
  absl::btree_set<Key> backoff_;
  absl::btree_set<Key> by_expiry_;
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_WAITING_LINE_H_
