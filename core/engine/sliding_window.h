// SlidingWindow: counts over the last `window`, kept in kSlots slots of
// window/kSlots each (a ring). Counts older than the window fall out a slot
// at a time, so the window is exact to within one slot width. A clock that
// steps back by less than the window counts into the current slot; a step
// back of the whole window or more (a clock jump, or a change of the slot
// width after a configuration change, which rescales the slot index) starts
// the window afresh at the new position, so it never freezes at a head it
// cannot reach again. Not thread-safe (the engine
// holds the endpoint's shard lock). Small and allocation-free by design:
// it lives inside every tracked endpoint.
#ifndef STAGGER_CORE_ENGINE_SLIDING_WINDOW_H_
#define STAGGER_CORE_ENGINE_SLIDING_WINDOW_H_

#include <cstdint>

#include "core/engine/endpoint_record.h"

namespace stagger::engine {

template <typename Counts, int kSlots>
class SlidingWindow {
 public:
  static constexpr int kNumSlots = kSlots;

  // Moves the window so that `slot_index` (= now / slot width) is current,
  // clearing the slots that fell out.
  void Advance(int64_t slot_index) {
    // The head is kept mod 2^32 (4 bytes less in every tracked endpoint,
    // and 4-byte alignment) and compared by serial-number arithmetic: exact
    // while one window's reads are less than 2^31 slots apart (13 years at
    // the narrowest slot, 200 ms; idle endpoints are evicted within 7 days).
    // Once per 2^32 slots (27 years at 200 ms) the ring position jumps and
    // the newest slot's counts are dropped a slot early.
    const uint32_t index = static_cast<uint32_t>(slot_index);
    const int32_t gap = static_cast<int32_t>(index - head_);
    if (gap <= 0) {
      if (-static_cast<int64_t>(gap) >= kSlots) {
        Reset();
        head_ = index;
      }
      return;
    }
    if (gap >= kSlots) {
      for (Counts& c : slots_) c = Counts{};
    } else {
      for (uint32_t i = 1; i <= static_cast<uint32_t>(gap); ++i) {
        slots_[(head_ + i) % kSlots] = Counts{};
      }
    }
    head_ = index;
  }

  Counts& Current() { return slots_[head_ % kSlots]; }

  // The slot of `slot_index` if it is still in the window (at most
  // kSlots - 1 slots before the head); nullptr if it fell out (counts that
  // old are already outside the window) or lies after the head. For counts
  // reported late (a lease holder's batched counts, core/lease/).
  Counts* At(int64_t slot_index) {
    const int32_t back =
        static_cast<int32_t>(head_ - static_cast<uint32_t>(slot_index));
    if (back < 0 || back >= kSlots) return nullptr;
    return &Ago(back);
  }

  // Sum over the window (Counts must support +=).
  Counts Sum() const {
    Counts total{};
    for (const Counts& c : slots_) total += c;
    return total;
  }

  void Reset() {
    for (Counts& c : slots_) c = Counts{};
  }

  // For the state file (endpoint_record.h): the window with absolute slot
  // indexes (the head unwrapped near now_ns / slot_ns), the counts `a` and
  // `b` of each slot, newest first.
  template <uint32_t Counts::*a, uint32_t Counts::*b>
  WindowRecord Save(int64_t slot_ns, int64_t now_ns) const {
    static_assert(kSlots == WindowRecord::kSlots, "one slot count");
    WindowRecord r;
    r.slot_ns = slot_ns;
    const int64_t now_index = now_ns / slot_ns;
    r.head_slot =
        now_index + static_cast<int32_t>(head_ - static_cast<uint32_t>(now_index));
    for (int k = 0; k < kSlots; ++k) r.slots[k] = {Ago(k).*a, Ago(k).*b};
    return r;
  }
  // The inverse of Save(), for a window of `slot_ns` slots now. A record
  // of another slot width (the window's width changed in between) leaves
  // the window empty: its counts would be read against the wrong time.
  template <uint32_t Counts::*a, uint32_t Counts::*b>
  void Restore(const WindowRecord& r, int64_t slot_ns) {
    Reset();
    head_ = 0;
    if (r.slot_ns != slot_ns || slot_ns <= 0) return;
    head_ = static_cast<uint32_t>(r.head_slot);
    for (int k = 0; k < kSlots; ++k) {
      Ago(k).*a = r.slots[k][0];
      Ago(k).*b = r.slots[k][1];
    }
  }

 private:
  // The slot `k` slots before the head.
  Counts& Ago(int k) { return slots_[(head_ % kSlots + kSlots - k) % kSlots]; }
  const Counts& Ago(int k) const {
    return slots_[(head_ % kSlots + kSlots - k) % kSlots];
  }

  uint32_t head_ = 0;  // slot index mod 2^32
  Counts slots_[kSlots] = {};
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_SLIDING_WINDOW_H_
