#include "bench/sim/limit.h"

#include <algorithm>


namespace stagger::sim {

SlowStart SlowStartFor(const Scenario& s) {
  SlowStart m;
  m.start_pace = kReferenceStartPace;
  m.growth = kReferenceGrowth;
  m.rtt_s = absl::ToDoubleSeconds(s.response_time);
  bool unlimited = false;
  double service_s = 0;
  for (const EndpointSpec& e : s.endpoints) {
    if (e.down.empty()) continue;
    if (e.capacity_per_second <= 0) unlimited = true;
    m.capacity += e.FleetCapacity();
    if (e.limiter == LimiterKind::kQueue && e.capacity_per_second > 0) {
      service_s = std::max(service_s, e.servers / e.capacity_per_second);
    }
  }
  m.rtt_s += service_s;
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
    const SlowStart m = SlowStartFor(s);
    limit = absl::ToDoubleSeconds(s.engine_policy.breaker.open_max) +
            m.rtt_s + SlowStartSeconds(m, backlog);
  }
  if (s.horizon > absl::ZeroDuration() &&
      origin_s + limit > absl::ToDoubleSeconds(s.horizon)) {
    return std::nullopt;
  }
  return limit;
}

}  // namespace stagger::sim
