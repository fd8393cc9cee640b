// The victim run's analysis: from what the workers saw of every call on a
// victim endpoint (their own clock, the answers and the admission tokens),
// how long agents kept answering it locally once its breaker opened (the
// not-clear push, end to end), and whether half-open probes ever exceeded
// their quota. Pure functions of the records; bench/agent/README.md
// explains the method.
//
// Per victim v (VictimSchedule), over its down phase (before UpFrom(v)):
//   * The breaker opened between open_lo and open_hi: open_lo is the
//     earliest send among v's failure reports answered CIRCUIT_OPEN (the
//     report that tripped it was sent no later), open_hi the earliest
//     answer among them (it had tripped by then). No such answer: v did not
//     trip (counted, not measured).
//   * stop_ms = the last answer of a local PROCEED on v (admission
//     kLocalAdmission: answered by an agent under its stream lease) minus
//     open_lo, at least 0: an upper bound on the time from the opening to
//     the last local answer of any agent.
//   * local_after_open: local PROCEEDs on v whose Admit was sent after
//     open_hi: answered locally while the breaker was certainly open
//     (before that agent had the push).
//   * answering: the agents that answered v locally in the
//     kAnsweringWindowNs before open_lo (the copies the push had to reach).
// Probes: the PROCEED(HALF_OPEN_PROBE) answers grouped by (victim, admission
// token): one group per half-open period. A probe is in flight from its
// answer to the send of its report (inside the coordinator's own interval,
// decision to report, so an overlap seen here is a real one). A period
// whose probes in flight ever exceed the quota is an overshoot.
#ifndef STAGGER_BENCH_AGENT_VICTIM_ANALYSIS_H_
#define STAGGER_BENCH_AGENT_VICTIM_ANALYSIS_H_

#include <cstdint>
#include <vector>

#include "bench/agent/victim_schedule.h"

namespace stagger::bench {

// One Admit on a victim, as its worker saw it.
struct AdmitRecord {
  int victim = 0;
  int agent = 0;          // index of the target the worker calls
  int64_t send_ns = 0;    // steady clock: the call started
  int64_t recv_ns = 0;    // ... its answer arrived
  int verdict = 0;        // v1::Verdict
  int reason = 0;         // v1::Reason
  uint64_t admission = 0;  // Decision.admission
  int64_t report_ns = -1;  // PROCEED: when its Report was sent; -1: never
};

// One failure Report on a victim and its answer.
struct FailureRecord {
  int victim = 0;
  int agent = 0;  // index of the target the worker calls
  int64_t send_ns = 0;
  int64_t recv_ns = 0;
  int reason = 0;  // of the answer, v1::Reason
};

// One tripped victim (times: steady ns).
struct VictimResult {
  int victim = 0;
  int64_t open_lo = 0;
  int64_t open_hi = 0;
  int64_t open_call_ns = 0;  // the earliest opening report's call
  int64_t last_local = 0;    // >= open_lo
  int64_t local_after_open = 0;
  int answering = 0;
};

struct VictimStats {
  static constexpr int64_t kAnsweringWindowNs = 250 * 1000 * 1000;

  int victims = 0;
  int tripped = 0;
  std::vector<double> stop_ms;         // one per tripped victim
  std::vector<double> open_report_ms;  // the earliest opening report's call
  int64_t local_after_open = 0;
  double mean_answering = 0;  // over tripped victims
  int probe_periods = 0;
  int probe_max_in_flight = 0;
  int probe_max_per_period = 0;
  int probe_overshoot = 0;  // periods over `half_open_probes`
  std::vector<VictimResult> per_victim;  // the tripped ones
};

VictimStats AnalyzeVictims(const VictimSchedule& schedule,
                           const std::vector<AdmitRecord>& admits,
                           const std::vector<FailureRecord>& failures,
                           int half_open_probes);

// Nearest-rank quantile q in [0, 1] of `values` (0 if empty).
double Quantile(std::vector<double> values, double q);

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_VICTIM_ANALYSIS_H_
