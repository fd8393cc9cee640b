// DeliveryWorker: one thread of stagger-agent-load. It owns one channel (a
// connection of its own) to one target, an agent's Unix socket or staggerd
// itself, and makes deliveries on it with the raw generated stub, blocking:
//   Admit(attempt 1); if PROCEED, the attempt "is sent" at once (the delay
//   is not waited: the load is what is measured) and a Report(attempt 1) of
//   its outcome echoing the admission token follows. Any other answer ends
//   the delivery (dropped; not retried).
// Outcomes: an attempt on a victim that is down fails (RETRYABLE_FAILURE;
// not retried: the victim run measures the opening). A background attempt
// fails with probability `fail_share` (drawn from the worker's seeded
// generator); its failure Report's answer schedules the retry: PROCEED
// after its delay, DEFER at its defer_for, but never more than
// `max_retry_wait` later (the bench shortens long waits: the calls are
// what it measures, and the coordinator's Admit does not check the delay).
// When due, Admit(attempt 2), and if PROCEED, Report(attempt 2, SUCCESS):
// the delivery is delivered (and retried). Retries wait in a queue of the
// worker's own, not in a sleep: the worker's timetable goes on meanwhile.
// GIVE_UP ends the delivery.
// Every other attempt succeeds.
//
// Pacing: `rate` deliveries/s for this thread on a fixed timetable; a
// worker running late starts the next at once, but never more than kMaxLag
// behind (no burst to catch up). rate 0: closed loop. Retries come on top,
// when due.
// Keys (key_choice.h): a `victim_share` of the deliveries go to the victims
// active now (round-robin; four in five to those in focus, if any), the
// rest to background keys: uniform (first_key, first_key + key_stride, ...
// mod endpoints) or, with `zipf`, drawn from it.
//
// Stats count the deliveries that start in the measured window
// [measure_from, end), whenever they end (a retry may come after `end`:
// Run makes the retries due of the deliveries it started, for at most
// kMaxDrainNs after `end`); records (every Admit and failure report on a
// victim) are kept for the whole run. Used by one thread; read after Run.
#ifndef STAGGER_BENCH_AGENT_DELIVERY_WORKER_H_
#define STAGGER_BENCH_AGENT_DELIVERY_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/agent/key_choice.h"
#include "bench/agent/steady_now.h"
#include "bench/agent/victim_analysis.h"
#include "bench/agent/victim_schedule.h"
#include "bench/bench_keys.h"
#include "bench/load/latency_histogram.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::bench {

// The run's timeline, shared by every worker: set before they start, read
// by every thread (atomic); until set the instants lie in the far future.
struct DriveClock {
  static constexpr int64_t kUnset = int64_t{1} << 62;
  std::atomic<int64_t> measure_from_ns{kUnset};
  std::atomic<int64_t> end_ns{kUnset};
  int64_t measure_from() const {
    return measure_from_ns.load(std::memory_order_relaxed);
  }
  int64_t end() const { return end_ns.load(std::memory_order_relaxed); }
};

struct WorkerOptions {
  std::string target;  // unix:/path or host:port
  int target_index = 0;
  int channel_index = 0;  // makes the channel's connection its own
  double rate = 0;        // deliveries/s of this worker; 0: closed loop
  int64_t endpoints = 1;  // background keys 0 .. endpoints-1
  int64_t first_key = 0;  // uniform keys
  int64_t key_stride = 1;
  const ZipfTable* zipf = nullptr;  // set: background keys drawn from it
  uint64_t seed = 1;                // WorkerSeed(seed, channel_index)
  double fail_share = 0;  // background attempts 1 that fail, [0, 1]
  int64_t max_retry_wait_ns = 1000 * 1000 * 1000;
  double victim_share = 0;
  const VictimSchedule* victims = nullptr;  // null: none
  absl::Duration call_timeout = absl::Seconds(5);
};

struct WorkerStats {
  int64_t started = 0;       // deliveries started in the window
  int64_t delivered = 0;     // ... answered PROCEED, then DONE
  int64_t local_admits = 0;  // ... whose PROCEED was an agent's own
  int64_t not_admitted = 0;  // ... whose Admit was not answered PROCEED
  int64_t failed = 0;        // ... whose attempt 1 failed (and was reported)
  int64_t retried = 0;       // ... delivered by their attempt 2
  int64_t retry_deferred = 0;  // retry Admits answered DEFER (tried again)
  int64_t gave_up = 0;       // ... ended by a GIVE_UP
  int64_t unfinished = 0;    // ... whose retry was still due at the drain's end
  int64_t unexpected = 0;    // success reports not answered DONE
  int64_t errors = 0;        // RPC errors, the whole run
  std::string first_error;
  LatencyHistogram delivery;  // Admit sent .. Report answered, delivered
                              // by attempt 1
  LatencyHistogram admit;
  LatencyHistogram report;
  LatencyHistogram retry_wait;  // the wait each failure report's answer
                                // asked for (before max_retry_wait)
  std::vector<AdmitRecord> admits;        // on victims, the whole run
  std::vector<FailureRecord> failures;    // on victims, the whole run

  void Merge(WorkerStats& o);  // moves o's records
};

class DeliveryWorker {
 public:
  static constexpr int64_t kMaxLagNs = 100 * 1000 * 1000;
  static constexpr int64_t kMaxDrainNs = int64_t{10} * 1000 * 1000 * 1000;

  DeliveryWorker(WorkerOptions options, const DriveClock* clock);
  // Opens the channel; false if it is not connected within `timeout`.
  bool Connect(absl::Duration timeout);
  void Run();  // until clock->end(), then the retries due
  WorkerStats& stats() { return stats_; }

 private:
  // A delivery whose attempt 1 failed, waiting for its attempt 2.
  struct Retry {
    int64_t due_ns = 0;
    uint64_t key = 0;
    bool measured = false;
    bool operator>(const Retry& o) const { return due_ns > o.due_ns; }
  };

  // One delivery started at `start`.
  void Deliver(int64_t start);
  // The key of the next delivery into admit_ and report_ (and whether its
  // attempt 1 fails, into fail_next_); the victim it is on, or -1.
  int NextKey(int64_t now);
  void SetKey(absl::string_view key);
  // Queues the retry a failure report's (or a retry Admit's) answer `d`
  // asks for.
  void Schedule(const v1::Decision& d, bool measured);
  // The earliest retry, due now.
  void RetryNext();
  void SleepUntil(int64_t t);
  bool Call(bool admit, int64_t* sent, int64_t* answered);
  void RecordError(const grpc::Status& s);

  const WorkerOptions o_;
  const DriveClock* const clock_;
  std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
  v1::AdmitRequest admit_;
  v1::AdmitResponse admit_resp_;
  v1::ReportRequest report_;
  v1::ReportResponse report_resp_;
  char key_buf_[kKeyBufferBytes];
  int64_t next_key_;   // uniform: the next background key
  uint64_t key_id_ = 0;  // the current delivery's background key
  bool fail_next_ = false;
  WorkerRandom rng_;
  std::priority_queue<Retry, std::vector<Retry>, std::greater<Retry>>
      retries_;
  double victim_credit_ = 0;
  uint64_t victim_picks_ = 0;  // deliveries on victims so far
  uint64_t focus_turn_ = 0;    // round-robin over the victims in focus
  uint64_t victim_turn_ = 0;   // ... over all active victims
  WorkerStats stats_;
};

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_DELIVERY_WORKER_H_
