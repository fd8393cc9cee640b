#include "bench/sim/sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/engine/backoff.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/engine/retry_budget.h"

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
  kReady,   // coordinated: a parked delivery queues for a worker again
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

// An endpoint as the fleet sees it: down in its spec's intervals (failing
// every attempt with its failure kind), up otherwise, optionally with a
// capacity (a token bucket of 100 ms worth, full at the start and refilled
// while down). Attempts must arrive in time order.
class Endpoint {
 public:
  struct Answer {
    bool ok = true;
    engine::Outcome outcome = engine::Outcome::kSuccess;
    std::optional<absl::Duration> retry_after;
  };
  explicit Endpoint(const EndpointSpec& spec)
      : spec_(&spec),
        rate_(spec.capacity_per_second),
        burst_(std::max(1.0, spec.capacity_per_second * 0.1)),
        tokens_(burst_) {}

  // An attempt arriving at `t_ns`.
  Answer Receive(int64_t t_ns) {
    Answer a;
    if (Down(t_ns)) {
      a.ok = false;
      if (spec_->down_retry_after > absl::ZeroDuration()) {
        a.outcome = engine::Outcome::kRateLimited;
        a.retry_after = spec_->down_retry_after;
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
  bool Down(int64_t t_ns) {
    const std::vector<DownInterval>& down = spec_->down;
    while (next_ < down.size() && t_ns >= Ns(down[next_].end)) ++next_;
    return next_ < down.size() && t_ns >= Ns(down[next_].start);
  }

  const EndpointSpec* spec_;
  size_t next_ = 0;  // the first down interval not yet over
  double rate_;
  double burst_;
  double tokens_;
  int64_t last_ns_ = 0;
};

// Per-delivery state. Independent rows use all of it; the coordinated row
// only `attempt` and the last answer (the engine holds the rest).
struct Delivery {
  int32_t attempt = 0;        // attempts sent so far (coordinated: the
                              // attempt being admitted/sent)
  int32_t backoff_index = 0;  // retries decided so far, sent or skipped
  int32_t endpoint = 0;       // index in Scenario::endpoints
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
        rng_(s.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(p) + 1),
        deliveries_(s.subscriptions) {
    result_.policy = p;
    recovery_ns_ = Ns(Recovery(s));
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
    for (size_t e = 0; e < s.endpoints.size(); ++e) {
      endpoints_.emplace_back(s.endpoints[e]);
      keys_.push_back(e == 0 ? std::string(kEndpoint)
                             : absl::StrCat(kEndpoint, "-", e));
    }
    result_.per_endpoint.resize(s.endpoints.size());
    const std::vector<int> assigned = AssignEndpoints(s);
    for (int i = 0; i < s.subscriptions; ++i) {
      deliveries_[i].endpoint = assigned[i];
      ++result_.per_endpoint[assigned[i]].deliveries;
    }
    free_workers_ = s.concurrency > 0 ? s.concurrency
                                      : std::numeric_limits<int64_t>::max();
    deadline_ = horizon_ns_ > 0 ? Epoch() + s.horizon : absl::InfiniteFuture();
    delivered_at_.reserve(s.subscriptions);
  }

  absl::StatusOr<PolicyResult> Go() {
    // Every delivery is created at t=0 and queues for a worker, in order.
    // Independent clients jitter their first attempt themselves; the
    // coordinated ones ask the engine, which answers PROCEED(INITIAL_JITTER).
    for (int i = 0; i < s_.subscriptions; ++i) {
      if (p_ == Policy::kCoordinated) deliveries_[i].attempt = 1;
      ready_.push_back(i);
    }
    Dispatch(0);
    const int64_t stop_ns = Ns(s_.max_virtual_time);
    while (error_.ok() && !queue_.empty()) {
      const Event e = queue_.top();
      if (e.t_ns > stop_ns) break;
      queue_.pop();
      clock_.Set(e.t_ns);
      ++result_.events;
      absl::Status st = Handle(e);
      if (!st.ok()) return st;
    }
    if (!error_.ok()) return error_;
    return Finish();
  }

 private:
  absl::BitGenRef Rng() { return rng_.Get(); }

  void Push(int64_t t_ns, int id, EventType type) {
    queue_.push(Event{t_ns, seq_++, static_cast<uint32_t>(id), type});
  }

  void Trace(TraceEvent::Kind kind, int64_t now, int id, const Delivery& d) {
    if (!trace_) return;
    TraceEvent t;
    t.kind = kind;
    t.time_ns = now;
    t.delivery = id;
    t.endpoint = d.endpoint;
    t.attempt = d.attempt;
    trace_(t);
  }

  // --- The worker pool -------------------------------------------------------

  // Hands free workers to waiting deliveries, first come first served, and
  // starts them. Re-entrant calls (a delivery that ends at once frees its
  // worker) only return: the loop that is running picks it up.
  void Dispatch(int64_t now) {
    if (dispatching_) return;
    dispatching_ = true;
    while (free_workers_ > 0 && !ready_.empty() && error_.ok()) {
      const int id = ready_.front();
      ready_.pop_front();
      --free_workers_;
      Delivery& d = deliveries_[id];
      Trace(TraceEvent::Kind::kTookWorker, now, id, d);
      if (p_ == Policy::kCoordinated) {
        error_ = Admit(now, id, d);  // attempt 1, or the parked one again
      } else {
        Start(now, id, d);
      }
    }
    result_.peak_waiting_for_worker = std::max(
        result_.peak_waiting_for_worker, static_cast<int64_t>(ready_.size()));
    dispatching_ = false;
  }

  void FreeWorker(int64_t now, int id, const Delivery& d) {
    ++free_workers_;
    Trace(TraceEvent::Kind::kFreedWorker, now, id, d);
    Dispatch(now);
  }

  // An independent client got its worker: it sleeps its initial jitter (in
  // the worker), then sends attempt 1, unless that is past the horizon.
  void Start(int64_t now, int id, Delivery& d) {
    const int64_t jitter =
        Ns(engine::UniformDuration(Rng(), s_.initial_jitter));
    if (horizon_ns_ > 0 && now + jitter > horizon_ns_) {
      GiveUp(now, id, d, engine::Reason::kDeadline);
      return;
    }
    Push(now + jitter, id, EventType::kSend);
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
          if (p_ == Policy::kCoordinated) {
            if (absl::Status st = ReportAnswer(now, e.id, d); !st.ok()) {
              return st;
            }
          }
          FreeWorker(now, e.id, d);  // after the Report, as a worker would
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
      case EventType::kReady:
        ready_.push_back(static_cast<int>(e.id));
        Dispatch(now);
        return absl::OkStatus();
    }
    return absl::OkStatus();
  }

  // Sends attempt d.attempt + 1 (independent) or d.attempt (coordinated).
  void Send(int64_t now, int id, Delivery& d) {
    if (p_ != Policy::kCoordinated) ++d.attempt;
    d.last = endpoints_[d.endpoint].Receive(now);
    PolicyResult::PerEndpoint& ep = result_.per_endpoint[d.endpoint];
    ++result_.attempts;
    ++ep.attempts;
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
      ++ep.wasted_attempts;
    }
    if (trace_) {
      TraceEvent t;
      t.kind = TraceEvent::Kind::kAttempt;
      t.time_ns = now;
      t.delivery = id;
      t.endpoint = d.endpoint;
      t.attempt = d.attempt;
      t.failed = !d.last.ok;
      trace_(t);
    }
    Push(now + response_ns_, id, EventType::kAnswer);
  }

  // Records a success; the caller frees the worker.
  void Delivered(int64_t now, int id, Delivery& d) {
    d.settled = true;
    ++result_.delivered;
    ++result_.per_endpoint[d.endpoint].delivered;
    delivered_at_.push_back(now);
    if (s_.endpoints[d.endpoint].down.empty()) {
      healthy_delivered_at_.push_back(now);
    }
    Trace(TraceEvent::Kind::kDelivered, now, id, d);
  }

  // Dead-letters the delivery and frees its worker.
  void GiveUp(int64_t now, int id, Delivery& d, engine::Reason r) {
    d.settled = true;
    ++result_.given_up;
    ++result_.per_endpoint[d.endpoint].given_up;
    ++result_.given_up_by_reason[static_cast<int>(r)];
    if (trace_) {
      TraceEvent t;
      t.kind = TraceEvent::Kind::kGaveUp;
      t.time_ns = now;
      t.delivery = id;
      t.endpoint = d.endpoint;
      t.attempt = d.attempt;
      t.reason = r;
      trace_(t);
    }
    FreeWorker(now, id, d);
  }

  // Independent clients, after a failed attempt (or a retry the budget
  // skipped): attempt limit -> delay from the client's own policy ->
  // Retry-After (the client's own, clamped to the cap) -> horizon. The
  // budget (kFullJitterBudget) is asked when the retry is due (kSend), so it
  // removes attempts without changing when the others happen. The client
  // sleeps in its worker.
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
    in.endpoint = keys_[d.endpoint];
    in.attempt = d.attempt;
    in.deadline = deadline_;
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
    in.endpoint = keys_[d.endpoint];
    in.attempt = d.attempt;
    in.outcome = d.last.outcome;
    in.retry_after = d.last.retry_after;
    in.deadline = deadline_;
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

  // What a worker does with a decision (client/retry_loop.h): a PROCEED
  // delay is waited in the worker; a DEFER parks the delivery, frees the
  // worker, and queues for one again at defer_until.
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
        Push(until, id, EventType::kReady);
        FreeWorker(now, id, d);
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

  // The time the `need`-th of `times` (in time order) came, or none.
  static std::optional<int64_t> Nth99(const std::vector<int64_t>& times,
                                      int64_t population) {
    const int64_t need =
        static_cast<int64_t>(std::ceil(0.99 * static_cast<double>(population)));
    if (need < 1 || static_cast<int64_t>(times.size()) < need) {
      return std::nullopt;
    }
    return times[need - 1];
  }

  PolicyResult Finish() {
    for (const Delivery& d : deliveries_) {
      if (!d.settled) ++result_.unfinished;
    }
    result_.clock_regressions = clock_.regressions();
    result_.settled_s = clock_.now_ns() / 1e9;
    // Peaks over whole buckets, each bucket in the phase where it starts:
    // opening wave, rest of the outage, recovery window.
    const int64_t opening_ns = std::min(Ns(OpeningWave(s_)), recovery_ns_);
    const int64_t window_end = recovery_ns_ + Ns(s_.recovery_window);
    const double per_s = 1e9 / static_cast<double>(bucket_ns_);
    for (size_t b = 0; b < result_.attempts_per_bucket.size(); ++b) {
      const int64_t start = static_cast<int64_t>(b) * bucket_ns_;
      const double rps = result_.attempts_per_bucket[b] * per_s;
      if (start < opening_ns) {
        result_.peak_rps_opening = std::max(result_.peak_rps_opening, rps);
      } else if (start < recovery_ns_) {
        result_.peak_rps_outage = std::max(result_.peak_rps_outage, rps);
      } else if (start < window_end) {
        result_.peak_rps_recovery = std::max(result_.peak_rps_recovery, rps);
      }
    }
    // 99% of every delivery, counted at its success answer, from the
    // recovery; 99% of the always-up endpoints' deliveries, from t=0.
    if (std::optional<int64_t> t = Nth99(delivered_at_, s_.subscriptions)) {
      result_.time_to_99_s = std::max<int64_t>(0, *t - recovery_ns_) / 1e9;
    }
    int64_t healthy = 0;
    for (size_t e = 0; e < s_.endpoints.size(); ++e) {
      if (s_.endpoints[e].down.empty()) {
        healthy += result_.per_endpoint[e].deliveries;
      }
    }
    if (std::optional<int64_t> t = Nth99(healthy_delivered_at_, healthy)) {
      result_.healthy_time_to_99_s = *t / 1e9;
    }
    return result_;
  }

  const Scenario& s_;
  const Policy p_;
  const TraceFn& trace_;
  VirtualClock clock_;
  std::vector<Endpoint> endpoints_;
  std::vector<std::string> keys_;  // the engine's key for each endpoint
  engine::SeededRandom rng_;
  std::vector<Delivery> deliveries_;
  std::vector<engine::RetryBudget> budgets_;
  std::unique_ptr<engine::Engine> engine_;
  engine::BackoffParams backoff_;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  uint64_t seq_ = 0;
  // The pool: free workers, and the deliveries waiting for one (FIFO).
  int64_t free_workers_ = 0;
  std::deque<int> ready_;
  bool dispatching_ = false;
  absl::Status error_;  // an engine error met while dispatching
  int64_t recovery_ns_ = 0;
  int64_t bucket_ns_ = 1;
  int64_t response_ns_ = 0;
  int64_t horizon_ns_ = 0;
  absl::Time deadline_;  // every delivery's: creation (t=0) + horizon
  std::vector<int64_t> delivered_at_;
  std::vector<int64_t> healthy_delivered_at_;
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
  }
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
