#include "bench/sim/sim.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/engine/backoff.h"
#include "server/engine/clock.h"
#include "server/engine/engine.h"
#include "server/engine/random.h"
#include "server/engine/retry_budget.h"

namespace stagger::sim {
namespace {

// Virtual t=0 on the engine's clock: an arbitrary fixed instant
// (2026-01-01T00:00:00Z), so engine times are realistic Unix times.
absl::Time Epoch() { return absl::FromUnixSeconds(1767225600); }
int64_t Ns(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }

constexpr char kEndpoint[] = "https://hooks.example.com/geofence";

// The engine's clock: set by the event loop to each event's time.
class VirtualClock final : public engine::Clock {
 public:
  absl::Time Now() const override {
    return Epoch() + absl::Nanoseconds(now_ns_);
  }
  int64_t now_ns() const { return now_ns_; }
  // Moves to `t_ns`; a step back is counted and ignored.
  void Set(int64_t t_ns) {
    if (t_ns < now_ns_) {
      ++regressions_;
      return;
    }
    now_ns_ = t_ns;
  }
  int64_t regressions() const { return regressions_; }

 private:
  int64_t now_ns_ = 0;
  int64_t regressions_ = 0;
};

enum class EventType : uint8_t {
  kAdmit,   // coordinated: ask the engine about attempt `attempt`
  kSend,    // send the next attempt now
  kAnswer,  // the attempt's answer arrives
};

struct Event {
  int64_t t_ns;
  uint64_t seq;  // insertion order: ties keep FIFO order, deterministically
  uint32_t id;
  EventType type;
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.t_ns != b.t_ns ? a.t_ns > b.t_ns : a.seq > b.seq;
  }
};

// The endpoint: down in [0, outage_ns), then up, optionally with a
// capacity (token bucket of 100 ms worth, full at recovery).
class Endpoint {
 public:
  struct Answer {
    bool ok = true;
    engine::Outcome outcome = engine::Outcome::kSuccess;
    std::optional<absl::Duration> retry_after;
  };
  explicit Endpoint(const Scenario& s)
      : outage_ns_(Ns(s.outage)),
        rate_(s.capacity_per_second),
        burst_(std::max(1.0, s.capacity_per_second * 0.1)),
        tokens_(burst_),
        last_ns_(outage_ns_),
        outage_retry_after_(s.outage_retry_after) {}

  // An attempt arriving at `t_ns`.
  Answer Receive(int64_t t_ns) {
    Answer a;
    if (t_ns < outage_ns_) {
      a.ok = false;
      if (outage_retry_after_ > absl::ZeroDuration()) {
        a.outcome = engine::Outcome::kRateLimited;
        a.retry_after = outage_retry_after_;
      } else {
        a.outcome = engine::Outcome::kRetryableFailure;
      }
      return a;
    }
    if (rate_ > 0) {
      tokens_ = std::min(burst_, tokens_ + (t_ns - last_ns_) * rate_ / 1e9);
      last_ns_ = t_ns;
      if (tokens_ < 1.0) {
        a.ok = false;  // overloaded: 503
        a.outcome = engine::Outcome::kRetryableFailure;
        return a;
      }
      tokens_ -= 1.0;
    }
    return a;
  }

 private:
  int64_t outage_ns_;
  double rate_;
  double burst_;
  double tokens_;
  int64_t last_ns_;
  absl::Duration outage_retry_after_;
};

// Per-delivery state. Independent rows use all of it; the coordinated row
// only `attempt` and the last answer (the engine holds the rest).
struct Delivery {
  int32_t attempt = 0;        // attempts sent so far (coordinated: the
                              // attempt being admitted/sent)
  int32_t backoff_index = 0;  // retries decided so far, sent or skipped
  int64_t previous_ns = 0;    // decorrelated: the previous delay
  Endpoint::Answer last;      // the last attempt's answer
  bool settled = false;
};

class Run {
 public:
  Run(const Scenario& s, Policy p, const TraceFn& trace)
      : s_(s),
        p_(p),
        trace_(trace),
        endpoint_(s),
        rng_(s.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(p) + 1),
        deliveries_(s.subscriptions) {
    result_.policy = p;
    outage_ns_ = Ns(s.outage);
    bucket_ns_ = std::max<int64_t>(1, Ns(s.bucket));
    response_ns_ = Ns(s.response_time);
    horizon_ns_ = Ns(s.horizon);
    backoff_ = CoordinatedConfig(s).default_policy.backoff;
    switch (p) {
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
    if (p == Policy::kFullJitterBudget) budgets_.resize(s.workers);
    if (p == Policy::kCoordinated) {
      engine_ = std::make_unique<engine::Engine>(CoordinatedConfig(s), &clock_,
                                                 &rng_);
    }
    delivered_at_.reserve(s.subscriptions);
  }

  absl::StatusOr<PolicyResult> Go() {
    // Every delivery is created at t=0. Independent clients jitter their
    // first attempt themselves; the coordinated ones ask the engine, which
    // answers PROCEED(INITIAL_JITTER).
    for (int i = 0; i < s_.subscriptions; ++i) {
      if (p_ == Policy::kCoordinated) {
        deliveries_[i].attempt = 1;
        Push(0, i, EventType::kAdmit);
      } else {
        Push(Ns(engine::UniformDuration(Rng(), s_.initial_jitter)), i,
             EventType::kSend);
      }
    }
    const int64_t stop_ns = Ns(s_.max_virtual_time);
    while (!queue_.empty()) {
      const Event e = queue_.top();
      if (e.t_ns > stop_ns) break;
      queue_.pop();
      clock_.Set(e.t_ns);
      ++result_.events;
      absl::Status st = Handle(e);
      if (!st.ok()) return st;
    }
    return Finish();
  }

 private:
  absl::BitGenRef Rng() { return rng_.Get(); }

  void Push(int64_t t_ns, int id, EventType type) {
    queue_.push(Event{t_ns, seq_++, static_cast<uint32_t>(id), type});
  }

  absl::Status Handle(const Event& e) {
    const int64_t now = clock_.now_ns();
    Delivery& d = deliveries_[e.id];
    switch (e.type) {
      case EventType::kSend:
        if (!budgets_.empty() && d.attempt >= 1) {
          // The budget is asked when the retry is due. A refused retry is
          // skipped: not sent, not counted against the attempt limit; the
          // delivery waits for its next backoff slot and asks again.
          engine::RetryBudget& b = budgets_[e.id % budgets_.size()];
          if (!b.CanRetry(s_.engine_policy.budget, clock_.Now())) {
            DecideRetry(now, e.id, d, /*after_failure=*/false);
            return absl::OkStatus();
          }
          if (s_.budget_accounting == Scenario::BudgetAccounting::kEveryRetry) {
            b.RecordRetry(s_.engine_policy.budget, clock_.Now());
          }
        }
        Send(now, e.id, d);
        return absl::OkStatus();
      case EventType::kAnswer:
        if (d.last.ok) {
          Delivered(now, e.id, d);
          if (p_ == Policy::kCoordinated) return ReportAnswer(now, e.id, d);
          return absl::OkStatus();
        }
        if (p_ == Policy::kCoordinated) return ReportAnswer(now, e.id, d);
        if (!budgets_.empty() && d.attempt >= 2 &&
            s_.budget_accounting ==
                Scenario::BudgetAccounting::kFailedRetries) {
          budgets_[e.id % budgets_.size()].RecordRetry(s_.engine_policy.budget,
                                                       clock_.Now());
        }
        DecideRetry(now, e.id, d, /*after_failure=*/true);
        return absl::OkStatus();
      case EventType::kAdmit:
        return Admit(now, e.id, d);
    }
    return absl::OkStatus();
  }

  // Sends attempt d.attempt + 1 (independent) or d.attempt (coordinated).
  void Send(int64_t now, int id, Delivery& d) {
    if (p_ != Policy::kCoordinated) ++d.attempt;
    d.last = endpoint_.Receive(now);
    ++result_.attempts;
    const size_t b = static_cast<size_t>(now / bucket_ns_);
    if (result_.attempts_per_bucket.size() <= b) {
      result_.attempts_per_bucket.resize(b + 1, 0);
    }
    ++result_.attempts_per_bucket[b];
    if (d.attempt == 1) {
      ++result_.first_attempts;
      if (!d.last.ok) ++result_.failed_first_attempts;
      if (!budgets_.empty()) {
        budgets_[id % budgets_.size()].RecordFirstAttempt(s_.engine_policy.budget,
                                                          clock_.Now());
      }
    } else if (!d.last.ok) {
      ++result_.wasted_attempts;
    }
    if (trace_) {
      TraceEvent t;
      t.kind = TraceEvent::Kind::kAttempt;
      t.time_ns = now;
      t.delivery = id;
      t.attempt = d.attempt;
      t.failed = !d.last.ok;
      trace_(t);
    }
    Push(now + response_ns_, id, EventType::kAnswer);
  }

  void Delivered(int64_t now, int id, Delivery& d) {
    d.settled = true;
    ++result_.delivered;
    delivered_at_.push_back(now);
    if (trace_) {
      TraceEvent t;
      t.kind = TraceEvent::Kind::kDelivered;
      t.time_ns = now;
      t.delivery = id;
      t.attempt = d.attempt;
      trace_(t);
    }
  }

  void GiveUp(int64_t now, int id, Delivery& d, engine::Reason r) {
    d.settled = true;
    ++result_.given_up;
    ++result_.given_up_by_reason[static_cast<int>(r)];
    if (trace_) {
      TraceEvent t;
      t.kind = TraceEvent::Kind::kGaveUp;
      t.time_ns = now;
      t.delivery = id;
      t.attempt = d.attempt;
      t.reason = r;
      trace_(t);
    }
  }

  // Independent clients, after a failed attempt (or a retry the budget
  // skipped): attempt limit -> delay from the client's own policy ->
  // Retry-After (the client's own, clamped to the cap) -> horizon. The
  // budget (kFullJitterBudget) is asked when the retry is due (kSend), so it
  // removes attempts without changing when the others happen.
  void DecideRetry(int64_t now, int id, Delivery& d, bool after_failure) {
    if (d.attempt >= s_.max_attempts) {
      GiveUp(now, id, d, engine::Reason::kAttemptsExhausted);
      return;
    }
    ++d.backoff_index;
    int64_t delay = 0;
    if (p_ != Policy::kNoBackoff) {
      const absl::Duration next = engine::NextBackoff(
          backoff_, d.backoff_index, absl::Nanoseconds(d.previous_ns), Rng());
      delay = Ns(next);
      if (backoff_.kind == engine::BackoffKind::kDecorrelatedJitter) {
        d.previous_ns = delay;
      }
    }
    if (after_failure && d.last.retry_after.has_value()) {
      delay = std::max(delay, Ns(std::min(*d.last.retry_after, s_.cap)));
    }
    if (horizon_ns_ > 0 && now + delay > horizon_ns_) {
      GiveUp(now, id, d, engine::Reason::kDeadline);
      return;
    }
    Push(now + delay, id, EventType::kSend);
  }

  // --- The coordinated row: the engine decides everything. ---------------

  absl::Status Admit(int64_t now, int id, Delivery& d) {
    engine::AdmitInput in;
    in.endpoint = kEndpoint;
    in.attempt = d.attempt;
    in.first_attempt_time = Epoch();
    ++result_.admits;
    absl::StatusOr<engine::Decision> dec = engine_->Admit(in);
    if (!dec.ok()) {
      return absl::InternalError(absl::StrCat(
          "engine refused Admit(attempt=", d.attempt, "): ", dec.status().message()));
    }
    return Follow(now, id, d, *dec);
  }

  absl::Status ReportAnswer(int64_t now, int id, Delivery& d) {
    engine::ReportInput in;
    in.endpoint = kEndpoint;
    in.attempt = d.attempt;
    in.outcome = d.last.outcome;
    in.retry_after = d.last.retry_after;
    in.first_attempt_time = Epoch();
    ++result_.reports;
    absl::StatusOr<engine::Decision> dec = engine_->Report(in);
    if (!dec.ok()) {
      return absl::InternalError(absl::StrCat(
          "engine refused Report(attempt=", d.attempt, "): ", dec.status().message()));
    }
    if (d.last.ok) {
      if (dec->verdict != engine::Verdict::kDone) {
        return absl::InternalError(
            absl::StrCat("engine answered a success with ",
                         engine::VerdictName(dec->verdict)));
      }
      return absl::OkStatus();
    }
    return Follow(now, id, d, *dec);
  }

  // What a worker does with a decision (client/retry_loop.h).
  absl::Status Follow(int64_t now, int id, Delivery& d,
                      const engine::Decision& dec) {
    switch (dec.verdict) {
      case engine::Verdict::kProceed: {
        const int64_t at = now + std::max<int64_t>(0, Ns(dec.delay));
        if (dec.attempt == d.attempt) {
          Push(at, id, EventType::kSend);  // Admit: send after the delay
        } else {
          d.attempt = dec.attempt;  // Report: wait, then Admit the next one
          Push(at, id, EventType::kAdmit);
        }
        return absl::OkStatus();
      }
      case engine::Verdict::kDefer: {
        ++result_.deferrals;
        ++result_.deferred_by_reason[static_cast<int>(dec.reason)];
        const int64_t until = absl::ToInt64Nanoseconds(dec.defer_until - Epoch());
        if (until < now) {
          return absl::InternalError(absl::StrCat(
              "engine deferred into the past (", ReasonName(dec.reason), ")"));
        }
        d.attempt = dec.attempt;  // unchanged on Admit; the next on Report
        Push(until, id, EventType::kAdmit);
        return absl::OkStatus();
      }
      case engine::Verdict::kGiveUp:
        GiveUp(now, id, d, dec.reason);
        return absl::OkStatus();
      case engine::Verdict::kDone:
        break;
    }
    return absl::InternalError("engine answered DONE to a non-success");
  }

  PolicyResult Finish() {
    for (const Delivery& d : deliveries_) {
      if (!d.settled) ++result_.unfinished;
    }
    result_.clock_regressions = clock_.regressions();
    result_.settled_s = clock_.now_ns() / 1e9;
    // Peaks over whole buckets, each bucket in the phase where it starts:
    // opening wave, rest of the outage, recovery window.
    const int64_t opening_ns = std::min(Ns(OpeningWave(s_)), outage_ns_);
    const int64_t window_end = outage_ns_ + Ns(s_.recovery_window);
    const double per_s = 1e9 / static_cast<double>(bucket_ns_);
    for (size_t b = 0; b < result_.attempts_per_bucket.size(); ++b) {
      const int64_t start = static_cast<int64_t>(b) * bucket_ns_;
      const double rps = result_.attempts_per_bucket[b] * per_s;
      if (start < opening_ns) {
        result_.peak_rps_opening = std::max(result_.peak_rps_opening, rps);
      } else if (start < outage_ns_) {
        result_.peak_rps_outage = std::max(result_.peak_rps_outage, rps);
      } else if (start < window_end) {
        result_.peak_rps_recovery = std::max(result_.peak_rps_recovery, rps);
      }
    }
    // 99% of every delivery, counted at its success answer.
    const int64_t need = static_cast<int64_t>(
        std::ceil(0.99 * static_cast<double>(s_.subscriptions)));
    if (need >= 1 && static_cast<int64_t>(delivered_at_.size()) >= need) {
      const int64_t t = delivered_at_[need - 1];  // already in time order
      result_.time_to_99_s = std::max<int64_t>(0, t - outage_ns_) / 1e9;
    }
    return result_;
  }

  const Scenario& s_;
  const Policy p_;
  const TraceFn& trace_;
  VirtualClock clock_;
  Endpoint endpoint_;
  engine::SeededRandom rng_;
  std::vector<Delivery> deliveries_;
  std::vector<engine::RetryBudget> budgets_;
  std::unique_ptr<engine::Engine> engine_;
  engine::BackoffParams backoff_;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  uint64_t seq_ = 0;
  int64_t outage_ns_ = 0;
  int64_t bucket_ns_ = 1;
  int64_t response_ns_ = 0;
  int64_t horizon_ns_ = 0;
  std::vector<int64_t> delivered_at_;
  PolicyResult result_;
};

}  // namespace

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

absl::Status ValidateScenario(const Scenario& s) {
  std::vector<std::string> errors;
  auto check = [&errors](bool ok, absl::string_view field,
                         absl::string_view rule) {
    if (!ok) errors.push_back(absl::StrCat(field, ": ", rule));
  };
  const absl::Duration zero = absl::ZeroDuration();
  check(s.subscriptions >= 1 && s.subscriptions <= 10000000, "subscriptions",
        "must be in [1, 10000000]");
  check(s.outage >= zero, "outage", "must be >= 0");
  check(s.base >= absl::Milliseconds(1), "base", "must be >= 1ms");
  check(s.cap >= s.base && s.cap <= absl::Hours(1), "cap",
        "must be in [base, 1h]");
  check(s.max_attempts >= 1 && s.max_attempts <= 100, "max_attempts",
        "must be in [1, 100]");
  check(s.horizon >= zero && s.horizon <= absl::Hours(24 * 7), "horizon",
        "must be in [0, 7 days]");
  check(s.response_time > zero && s.response_time <= absl::Minutes(10),
        "response_time", "must be in (0, 10min]");
  check(s.capacity_per_second >= 0, "capacity_per_second", "must be >= 0");
  check(s.initial_jitter >= zero && s.initial_jitter <= absl::Seconds(10),
        "initial_jitter", "must be in [0, 10s]");
  check(s.outage_retry_after >= zero &&
            s.outage_retry_after <= engine::kMaxRetryAfter,
        "outage_retry_after", "must be in [0, 24h]");
  check(s.workers >= 1 && s.workers <= s.subscriptions, "workers",
        "must be in [1, subscriptions]");
  check(s.bucket >= absl::Milliseconds(1), "bucket", "must be >= 1ms");
  check(s.recovery_window >= s.bucket, "recovery_window", "must be >= bucket");
  check(!s.opening_wave.has_value() || *s.opening_wave >= zero, "opening_wave",
        "must be >= 0");
  check(s.max_virtual_time > s.outage, "max_virtual_time", "must be > outage");
  absl::Status engine = engine::ValidateEngineConfig(CoordinatedConfig(s));
  if (!engine.ok()) errors.push_back(absl::StrCat("engine: ", engine.message()));
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

engine::PolicyParams DefaultCoordinatedPolicy() {
  engine::PolicyParams p;
  p.breaker.open_base = absl::Seconds(1);
  p.breaker.open_max = absl::Seconds(4);
  p.deferral.release_rate_per_second = 700;
  return p;
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
  Run run(s, p, trace);
  return run.Go();
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
