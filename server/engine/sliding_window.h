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
#ifndef STAGGER_SERVER_ENGINE_SLIDING_WINDOW_H_
#define STAGGER_SERVER_ENGINE_SLIDING_WINDOW_H_

#include <cstdint>

namespace stagger::engine {

template <typename Counts, int kSlots>
class SlidingWindow {
 public:
  static constexpr int kNumSlots = kSlots;

  // Moves the window so that `slot_index` (= now / slot width) is current,
  // clearing the slots that fell out.
  void Advance(int64_t slot_index) {
    if (slot_index <= head_) {
      if (head_ - slot_index >= kSlots) {
        Reset();
        head_ = slot_index;
      }
      return;
    }
    const int64_t gap = slot_index - head_;
    if (gap >= kSlots) {
      for (Counts& c : slots_) c = Counts{};
    } else {
      for (int64_t i = 1; i <= gap; ++i) slots_[(head_ + i) % kSlots] = Counts{};
    }
    head_ = slot_index;
  }

  Counts& Current() { return slots_[head_ % kSlots]; }

  // Sum over the window (Counts must support +=).
  Counts Sum() const {
    Counts total{};
    for (const Counts& c : slots_) total += c;
    return total;
  }

  void Reset() {
    for (Counts& c : slots_) c = Counts{};
  }

 private:
  int64_t head_ = 0;
  Counts slots_[kSlots] = {};
};

}  // namespace stagger::engine

#endif  // STAGGER_SERVER_ENGINE_SLIDING_WINDOW_H_
