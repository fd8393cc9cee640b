#include "core/status/decision_ring.h"

#include "absl/time/time.h"

namespace stagger::status {
namespace {

constexpr uint64_t kCountMask = 0xffffffffu;

uint64_t Stamp(int64_t second) {
  return static_cast<uint64_t>(second) << 32;
}

int SlotOf(int64_t second) {
  const int64_t slot = second % DecisionRing::kSeconds;
  return static_cast<int>(slot < 0 ? slot + DecisionRing::kSeconds : slot);
}

}  // namespace

void DecisionRing::Record(engine::Verdict verdict) {
  const int v = static_cast<int>(verdict);
  if (v < 1 || v > kVerdicts) return;
  const int64_t second = absl::ToUnixSeconds(clock_->Now());
  std::atomic<uint64_t>& cell = cells_[v - 1][SlotOf(second)];
  const uint64_t stamp = Stamp(second);
  uint64_t old = cell.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    if ((old & ~kCountMask) != stamp) {
      next = stamp | 1;  // the first decision of this second here
    } else if ((old & kCountMask) == kCountMask) {
      return;  // 2^32 - 1 in one second: saturated
    } else {
      next = old + 1;
    }
  } while (!cell.compare_exchange_weak(old, next, std::memory_order_relaxed));
}

DecisionRing::Window DecisionRing::Read() const {
  Window w;
  w.last_second = absl::ToUnixSeconds(clock_->Now());
  for (int v = 0; v < kVerdicts; ++v) {
    for (int i = 0; i < kSeconds; ++i) {
      const int64_t second = w.last_second - kSeconds + 1 + i;
      const uint64_t cell =
          cells_[v][SlotOf(second)].load(std::memory_order_relaxed);
      if ((cell & ~kCountMask) == Stamp(second)) {
        w.counts[v][i] = static_cast<int64_t>(cell & kCountMask);
      }
    }
  }
  return w;
}

}  // namespace stagger::status
