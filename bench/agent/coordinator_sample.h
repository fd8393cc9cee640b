// CoordinatorSample: what staggerd has done so far, read from outside:
// its /metrics page (plain HTTP/1.0 GET on loopback) and the CPU time of
// its process (/proc/<pid>/stat, user + system, clock-tick resolution).
// Two samples make the coordinator's cost of what happened between them.
//
// Coordinator calls (what calls_per_delivery counts, issue 25's
// definition): every unary RPC once (stagger_rpc_duration_seconds_count,
// all methods: a batch call is one call) and every lease-stream message IN
// once, whatever it carries (stagger_sync_messages_total{direction="in"}).
// The messages out (their answers, and the pushes of the not-clear set)
// are kept apart: sync_out. Decisions (stagger_decisions_total) count
// batch items one each and are reported beside them.
#ifndef STAGGER_BENCH_AGENT_COORDINATOR_SAMPLE_H_
#define STAGGER_BENCH_AGENT_COORDINATOR_SAMPLE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagger::bench {

struct CoordinatorSample {
  double rpcs = 0;
  double sync_in = 0;
  double sync_out = 0;
  double decisions = 0;
  double cpu_seconds = 0;  // 0 without a pid
  double calls() const { return rpcs + sync_in; }
};

// The sum of every sample of metric `name` (any labels) in a Prometheus
// text page; with `label` ("direction=\"in\""), only samples carrying it.
double SumMetric(absl::string_view page, absl::string_view name,
                 absl::string_view label = "");

// User + system CPU seconds of process `pid` (/proc/<pid>/stat).
absl::StatusOr<double> ProcessCpuSeconds(int pid);

// CPU seconds of all of `pids`.
absl::StatusOr<double> CpuOf(const std::vector<int>& pids);

// Scrapes http://<metrics_address>/metrics (host:port) and, if pid > 0,
// reads the process's CPU time.
absl::StatusOr<CoordinatorSample> SampleCoordinator(
    const std::string& metrics_address, int pid);

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_COORDINATOR_SAMPLE_H_
