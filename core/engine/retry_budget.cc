#include "core/engine/retry_budget.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace stagger::engine {
namespace {

uint32_t SaturatingIncrement(uint32_t v) {
  return v == std::numeric_limits<uint32_t>::max() ? v : v + 1;
}

uint32_t SaturatingAdd(uint32_t v, uint32_t n) {
  return n > std::numeric_limits<uint32_t>::max() - v
             ? std::numeric_limits<uint32_t>::max()
             : v + n;
}

int64_t SlotNanos(const BudgetParams& p) {
  return std::max<int64_t>(
      1, absl::ToInt64Nanoseconds(p.window) / RetryBudget::kSlots);
}

}  // namespace

void RetryBudget::Advance(const BudgetParams& p, absl::Time now) {
  window_.Advance(absl::ToUnixNanos(now) / SlotNanos(p));
}

int64_t RetryBudget::AllowedUnits(const BudgetParams& p,
                                  const Counts& sum) const {
  const int64_t ratio_units = std::llround(p.ratio * kUnit);  // per attempt
  const int64_t by_ratio = ratio_units * int64_t{sum.first_attempts};
  const int64_t floor = std::llround(p.min_retries_per_second *
                                     absl::ToDoubleSeconds(p.window) * kUnit);
  return std::max(by_ratio, floor);
}

void RetryBudget::RecordFirstAttempt(const BudgetParams& p, absl::Time now) {
  Advance(p, now);
  Counts& c = window_.Current();
  c.first_attempts = SaturatingIncrement(c.first_attempts);
}

void RetryBudget::RecordFirstAttempts(const BudgetParams& p, absl::Time now,
                                      absl::Time at, uint32_t n) {
  Advance(p, now);
  if (Counts* c = window_.At(absl::ToUnixNanos(std::min(at, now)) /
                             SlotNanos(p))) {
    c->first_attempts = SaturatingAdd(c->first_attempts, n);
  }
}

bool RetryBudget::CanRetry(const BudgetParams& p, absl::Time now) {
  Advance(p, now);
  const Counts sum = window_.Sum();
  return (int64_t{sum.retries} + 1) * kUnit <= AllowedUnits(p, sum);
}

void RetryBudget::RecordRetry(const BudgetParams& p, absl::Time now) {
  Advance(p, now);
  Counts& c = window_.Current();
  c.retries = SaturatingIncrement(c.retries);
}

double RetryBudget::FirstAttemptsPerSecond(const BudgetParams& p,
                                           absl::Time now) {
  Advance(p, now);
  return window_.Sum().first_attempts / absl::ToDoubleSeconds(p.window);
}

double RetryBudget::Remaining(const BudgetParams& p, absl::Time now) {
  Advance(p, now);
  const Counts sum = window_.Sum();
  const int64_t left = AllowedUnits(p, sum) - int64_t{sum.retries} * kUnit;
  return std::max<int64_t>(0, left) / static_cast<double>(kUnit);
}

WindowRecord RetryBudget::Save(const BudgetParams& p, absl::Time now) const {
  const int64_t slot_ns =
      std::max<int64_t>(1, absl::ToInt64Nanoseconds(p.window) / kSlots);
  return window_.Save<&Counts::first_attempts, &Counts::retries>(
      slot_ns, absl::ToUnixNanos(now));
}

void RetryBudget::Restore(const WindowRecord& r, const BudgetParams& p) {
  const int64_t slot_ns =
      std::max<int64_t>(1, absl::ToInt64Nanoseconds(p.window) / kSlots);
  window_.Restore<&Counts::first_attempts, &Counts::retries>(r, slot_ns);
}

}  // namespace stagger::engine
