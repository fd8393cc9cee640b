#include "bench/sim/limit.h"

#include <algorithm>

#include "core/engine/capacity_estimator.h"

namespace stagger::sim {

SlowStart SlowStartFor(const Scenario& s) {
  using engine::CapacityEstimator;
  SlowStart m;
  m.start_pace = CapacityEstimator::kStartPace;
  m.growth = 1 + CapacityEstimator::kSlowStartGain;
  m.rtt_s = absl::ToDoubleSeconds(s.response_time);
  bool unlimited = false;
  for (const EndpointSpec& e : s.endpoints) {
    if (e.down.empty()) continue;
    if (e.capacity_per_second <= 0) unlimited = true;
    m.capacity += e.capacity_per_second;
  }
  if (unlimited) m.capacity = 0;
  if (s.concurrency > 0 && m.rtt_s > 0) {
    const double pool = s.concurrency / m.rtt_s;
    m.capacity = m.capacity > 0 ? std::min(m.capacity, pool) : pool;
  }
  return m;
}

double SlowStartSeconds(const SlowStart& m, double backlog) {
  if (backlog <= 0) return 0;
  double t = 0, pace = m.start_pace;
  while (true) {
    if (m.capacity > 0 && pace >= m.capacity) return t + backlog / m.capacity;
    const double round = pace * m.rtt_s;
    if (round >= backlog) return t + backlog / pace;
    backlog -= round;
    t += m.rtt_s;
    pace *= m.growth;
  }
}

std::optional<double> LimitSeconds(const Scenario& s, double backlog,
                                   double origin_s) {
  double limit = 0;
  if (backlog > 0) {
    limit = absl::ToDoubleSeconds(s.engine_policy.breaker.open_max) +
            absl::ToDoubleSeconds(s.response_time) +
            SlowStartSeconds(SlowStartFor(s), backlog);
  }
  if (s.horizon > absl::ZeroDuration() &&
      origin_s + limit > absl::ToDoubleSeconds(s.horizon)) {
    return std::nullopt;
  }
  return limit;
}

}  // namespace stagger::sim
