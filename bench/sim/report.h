// stagger-sim's output: the results table as Markdown or CSV, and the
// attempts-per-second plot as a self-contained SVG (no scripts, no external
// fonts or styles), readable without the table.
//
// Contract: pure functions of their inputs (deterministic text). Numbers are
// rounded for reading: rates to whole attempts/s, times to 0.1 s. A time to
// 99% that never came is "never" in Markdown and "inf" in CSV (so a CSV
// reader parsing floats gets infinity).
#ifndef STAGGER_BENCH_SIM_REPORT_H_
#define STAGGER_BENCH_SIM_REPORT_H_

#include <string>
#include <vector>

#include "bench/sim/sim.h"

namespace stagger::sim {

// Exactly this header line, then one line per result, in order.
// recovery_to_99_s, limit_s and recovery_to_100_s ("inf": never / the
// backlog cannot finish / something was given up) to 0.1 s; coordinator
// messages per delivery to 0.01 (0 for the independent rows, which talk to
// no coordinator); over_capacity: PolicyResult::over_capacity.
inline constexpr char kCsvHeader[] =
    "policy,peak_rps_outage,peak_rps_recovery,time_to_99_s,wasted_attempts,"
    "delivered,given_up,recovery_to_99_s,limit_s,messages_per_delivery,"
    "over_capacity,recovery_to_100_s";

std::string FormatCsv(const std::vector<PolicyResult>& results);
// One result's line of that table, without the newline.
std::string CsvCells(const PolicyResult& r);

// 12345.6 -> "12,346" (rounded to a whole number).
std::string Thousands(double v);

// The scenario in words: "one endpoint down for 20s, then instantly healthy,
// answering 500 while down (capacity unlimited)"; several endpoints are
// listed with their index (#0, #1, ...).
std::string DescribeEndpoints(const Scenario& s);
// "a worker per delivery (unlimited concurrency)" or the pool's size.
std::string DescribeWorkers(const Scenario& s);
// The coordinated fleet's client: "waiting admission; 4 agents with leases
// (flush 500ms, 1ms one way, ttl 5s)", or the old client, or no agents.
std::string DescribeFleet(const Scenario& s);

// A Markdown table (the CSV's columns, with titles; messages per delivery
// only for the coordinated row), then a short legend: the scenario and, for
// each row that gave up, why.
std::string FormatMarkdown(const Scenario& s,
                           const std::vector<PolicyResult>& results);

// What the endpoints saw after the recovery, one row per bucket (the
// scenario's), the way an access log counts them: attempts that succeeded
// and over-capacity answers (PolicyResult::successes_per_bucket,
// over_capacity_per_bucket), per result, from the bucket of the recovery to
// the last one with an attempt (at most `max_rows` rows).
std::string FormatTimeline(const Scenario& s,
                           const std::vector<PolicyResult>& results,
                           int max_rows = 60);

// Attempts/s over virtual time, one line per result, the outage shaded,
// log-scaled y axis (the rows span four orders of magnitude).
std::string RenderSvg(const Scenario& s,
                      const std::vector<PolicyResult>& results);

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_REPORT_H_
