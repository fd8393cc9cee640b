// DecisionRing: decisions per second by verdict over the last kSeconds
// seconds, for the status page's live chart. A fixed ring of kSeconds
// one-second slots x kVerdicts verdicts (PROCEED, DEFER, GIVE_UP, DONE):
// 600 x 4 cells of 8 bytes, 19,200 bytes, allocated once; nothing grows.
//
// Record(verdict) counts one decision in the slot of the clock's current
// second. It never blocks and never allocates: each cell is one atomic word
// holding (second mod 2^32, count), bumped by compare-and-swap; the first
// decision of a new second restarts the cell. A verdict outside 1..4 is not
// counted.
//
// Read() returns the last kSeconds seconds up to the clock's current one
// (included, still filling), oldest first; a cell last written in another
// second reads as 0. Counts written while Read() runs may or may not be in
// it.
//
// Thread-safety: Record and Read from any thread. `clock` must outlive it.
#ifndef STAGGER_CORE_STATUS_DECISION_RING_H_
#define STAGGER_CORE_STATUS_DECISION_RING_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "core/engine/clock.h"
#include "core/engine/decision.h"

namespace stagger::status {

class DecisionRing {
 public:
  static constexpr int kSeconds = 600;
  static constexpr int kVerdicts = 4;  // engine::Verdict 1..4

  explicit DecisionRing(const engine::Clock* clock) : clock_(clock) {}
  DecisionRing(const DecisionRing&) = delete;
  DecisionRing& operator=(const DecisionRing&) = delete;

  void Record(engine::Verdict verdict);

  struct Window {
    int64_t last_second = 0;  // Unix second of the last (newest) slot
    // [verdict - 1][i]: decisions in second last_second - kSeconds + 1 + i.
    std::array<std::array<int64_t, kSeconds>, kVerdicts> counts{};
  };
  Window Read() const;

 private:
  const engine::Clock* const clock_;
  std::array<std::array<std::atomic<uint64_t>, kSeconds>, kVerdicts> cells_{};
};

}  // namespace stagger::status

#endif  // STAGGER_CORE_STATUS_DECISION_RING_H_
