#include "bench/sim/fleet.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bench/sim/limit.h"

namespace stagger::sim {

Endpoint::Endpoint(const EndpointSpec& spec)
    : spec_(&spec),
      rate_(spec.capacity_per_second),
      burst_(std::max(1.0, spec.capacity_per_second * 0.1)),
      tokens_(burst_) {}

Endpoint::Answer Endpoint::Receive(int64_t t_ns) {
  Answer a;
  const bool down = Down(t_ns);
  if (down && (spec_->down_failure_share >= 1 ||
               InShare(spec_->down_failure_share, down_received_))) {
    a.ok = false;
    if (spec_->down_retry_after > absl::ZeroDuration()) {
      a.outcome = engine::Outcome::kRateLimited;
      a.retry_after = spec_->down_retry_after;
    } else {
      a.outcome = engine::Outcome::kRetryableFailure;
    }
    return a;
  }
  if (spec_->up_failure_share > 0 && !down &&
      InShare(spec_->up_failure_share, up_received_)) {
    a.ok = false;
    a.outcome = engine::Outcome::kRetryableFailure;
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

bool Endpoint::Down(int64_t t_ns) {
  const std::vector<DownInterval>& down = spec_->down;
  while (next_ < down.size() && t_ns >= Ns(down[next_].end)) ++next_;
  return next_ < down.size() && t_ns >= Ns(down[next_].start);
}

bool Endpoint::InShare(double share, int64_t& received) {
  ++received;
  return std::floor(received * share) >
         std::floor(static_cast<double>(received - 1) * share);
}

Fleet::Fleet(const Scenario& s, Policy p, const TraceFn& trace)
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
  for (const EndpointSpec& e : s.endpoints) endpoints_.emplace_back(e);
  result_.per_endpoint.resize(s.endpoints.size());
  const std::vector<int> assigned = AssignEndpoints(s);
  for (int i = 0; i < s.subscriptions; ++i) {
    Delivery& d = deliveries_[i];
    d.endpoint = assigned[i];
    if (s.arrival_rate > 0) {
      d.created_ns = static_cast<int64_t>(std::floor(i * 1e9 / s.arrival_rate));
    }
    ++result_.per_endpoint[assigned[i]].deliveries;
  }
  free_workers_ = s.concurrency > 0 ? s.concurrency
                                    : std::numeric_limits<int64_t>::max();
  unsettled_ = s.subscriptions;
  delivered_at_.reserve(s.subscriptions);
}

std::optional<int64_t> Fleet::DeadlineNs(const Delivery& d) const {
  if (horizon_ns_ <= 0) return std::nullopt;
  return d.created_ns + horizon_ns_;
}

absl::StatusOr<PolicyResult> Fleet::Go() {
  // Deliveries created at t=0 queue for a worker at once, in order; the
  // others when they are created.
  driver_->Start();
  for (int i = 0; i < s_.subscriptions; ++i) {
    if (deliveries_[i].created_ns == 0) {
      ready_.push_back(i);
    } else {
      Push(deliveries_[i].created_ns, i, EventType::kCreate);
    }
  }
  Dispatch(0);
  const int64_t stop_ns = Ns(s_.max_virtual_time);
  while (error_.ok() && !queue_.empty()) {
    const Event e = queue_.top().event();
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

void Fleet::Push(int64_t t_ns, int id, EventType type) {
  if (seq_ == UINT32_MAX || id < 0 || id >= (1 << 24)) {
    error_ = absl::ResourceExhaustedError(
        "more than 2^32 events in one run, or an event id past 2^24");
    return;
  }
  queue_.push(QueuedEvent{t_ns, seq_++,
                          static_cast<uint32_t>(id) << 8 |
                              static_cast<uint32_t>(type)});
}

void Fleet::Trace(TraceEvent::Kind kind, int64_t now, int id) {
  if (!trace_) return;
  const Delivery& d = deliveries_[id];
  TraceEvent t;
  t.kind = kind;
  t.time_ns = now;
  t.delivery = id;
  t.endpoint = d.endpoint;
  t.attempt = d.attempt;
  trace_(t);
}

absl::Status Fleet::Handle(const Event& e) {
  const int64_t now = clock_.now_ns();
  switch (e.type) {
    case EventType::kCreate:
    case EventType::kReady:
      QueueForWorker(now, static_cast<int>(e.id), /*front=*/false);
      return error_;
    case EventType::kAnswer:
      return driver_->OnAnswer(now, static_cast<int>(e.id));
    default:
      return driver_->OnEvent(e);
  }
}

// --- The worker pool ---------------------------------------------------------

void Fleet::QueueForWorker(int64_t now, int id, bool front) {
  if (front) {
    ready_.push_front(id);
  } else {
    ready_.push_back(id);
  }
  Dispatch(now);
}

// Hands free workers to waiting deliveries, first come first served, and
// starts them. Re-entrant calls (a delivery that ends at once frees its
// worker) only return: the loop that is running picks it up.
void Fleet::Dispatch(int64_t now) {
  if (dispatching_) return;
  dispatching_ = true;
  while (free_workers_ > 0 && !ready_.empty() && error_.ok()) {
    const int id = ready_.front();
    ready_.pop_front();
    --free_workers_;
    Trace(TraceEvent::Kind::kTookWorker, now, id);
    error_ = driver_->OnWorker(now, id);
  }
  result_.peak_waiting_for_worker = std::max(
      result_.peak_waiting_for_worker, static_cast<int64_t>(ready_.size()));
  dispatching_ = false;
}

void Fleet::FreeWorker(int64_t now, int id) {
  ReleaseWorker(now, id);
  Dispatch(now);
}

void Fleet::ReleaseWorker(int64_t now, int id) {
  ++free_workers_;
  Trace(TraceEvent::Kind::kFreedWorker, now, id);
}

// --- Attempts and endings ----------------------------------------------------

void Fleet::Send(int64_t now, int id) {
  Delivery& d = deliveries_[id];
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
  if (result_.disabled_s.has_value()) ++result_.attempts_after_disable;
  if (d.attempt == 1) {
    ++result_.first_attempts;
    if (!d.last.ok) ++result_.failed_first_attempts;
  } else if (!d.last.ok) {
    ++result_.wasted_attempts;
    ++ep.wasted_attempts;
  }
  if (d.last.retry_after.has_value()) {
    retry_after_end_ns_ = std::max(
        retry_after_end_ns_, now + response_ns_ + Ns(*d.last.retry_after));
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

void Fleet::Delivered(int64_t now, int id) {
  Delivery& d = deliveries_[id];
  d.settled = true;
  --unsettled_;
  settled_ns_ = now;
  ++result_.delivered;
  ++result_.per_endpoint[d.endpoint].delivered;
  delivered_at_.push_back(now);
  if (s_.endpoints[d.endpoint].down.empty()) {
    healthy_delivered_at_.push_back(now);
  }
  Trace(TraceEvent::Kind::kDelivered, now, id);
}

void Fleet::GiveUp(int64_t now, int id, engine::Reason r, bool holds_worker) {
  Delivery& d = deliveries_[id];
  d.settled = true;
  --unsettled_;
  settled_ns_ = now;
  ++result_.given_up;
  ++result_.per_endpoint[d.endpoint].given_up;
  ++result_.given_up_by_reason[static_cast<int>(r)];
  if (r == engine::Reason::kEndpointDisabled && !result_.disabled_s) {
    result_.disabled_s = static_cast<double>(now) / 1e9;
  }
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
  if (holds_worker) FreeWorker(now, id);
}

// --- Results -----------------------------------------------------------------

namespace {

// The time the `need`-th of `times` (in time order) came, or none.
std::optional<int64_t> Nth99(const std::vector<int64_t>& times,
                             int64_t population) {
  const int64_t need =
      static_cast<int64_t>(std::ceil(0.99 * static_cast<double>(population)));
  if (need < 1 || static_cast<int64_t>(times.size()) < need) {
    return std::nullopt;
  }
  return times[need - 1];
}

}  // namespace

PolicyResult Fleet::Finish() {
  for (const Delivery& d : deliveries_) {
    if (!d.settled) ++result_.unfinished;
  }
  result_.clock_regressions = clock_.regressions();
  result_.settled_s = settled_ns_ / 1e9;
  result_.coordinator_messages = result_.admits + result_.reports +
                                 result_.sync_up + result_.sync_down;
  result_.messages_per_delivery =
      static_cast<double>(result_.coordinator_messages) / s_.subscriptions;
  FinishPeaks();
  FinishTimes();
  return result_;
}

// Peaks over whole buckets, each bucket in the phase where it starts:
// opening wave, rest of the outage, recovery window.
void Fleet::FinishPeaks() {
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
}

// 99% of every delivery, counted at its success answer, from the recovery
// (and from the end of the last Retry-After window, if later); 99% of the
// always-up endpoints' deliveries, from t=0; the limit for this row's
// backlog at that origin.
void Fleet::FinishTimes() {
  const std::optional<int64_t> t99 = Nth99(delivered_at_, s_.subscriptions);
  const int64_t origin = std::max(recovery_ns_, retry_after_end_ns_);
  if (t99) {
    result_.time_to_99_s = std::max<int64_t>(0, *t99 - recovery_ns_) / 1e9;
    result_.recovery_to_99_s = std::max<int64_t>(0, *t99 - origin) / 1e9;
  }
  const int64_t by_origin =
      std::upper_bound(delivered_at_.begin(), delivered_at_.end(), origin) -
      delivered_at_.begin();
  const double need =
      std::ceil(0.99 * static_cast<double>(s_.subscriptions)) - by_origin;
  result_.limit_s = LimitSeconds(s_, need, origin / 1e9);
  int64_t healthy = 0;
  for (size_t e = 0; e < s_.endpoints.size(); ++e) {
    if (s_.endpoints[e].down.empty()) {
      healthy += result_.per_endpoint[e].deliveries;
    }
  }
  if (std::optional<int64_t> t = Nth99(healthy_delivered_at_, healthy)) {
    result_.healthy_time_to_99_s = *t / 1e9;
  }
}

}  // namespace stagger::sim
