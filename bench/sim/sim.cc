#include "bench/sim/sim.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/sim/coordinated.h"
#include "bench/sim/fleet.h"
#include "bench/sim/independent.h"

namespace stagger::sim {

const char* PolicyKey(Policy p) {
  switch (p) {
    case Policy::kNoBackoff: return "no_backoff";
    case Policy::kExponential: return "exponential";
    case Policy::kEqualJitter: return "equal_jitter";
    case Policy::kFullJitter: return "full_jitter";
    case Policy::kDecorrelatedJitter: return "decorrelated_jitter";
    case Policy::kFullJitterBudget: return "full_jitter_budget";
    case Policy::kCoordinated: return "coordinated";
  }
  return "unknown";
}

const char* PolicyTitle(Policy p) {
  switch (p) {
    case Policy::kNoBackoff: return "No backoff (immediate retry)";
    case Policy::kExponential: return "Plain exponential";
    case Policy::kEqualJitter: return "Equal jitter";
    case Policy::kFullJitter: return "Full jitter";
    case Policy::kDecorrelatedJitter: return "Decorrelated jitter";
    case Policy::kFullJitterBudget: return "Full jitter + retry budget";
    case Policy::kCoordinated: return "Stagger (coordinated)";
  }
  return "unknown";
}

std::optional<Policy> PolicyFromKey(absl::string_view key) {
  for (Policy p : kAllPolicies) {
    if (key == PolicyKey(p)) return p;
  }
  return std::nullopt;
}

const char* LimiterKindName(LimiterKind k) {
  switch (k) {
    case LimiterKind::kTokenBucket: return "token bucket";
    case LimiterKind::kQueue: return "queue";
  }
  return "unknown";
}

double EndpointSpec::FleetCapacity() const {
  if (capacity_per_second <= 0) return 0;
  return std::max(0.0, capacity_per_second - hidden_per_second);
}

double EndpointSpec::BurstAttempts() const {
  switch (limiter) {
    case LimiterKind::kTokenBucket:
      return burst > 0 ? burst : std::max(1.0, capacity_per_second * 0.1);
    case LimiterKind::kQueue:
      return servers + capacity_per_second *
                           absl::ToDoubleSeconds(queue_timeout);
  }
  return 1;
}

EndpointSpec OutageEndpoint(absl::Duration outage, double capacity_per_second,
                            absl::Duration down_retry_after) {
  EndpointSpec e;
  if (outage > absl::ZeroDuration()) {
    e.down.push_back({absl::ZeroDuration(), outage});
  }
  e.capacity_per_second = capacity_per_second;
  e.down_retry_after = down_retry_after;
  return e;
}

std::vector<DownInterval> Flapping(absl::Duration down, absl::Duration up,
                                   int cycles) {
  std::vector<DownInterval> out;
  for (int i = 0; i < cycles; ++i) {
    const absl::Duration start = i * (down + up);
    out.push_back({start, start + down});
  }
  return out;
}

absl::Duration Recovery(const Scenario& s) {
  absl::Duration end = absl::ZeroDuration();
  for (const EndpointSpec& e : s.endpoints) {
    for (const DownInterval& d : e.down) end = std::max(end, d.end);
  }
  return end;
}

bool MixesHealthyAndDown(const Scenario& s) {
  bool up = false, down = false;
  for (const EndpointSpec& e : s.endpoints) (e.down.empty() ? up : down) = true;
  return up && down;
}

std::vector<int> AssignEndpoints(const Scenario& s) {
  // Smooth weighted round-robin: each delivery goes to the endpoint with
  // the most credit, which then pays the total back.
  const size_t n = s.endpoints.size();
  std::vector<double> credit(n, 0.0);
  double total = 0;
  for (const EndpointSpec& e : s.endpoints) total += e.share;
  std::vector<int> out(std::max(0, s.subscriptions), 0);
  if (n <= 1) return out;
  for (int i = 0; i < s.subscriptions; ++i) {
    size_t best = 0;
    for (size_t e = 0; e < n; ++e) {
      credit[e] += s.endpoints[e].share;
      if (credit[e] > credit[best]) best = e;
    }
    credit[best] -= total;
    out[i] = static_cast<int>(best);
  }
  return out;
}

namespace {

void ValidateLimiter(const EndpointSpec& e, const std::string& name,
                     std::vector<std::string>* errors) {
  auto check = [&](bool ok, absl::string_view field, absl::string_view rule) {
    if (!ok) errors->push_back(absl::StrCat(name, ".", field, ": ", rule));
  };
  check(e.burst == 0 || (e.burst >= 1 && e.burst <= 1e7), "burst",
        "must be 0 (100 ms of capacity) or in [1, 10000000]");
  check(e.servers >= 1 && e.servers <= 100000, "servers",
        "must be in [1, 100000]");
  check(e.queue_timeout >= absl::ZeroDuration() &&
            e.queue_timeout <= absl::Minutes(10),
        "queue_timeout", "must be in [0, 10min]");
  check(e.refusal.status == 429 || e.refusal.status == 503, "refusal.status",
        "must be 429 or 503");
  check(e.hidden_per_second >= 0 && e.hidden_per_second <= 1e7 &&
            (e.hidden_per_second == 0 ||
             e.hidden_per_second < e.capacity_per_second),
        "hidden_per_second",
        "must be in [0, 10000000] and below capacity_per_second");
  check(e.hidden_per_second == 0 || e.limiter != LimiterKind::kQueue,
        "hidden_per_second", "must be 0 for a queue");
  check(!(e.down_rate_limited && e.down_retry_after > absl::ZeroDuration()),
        "down_rate_limited", "excludes down_retry_after (that is a 503 too)");
}

void ValidateEndpoints(const Scenario& s, std::vector<std::string>* errors) {
  if (s.endpoints.empty() || s.endpoints.size() > 1000) {
    errors->push_back("endpoints: must have 1..1000 endpoints");
    return;
  }
  const absl::Duration zero = absl::ZeroDuration();
  for (size_t i = 0; i < s.endpoints.size(); ++i) {
    const EndpointSpec& e = s.endpoints[i];
    const std::string name = absl::StrCat("endpoints[", i, "]");
    absl::Duration previous_end = zero;
    for (size_t j = 0; j < e.down.size(); ++j) {
      const DownInterval& d = e.down[j];
      if (d.start < previous_end || d.end <= d.start) {
        errors->push_back(absl::StrCat(
            name, ".down[", j, "]: must be [start, end) with start < end, "
            "after the previous interval (and >= 0), got [",
            absl::FormatDuration(d.start), ", ", absl::FormatDuration(d.end),
            ")"));
      }
      previous_end = d.end;
    }
    if (e.down_retry_after < zero ||
        e.down_retry_after > engine::kMaxRetryAfter) {
      errors->push_back(
          absl::StrCat(name, ".down_retry_after: must be in [0, 24h]"));
    }
    if (!(e.capacity_per_second >= 0) || std::isinf(e.capacity_per_second)) {
      errors->push_back(
          absl::StrCat(name, ".capacity_per_second: must be finite and >= 0"));
    }
    if (!(e.share > 0) || std::isinf(e.share)) {
      errors->push_back(absl::StrCat(name, ".share: must be finite and > 0"));
    }
    if (!(e.up_failure_share >= 0 && e.up_failure_share < 1)) {
      errors->push_back(
          absl::StrCat(name, ".up_failure_share: must be in [0, 1)"));
    }
    if (!(e.down_failure_share > 0 && e.down_failure_share <= 1)) {
      errors->push_back(
          absl::StrCat(name, ".down_failure_share: must be in (0, 1]"));
    }
    ValidateLimiter(e, name, errors);
  }
}

void ValidateLeases(const LeaseModel& m, std::vector<std::string>* errors) {
  auto check = [errors](bool ok, absl::string_view field,
                        absl::string_view rule) {
    if (!ok) errors->push_back(absl::StrCat("leases.", field, ": ", rule));
  };
  check(m.agents >= 0 && m.agents <= 1000, "agents",
        "must be in [0, 1000] (0 = no agents)");
  check(m.flush_interval >= absl::Milliseconds(10) &&
            m.flush_interval <= absl::Minutes(1),
        "flush_interval", "must be in [10ms, 1m]");
  check(m.push_latency >= absl::ZeroDuration() &&
            m.push_latency <= absl::Seconds(10),
        "push_latency", "must be in [0, 10s]");
  check(m.ttl >= absl::Seconds(1) && m.ttl <= absl::Minutes(10), "ttl",
        "must be in [1s, 10m]");
  check(m.deaf_agents >= 0 && m.deaf_agents <= m.agents, "deaf_agents",
        "must be in [0, agents]");
}

}  // namespace

absl::Status ValidateScenario(const Scenario& s) {
  std::vector<std::string> errors;
  auto check = [&errors](bool ok, absl::string_view field,
                         absl::string_view rule) {
    if (!ok) errors.push_back(absl::StrCat(field, ": ", rule));
  };
  const absl::Duration zero = absl::ZeroDuration();
  check(s.subscriptions >= 1 && s.subscriptions <= 10000000, "subscriptions",
        "must be in [1, 10000000]");
  check(s.arrival_rate >= 0 && s.arrival_rate <= 1e7, "arrival_rate",
        "must be in [0, 10000000] (0 = all at t=0)");
  ValidateEndpoints(s, &errors);
  check(s.concurrency >= 0 && s.concurrency <= 10000000, "concurrency",
        "must be in [0, 10000000] (0 = unlimited)");
  check(s.base >= absl::Milliseconds(1), "base", "must be >= 1ms");
  check(s.cap >= s.base && s.cap <= absl::Hours(1), "cap",
        "must be in [base, 1h]");
  check(s.max_attempts >= 1 && s.max_attempts <= 100, "max_attempts",
        "must be in [1, 100]");
  check(s.horizon >= zero && s.horizon <= absl::Hours(24 * 7), "horizon",
        "must be in [0, 7 days]");
  check(s.response_time > zero && s.response_time <= absl::Minutes(10),
        "response_time", "must be in (0, 10min]");
  check(s.initial_jitter >= zero && s.initial_jitter <= absl::Seconds(10),
        "initial_jitter", "must be in [0, 10s]");
  check(s.workers >= 1 && s.workers <= s.subscriptions, "workers",
        "must be in [1, subscriptions]");
  check(s.bucket >= absl::Milliseconds(1), "bucket", "must be >= 1ms");
  check(s.recovery_window >= s.bucket, "recovery_window", "must be >= bucket");
  check(!s.opening_wave.has_value() || *s.opening_wave >= zero, "opening_wave",
        "must be >= 0");
  check(s.max_virtual_time > Recovery(s), "max_virtual_time",
        "must be after the last down interval ends");
  ValidateLeases(s.leases, &errors);
  absl::Status engine = engine::ValidateEngineConfig(CoordinatedConfig(s));
  if (!engine.ok()) errors.push_back(absl::StrCat("engine: ", engine.message()));
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

engine::PolicyParams DefaultCoordinatedPolicy() {
  return engine::PolicyParams{};
}

absl::Duration OpeningWave(const Scenario& s) {
  if (s.opening_wave.has_value()) return *s.opening_wave;
  // Plain exponential: attempt 1 at 0; retry j waits base * 2^(j-1) after
  // the previous answer. Sum until the interval reaches the bucket width.
  absl::Duration t = s.response_time;  // attempt 1 answered
  absl::Duration interval = s.base;
  for (int j = 1; j < 64 && interval < s.bucket && interval < s.cap; ++j) {
    t += interval + s.response_time;
    interval *= 2;
  }
  const int64_t b = std::max<int64_t>(1, Ns(s.bucket));
  const int64_t n = (Ns(t) + b - 1) / b;
  return absl::Nanoseconds(n * b);
}

engine::EngineConfig CoordinatedConfig(const Scenario& s) {
  engine::EngineConfig c;
  c.default_policy = s.engine_policy;
  engine::BackoffParams& b = c.default_policy.backoff;
  b.base = s.base;
  b.cap = s.cap;
  b.max_attempts = s.max_attempts;
  b.horizon = s.horizon;
  b.initial_jitter = s.initial_jitter;
  return c;
}

absl::StatusOr<PolicyResult> Simulate(const Scenario& s, Policy p,
                                      const TraceFn& trace) {
  if (absl::Status st = ValidateScenario(s); !st.ok()) return st;
  Fleet fleet(s, p, trace);
  if (p == Policy::kCoordinated) {
    CoordinatedDriver driver(fleet);
    fleet.set_driver(&driver);
    return fleet.Go();
  }
  IndependentDriver driver(fleet);
  fleet.set_driver(&driver);
  return fleet.Go();
}

absl::StatusOr<std::vector<PolicyResult>> SimulateAll(
    const Scenario& s, const std::vector<Policy>& policies) {
  std::vector<PolicyResult> out;
  for (Policy p : policies) {
    absl::StatusOr<PolicyResult> r = Simulate(s, p);
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

}  // namespace stagger::sim
