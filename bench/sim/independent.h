// The independent rows (every Policy but kCoordinated): per-process retry
// clients, each delivery with its own backoff state (sim.h, "Contract").
// Internal to bench/sim.
#ifndef STAGGER_BENCH_SIM_INDEPENDENT_H_
#define STAGGER_BENCH_SIM_INDEPENDENT_H_

#include <vector>

#include "bench/sim/fleet.h"
#include "core/engine/engine_config.h"
#include "core/engine/retry_budget.h"

namespace stagger::sim {

class IndependentDriver final : public Fleet::Driver {
 public:
  explicit IndependentDriver(Fleet& fleet);
  absl::Status OnWorker(int64_t now, int id) override;
  absl::Status OnAnswer(int64_t now, int id) override;
  absl::Status OnEvent(const Event& e) override;

 private:
  // The retry is due: the budget (kFullJitterBudget) may skip it.
  void OnSend(int64_t now, int id);
  // After a failed attempt (or a retry the budget skipped): attempt limit
  // -> delay from the client's own policy -> Retry-After (the client's
  // own, clamped to the cap) -> horizon. The client sleeps in its worker.
  void DecideRetry(int64_t now, int id, bool after_failure);
  // Delivery `id`'s process's budget.
  engine::RetryBudget& Budget(int id) { return budgets_[id % budgets_.size()]; }

  Fleet& f_;
  const Scenario& s_;
  engine::BackoffParams backoff_;
  std::vector<engine::RetryBudget> budgets_;  // kFullJitterBudget only
};

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_INDEPENDENT_H_
