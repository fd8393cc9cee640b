// RetryBudget: the fleet-wide retry budget of one endpoint (Finagle/Linkerd
// semantics). Over a sliding window, retries allowed =
//   max(ratio * first attempts in the window, min_retries_per_second * window)
// and a retry may be sent while retries sent in the window + 1 <= allowed.
// Counted in integer fixed point (1/1000 of a retry), so a ratio of 0.2
// adds exactly 200 units per first attempt and nothing drifts.
// Not thread-safe: the engine holds the endpoint's shard lock.
#ifndef STAGGER_CORE_ENGINE_RETRY_BUDGET_H_
#define STAGGER_CORE_ENGINE_RETRY_BUDGET_H_

#include <cstdint>

#include "absl/time/time.h"
#include "core/engine/endpoint_record.h"
#include "core/engine/engine_config.h"
#include "core/engine/sliding_window.h"

namespace stagger::engine {

class RetryBudget {
 public:
  static constexpr int64_t kUnit = 1000;  // fixed-point units per retry
  static constexpr int kSlots = 5;

  // A first attempt was sent.
  void RecordFirstAttempt(const BudgetParams& p, absl::Time now);
  // `n` first attempts were sent at `at` (<= now), reported late: counted
  // in at's slot if the window still holds it, dropped if it is older.
  void RecordFirstAttempts(const BudgetParams& p, absl::Time now,
                           absl::Time at, uint32_t n);
  // True if one more retry fits in the budget now (does not withdraw).
  bool CanRetry(const BudgetParams& p, absl::Time now);
  // A retry failed (the engine spends on failed retries only).
  void RecordRetry(const BudgetParams& p, absl::Time now);
  // First attempts per second over the window now.
  double FirstAttemptsPerSecond(const BudgetParams& p, absl::Time now);
  // Retries still allowed now, in retries (fractional).
  double Remaining(const BudgetParams& p, absl::Time now);
  // Forgets the window.
  void Reset() { window_.Reset(); }
  // The endpoint's budget parameters changed from `before` to `after`
  // (nullptr: the old ones are not known). The window keeps its counts only
  // if its width is unchanged: counts from slots of another width would be
  // read against the wrong time.
  void Reconfigured(const BudgetParams* before, const BudgetParams& after) {
    if (before == nullptr || before->window != after.window) Reset();
  }

  // The state file (endpoint_record.h): the window with absolute slots.
  // Restore() keeps the counts only if the slot width is still `p`'s.
  WindowRecord Save(const BudgetParams& p, absl::Time now) const;
  void Restore(const WindowRecord& r, const BudgetParams& p);

 private:
  struct Counts {
    uint32_t first_attempts = 0;
    uint32_t retries = 0;
    Counts& operator+=(const Counts& o) {
      first_attempts += o.first_attempts;
      retries += o.retries;
      return *this;
    }
  };
  void Advance(const BudgetParams& p, absl::Time now);
  // Allowed retries in the window and retries used, in fixed-point units.
  int64_t AllowedUnits(const BudgetParams& p, const Counts& sum) const;

  SlidingWindow<Counts, kSlots> window_;
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_RETRY_BUDGET_H_
