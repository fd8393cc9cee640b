#include "bench/sim/independent.h"

#include <algorithm>

#include "core/engine/backoff.h"

namespace stagger::sim {

IndependentDriver::IndependentDriver(Fleet& fleet)
    : f_(fleet), s_(fleet.scenario()) {
  backoff_ = CoordinatedConfig(s_).default_policy.backoff;
  switch (f_.policy()) {
    case Policy::kExponential:
      backoff_.kind = engine::BackoffKind::kExponential;
      break;
    case Policy::kEqualJitter:
      backoff_.kind = engine::BackoffKind::kEqualJitter;
      break;
    case Policy::kFullJitter:
    case Policy::kFullJitterBudget:
      backoff_.kind = engine::BackoffKind::kFullJitter;
      break;
    case Policy::kDecorrelatedJitter:
    case Policy::kNoBackoff:
    case Policy::kCoordinated:
      backoff_.kind = engine::BackoffKind::kDecorrelatedJitter;
      break;
  }
  if (f_.policy() == Policy::kFullJitterBudget) budgets_.resize(s_.workers);
}

// The client got its worker: it sleeps its initial jitter (in the worker),
// then sends attempt 1, unless that is past the horizon.
absl::Status IndependentDriver::OnWorker(int64_t now, int id) {
  const int64_t jitter =
      Ns(engine::UniformDuration(f_.Rng(), s_.initial_jitter));
  const std::optional<int64_t> deadline = f_.DeadlineNs(f_.delivery(id));
  if (deadline && now + jitter > *deadline) {
    f_.GiveUp(now, id, engine::Reason::kDeadline);
  } else {
    f_.Push(now + jitter, id, EventType::kSend);
  }
  return absl::OkStatus();
}

absl::Status IndependentDriver::OnEvent(const Event& e) {
  if (e.type == EventType::kSend) OnSend(e.t_ns, static_cast<int>(e.id));
  return absl::OkStatus();
}

void IndependentDriver::OnSend(int64_t now, int id) {
  Delivery& d = f_.delivery(id);
  const absl::Time t = f_.clock().Now();
  if (!budgets_.empty() && d.attempt >= 1) {
    // The budget is asked when the retry is due. A refused retry is
    // skipped: not sent, not counted against the attempt limit; the
    // delivery waits for its next backoff slot and asks again.
    engine::RetryBudget& b = Budget(id);
    if (!b.CanRetry(s_.engine_policy.budget, t)) {
      DecideRetry(now, id, /*after_failure=*/false);
      return;
    }
    if (s_.budget_accounting == Scenario::BudgetAccounting::kEveryRetry) {
      b.RecordRetry(s_.engine_policy.budget, t);
    }
  }
  f_.Send(now, id);
  if (!budgets_.empty() && d.attempt == 1) {
    Budget(id).RecordFirstAttempt(s_.engine_policy.budget, t);
  }
}

absl::Status IndependentDriver::OnAnswer(int64_t now, int id) {
  Delivery& d = f_.delivery(id);
  if (d.last.ok) {
    f_.Delivered(now, id);
    f_.FreeWorker(now, id);
    return absl::OkStatus();
  }
  if (!budgets_.empty() && d.attempt >= 2 &&
      s_.budget_accounting == Scenario::BudgetAccounting::kFailedRetries) {
    Budget(id).RecordRetry(s_.engine_policy.budget, f_.clock().Now());
  }
  DecideRetry(now, id, /*after_failure=*/true);
  return absl::OkStatus();
}

void IndependentDriver::DecideRetry(int64_t now, int id, bool after_failure) {
  Delivery& d = f_.delivery(id);
  if (d.attempt >= s_.max_attempts) {
    f_.GiveUp(now, id, engine::Reason::kAttemptsExhausted);
    return;
  }
  ++d.backoff_index;
  int64_t delay = 0;
  if (f_.policy() != Policy::kNoBackoff) {
    const absl::Duration next = engine::NextBackoff(
        backoff_, d.backoff_index, absl::Nanoseconds(d.previous_ns), f_.Rng());
    delay = Ns(next);
    if (backoff_.kind == engine::BackoffKind::kDecorrelatedJitter) {
      d.previous_ns = delay;
    }
  }
  if (after_failure && d.last.retry_after.has_value()) {
    delay = std::max(delay, Ns(std::min(*d.last.retry_after, s_.cap)));
  }
  const std::optional<int64_t> deadline = f_.DeadlineNs(d);
  if (deadline && now + delay > *deadline) {
    f_.GiveUp(now, id, engine::Reason::kDeadline);
    return;
  }
  f_.Push(now + delay, id, EventType::kSend);
}

}  // namespace stagger::sim
