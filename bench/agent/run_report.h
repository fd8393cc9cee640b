// The output of stagger-agent-load: the fields of its result line
// (bench/agent/README.md defines each) and the victim run's log.
#ifndef STAGGER_BENCH_AGENT_RUN_REPORT_H_
#define STAGGER_BENCH_AGENT_RUN_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "bench/agent/coordinator_sample.h"
#include "bench/agent/delivery_worker.h"
#include "bench/agent/victim_analysis.h"
#include "bench/agent/victim_schedule.h"

namespace stagger::bench {

// What one run measured, besides the workers' stats.
struct Window {
  std::optional<CoordinatorSample> before, after;  // staggerd, if sampled
  double agent_cpu = 0;   // seconds over the window, all agents
  double driver_cpu = 0;  // seconds over the window
  double warmup_seconds = 0;
  double sample_seconds = 0;  // between the two samples of staggerd
  int agents = 0;             // agents whose pids were given
};

// The run's set-up, as printed.
struct RunShape {
  int targets = 0;
  int threads = 0;
  double rate = 0;     // offered deliveries/s, 0: closed loop
  double seconds = 0;  // the measured window
  int64_t endpoints = 0;
  std::string keys;          // uniform or zipf
  double zipf_exponent = 0;  // 0 unless zipf
  uint64_t seed = 0;
  double fail_share = 0;
};

// The fields every run prints: rates, counts, latencies, CPU.
std::string LoadFields(const RunShape& o, const WorkerStats& s,
                       const Window& w);
// staggerd's cost over the window, per delivery (" key=value..."; empty
// if it was not sampled).
std::string CoordinatorFields(const WorkerStats& s, const Window& w);
// The victim analysis (" key=value...").
std::string VictimFields(const VictimStats& r, int quota);

// Writes the tripped victims one by one (times in ms from the victim's
// down phase, or from open_lo for the local answers after it), and every
// call on each victim with a leak, for a look at the tail. False if the
// file cannot be written.
bool WriteVictimLog(const std::string& path, const VictimSchedule& s,
                    const VictimStats& r, const std::vector<AdmitRecord>& a,
                    const std::vector<FailureRecord>& failures);

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_RUN_REPORT_H_
