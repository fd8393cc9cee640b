// DeliveryWorker: one thread of stagger-agent-load. It owns one channel (a
// connection of its own) to one target, an agent's Unix socket or staggerd
// itself, and makes deliveries on it with the raw generated stub, blocking:
//   Admit(attempt 1); if PROCEED, the attempt "is sent" at once (the delay
//   is not waited: the load is what is measured) and a Report(attempt 1) of
//   its outcome echoing the admission token follows. Any other answer ends
//   the delivery (dropped; not retried).
// An attempt on a victim that is down fails (RETRYABLE_FAILURE); every
// other attempt succeeds.
//
// Pacing: `rate` deliveries/s for this thread on a fixed timetable; a
// worker running late starts the next at once, but never more than kMaxLag
// behind (no burst to catch up). rate 0: closed loop.
// Keys: a `victim_share` of the deliveries go to the victims active now
// (round-robin; four in five to those in focus, if any), the rest to
// background keys first_key, first_key + key_stride, ... (mod endpoints).
//
// Stats count the deliveries that start in the measured window
// [measure_from, end); records (every Admit and failure report on a
// victim) are kept for the whole run. Used by one thread; read after Run,
// except covered_since(), which any thread may call while it runs.
#ifndef STAGGER_BENCH_AGENT_DELIVERY_WORKER_H_
#define STAGGER_BENCH_AGENT_DELIVERY_WORKER_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "bench/agent/revoke_analysis.h"
#include "bench/agent/victim_schedule.h"
#include "bench/bench_keys.h"
#include "bench/load/latency_histogram.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/coordinator.grpc.pb.h"

namespace stagger::bench {

int64_t NowNs();  // steady clock

// The run's timeline, shared by every worker. The driver may set it while
// they run (the warm-up ends when they have each covered their keys), so
// both instants are atomic; until set they lie in the far future.
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
  int64_t first_key = 0;
  int64_t key_stride = 1;
  double victim_share = 0;
  const VictimSchedule* victims = nullptr;  // null: none
  absl::Duration call_timeout = absl::Seconds(5);
};

struct WorkerStats {
  int64_t started = 0;       // deliveries started in the window
  int64_t delivered = 0;     // ... answered PROCEED, then DONE
  int64_t local_admits = 0;  // ... whose PROCEED was an agent's own
  int64_t not_admitted = 0;  // ... whose Admit was not answered PROCEED
  int64_t failed = 0;        // ... reported as failed (victims down)
  int64_t unexpected = 0;    // success reports not answered DONE
  int64_t errors = 0;        // RPC errors, the whole run
  std::string first_error;
  LatencyHistogram delivery;  // Admit sent .. Report answered, delivered
  LatencyHistogram admit;
  LatencyHistogram report;
  std::vector<AdmitRecord> admits;        // on victims, the whole run
  std::vector<FailureRecord> failures;    // on victims, the whole run

  void Merge(WorkerStats& o);  // moves o's records
};

class DeliveryWorker {
 public:
  static constexpr int64_t kMaxLagNs = 100 * 1000 * 1000;

  DeliveryWorker(WorkerOptions options, const DriveClock* clock);
  // Opens the channel; false if it is not connected within `timeout`.
  bool Connect(absl::Duration timeout);
  void Run();  // until clock->end()
  WorkerStats& stats() { return stats_; }
  // Whether every background key of this worker has had a delivery that
  // started at or after `t` (steady ns). Thread-safe.
  bool covered_since(int64_t t) const {
    return covered_from_.load(std::memory_order_relaxed) >= t;
  }

 private:
  // One delivery started at `start`.
  void Deliver(int64_t start);
  // The key of the next delivery into admit_ and report_; the victim it is
  // on, or -1.
  int NextKey(int64_t now);
  // One more background key of the current lap, at `now`.
  void CountLap(int64_t now);
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
  int64_t next_key_;
  // Background keys this worker cycles over, and where its current lap
  // (from first_key back to it) started; the start of the last full lap.
  int64_t keys_ = 1;
  int64_t lap_keys_ = 0;
  int64_t lap_start_ns_ = 0;
  std::atomic<int64_t> covered_from_{std::numeric_limits<int64_t>::min()};
  double victim_credit_ = 0;
  uint64_t victim_picks_ = 0;  // deliveries on victims so far
  uint64_t focus_turn_ = 0;    // round-robin over the victims in focus
  uint64_t victim_turn_ = 0;   // ... over all active victims
  WorkerStats stats_;
};

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_DELIVERY_WORKER_H_
