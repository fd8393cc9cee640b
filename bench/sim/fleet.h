// The simulator's core (internal to bench/sim): the virtual clock, the event
// queue, the endpoints' model, the deliveries and the worker pool, and the
// accounting every policy shares. What a policy decides lives in a Driver:
// IndependentDriver (independent.h) for the per-process retry clients,
// CoordinatedDriver (coordinated.h) for the fleet that asks one engine.
//
// Contract: single-threaded; events run in (virtual time, insertion order);
// the clock is set to each event's time before it runs. A Driver reports a
// bug (the engine refusing an input the simulator built) by returning an
// error, which ends the run with it.
#ifndef STAGGER_BENCH_SIM_FLEET_H_
#define STAGGER_BENCH_SIM_FLEET_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/sim/quad_heap.h"
#include "bench/sim/sim.h"
#include "core/engine/clock.h"
#include "core/engine/decision.h"
#include "core/engine/random.h"

namespace stagger::sim {

// Virtual t=0 on the engine's clock: an arbitrary fixed instant
// (2026-01-01T00:00:00Z), so engine times are realistic Unix times.
inline absl::Time Epoch() { return absl::FromUnixSeconds(1767225600); }
inline int64_t Ns(absl::Duration d) { return absl::ToInt64Nanoseconds(d); }
// An engine instant as virtual ns since t=0 (InfiniteFuture: INT64_MAX).
inline int64_t VirtualNs(absl::Time t) {
  return absl::ToInt64Nanoseconds(t - Epoch());
}
// The same rounded up to a whole ns (an event for `t` never comes early).
inline int64_t CeilNs(absl::Time t) {
  if (t == absl::InfiniteFuture()) return INT64_MAX;
  const absl::Duration since = t - Epoch();
  int64_t ns = absl::ToInt64Nanoseconds(since);
  if (absl::Nanoseconds(ns) < since) ++ns;
  return ns;
}

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
  kCreate,   // delivery `id` is created and queues for a worker
  kSend,     // send delivery `id`'s next attempt now
  kAnswer,   // the attempt's answer arrives
  kAdmit,    // coordinated: Admit the attempt (after a PROCEED delay)
  kReady,    // coordinated: a parked delivery queues for a worker again
  kReport,   // coordinated: Report the failed attempt (its counts went first)
  kLook,     // the wait room looks at endpoint `id`'s line
  kPoll,     // agent `id` sends what its lease stream has due
  kTick,     // the coordinator's lease replica pushes its set's changes
  kMessage,  // lease stream message `id` arrives
};

struct Event {
  int64_t t_ns;
  uint32_t id;  // < 2^24
  EventType type;
};

// An event as queued: 16 bytes (QuadHeap), ordered by (time, insertion
// order), so ties keep FIFO order, deterministically.
struct QueuedEvent {
  int64_t t_ns;
  uint32_t seq;
  uint32_t id_type;  // id << 8 | type
  Event event() const {
    return Event{t_ns, id_type >> 8, static_cast<EventType>(id_type & 0xff)};
  }
};
struct Sooner {
  bool operator()(const QueuedEvent& a, const QueuedEvent& b) const {
    return a.t_ns != b.t_ns ? a.t_ns < b.t_ns : a.seq < b.seq;
  }
};

// An endpoint as the fleet sees it: down in its spec's intervals (failing
// every attempt with its failure kind), up otherwise, where a share of the
// attempts may fail (up_failure_share) and a capacity may apply (a token
// bucket of 100 ms worth, full at the start and refilled while down).
// Attempts must arrive in time order.
class Endpoint {
 public:
  struct Answer {
    bool ok = true;
    engine::Outcome outcome = engine::Outcome::kSuccess;
    std::optional<absl::Duration> retry_after;
  };
  explicit Endpoint(const EndpointSpec& spec);
  // An attempt arriving at `t_ns`.
  Answer Receive(int64_t t_ns);

 private:
  bool Down(int64_t t_ns);
  // The k-th of `received` attempts is one of `share`'s (spread evenly).
  static bool InShare(double share, int64_t& received);

  const EndpointSpec* spec_;
  size_t next_ = 0;  // the first down interval not yet over
  double rate_;
  double burst_;
  double tokens_;
  int64_t last_ns_ = 0;
  int64_t up_received_ = 0;
  int64_t down_received_ = 0;
};

// Per-delivery state. Independent rows use the backoff fields; the
// coordinated row `attempt`, the answer and its admission (the engine
// holds the rest).
struct Delivery {
  int32_t attempt = 0;        // attempts sent so far (coordinated: the
                              // attempt being admitted/sent)
  int32_t backoff_index = 0;  // retries decided so far, sent or skipped
  int32_t endpoint = 0;       // index in Scenario::endpoints
  int64_t created_ns = 0;     // virtual time of creation
  int64_t previous_ns = 0;    // decorrelated: the previous delay
  Endpoint::Answer last;      // the last attempt's answer
  // Coordinated: the admission token of the attempt in flight, and a
  // waiting call's PROCEED not yet sent (it is, once the delivery has a
  // worker, after `send_delay_ns`).
  uint64_t admission = engine::kNoAdmission;
  bool admitted = false;
  int64_t send_delay_ns = 0;
  bool settled = false;
};

class Fleet {
 public:
  // What a policy decides. Errors end the run.
  class Driver {
   public:
    virtual ~Driver() = default;
    // Before the first event (t=0).
    virtual void Start() {}
    // Delivery `id` got a worker.
    virtual absl::Status OnWorker(int64_t now, int id) = 0;
    // Its attempt's answer arrived (delivery(id).last).
    virtual absl::Status OnAnswer(int64_t now, int id) = 0;
    // Every other event but kCreate.
    virtual absl::Status OnEvent(const Event& e) = 0;
  };

  Fleet(const Scenario& s, Policy p, const TraceFn& trace);
  void set_driver(Driver* d) { driver_ = d; }
  absl::StatusOr<PolicyResult> Go();

  const Scenario& scenario() const { return s_; }
  Policy policy() const { return p_; }
  Delivery& delivery(int id) { return deliveries_[id]; }
  int deliveries() const { return static_cast<int>(deliveries_.size()); }
  VirtualClock& clock() { return clock_; }
  engine::SeededRandom& random() { return rng_; }
  absl::BitGenRef Rng() { return rng_.Get(); }
  PolicyResult& result() { return result_; }
  int64_t response_ns() const { return response_ns_; }
  // The delivery's deadline: creation + horizon (none: no horizon).
  std::optional<int64_t> DeadlineNs(const Delivery& d) const;
  bool AllSettled() const { return unsettled_ == 0; }

  // Queues an event; `id` < 2^24 (ValidateScenario bounds the ids). A run
  // of 2^32 events ends with an error.
  void Push(int64_t t_ns, int id, EventType type);
  // Queues the delivery for a worker (at the front: it goes next) and
  // hands out free workers.
  void QueueForWorker(int64_t now, int id, bool front);
  // Gives the delivery's worker back and hands out free workers.
  void FreeWorker(int64_t now, int id);
  // The same in two steps: the worker goes back to the pool, and (after
  // the caller has decided what the delivery does next) free workers are
  // handed out.
  void ReleaseWorker(int64_t now, int id);
  void Dispatch(int64_t now);
  // Sends attempt d.attempt + 1 (independent) or d.attempt (coordinated)
  // and schedules its answer.
  void Send(int64_t now, int id);
  // Records a success; the caller frees the worker.
  void Delivered(int64_t now, int id);
  // Dead-letters the delivery and frees its worker (if it holds one).
  void GiveUp(int64_t now, int id, engine::Reason r, bool holds_worker = true);
  void Trace(TraceEvent::Kind kind, int64_t now, int id);

 private:
  absl::Status Handle(const Event& e);
  PolicyResult Finish();
  void FinishPeaks();
  void FinishTimes();

  const Scenario& s_;
  const Policy p_;
  const TraceFn& trace_;
  Driver* driver_ = nullptr;
  VirtualClock clock_;
  std::vector<Endpoint> endpoints_;
  engine::SeededRandom rng_;
  std::vector<Delivery> deliveries_;
  QuadHeap<QueuedEvent, Sooner> queue_;
  uint32_t seq_ = 0;
  // The pool: free workers, and the deliveries waiting for one (FIFO).
  int64_t free_workers_ = 0;
  std::deque<int> ready_;
  bool dispatching_ = false;
  absl::Status error_;  // a driver error met while dispatching
  int64_t unsettled_ = 0;
  int64_t recovery_ns_ = 0;
  int64_t bucket_ns_ = 1;
  int64_t response_ns_ = 0;
  int64_t horizon_ns_ = 0;
  int64_t retry_after_end_ns_ = 0;  // the latest Retry-After window's end
  int64_t settled_ns_ = 0;          // the last delivery's end
  std::vector<int64_t> delivered_at_;
  std::vector<int64_t> healthy_delivered_at_;
  PolicyResult result_;
};

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_FLEET_H_
