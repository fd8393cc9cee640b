// stagger-agent-load's pure parts on records made up by hand: the victim
// schedule, the revoke analysis (the bounds of the opening, the revoke
// time, leaks, holders, probes per half-open period), the victim log and
// the /metrics parsing. No network, no clock.
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/agent/coordinator_sample.h"
#include "bench/agent/revoke_analysis.h"
#include "bench/agent/run_report.h"
#include "bench/agent/victim_schedule.h"
#include "core/engine/decision.h"
#include "gtest/gtest.h"
#include "stagger/v1/coordinator.pb.h"

namespace stagger::bench {
namespace {

constexpr int64_t kMs = 1000 * 1000;

// Victims every 100 ms from t = 1000 ms: healthy 200 ms, down 300, up 100.
VictimSchedule Schedule(int count) {
  VictimSchedule s;
  s.start_ns = 1000 * kMs;
  s.warm_ns = 200 * kMs;
  s.down_ns = 300 * kMs;
  s.up_ns = 100 * kMs;
  s.spacing_ns = 100 * kMs;
  s.count = count;
  return s;
}

TEST(VictimScheduleTest, ActiveVictimsAndPhases) {
  const VictimSchedule s = Schedule(10);
  int first = -1, last = -1;
  s.ActiveAt(999 * kMs, &first, &last);
  EXPECT_EQ(first, last);  // before the start: none
  s.ActiveAt(1000 * kMs, &first, &last);
  EXPECT_EQ(first, 0);
  EXPECT_EQ(last, 1);
  // Each lives 600 ms: at 1650 ms victims 1..6 (0 ended at 1600).
  s.ActiveAt(1650 * kMs, &first, &last);
  EXPECT_EQ(first, 1);
  EXPECT_EQ(last, 7);
  // In focus: from 150 ms before the down phase to 50 ms into it, i.e.
  // StartOf(v) + 50 <= t < StartOf(v) + 250: at 1650 ms victims 5 and 6.
  s.FocusAt(1650 * kMs, &first, &last);
  EXPECT_EQ(first, 5);
  EXPECT_EQ(last, 7);
  s.ActiveAt(5000 * kMs, &first, &last);  // all over
  EXPECT_EQ(first, last);
  EXPECT_FALSE(s.IsDown(2, 1399 * kMs));
  EXPECT_TRUE(s.IsDown(2, 1400 * kMs));
  EXPECT_FALSE(s.IsDown(2, 1700 * kMs));
  // A 1 s window holds the victims that start by 400 ms: 5.
  EXPECT_EQ(VictimSchedule::CountFor(1000 * kMs, 600 * kMs, 100 * kMs), 5);
  EXPECT_EQ(VictimSchedule::CountFor(500 * kMs, 600 * kMs, 100 * kMs), 0);
}

AdmitRecord Local(int victim, int agent, int64_t send_ms, int64_t recv_ms) {
  return {victim, agent, send_ms * kMs, recv_ms * kMs, v1::PROCEED,
          v1::INITIAL_JITTER, engine::kLocalAdmission, recv_ms * kMs};
}

TEST(RevokeAnalysisTest, BoundsTheOpeningAndCountsLeaks) {
  const VictimSchedule s = Schedule(2);
  // Victim 0 goes down at 1200 ms; its failure reports, the second and
  // third answered CIRCUIT_OPEN (sent at 1210 and 1205).
  const std::vector<FailureRecord> failures = {
      {0, 0, 1201 * kMs, 1203 * kMs, v1::BACKOFF},
      {0, 1, 1210 * kMs, 1212 * kMs, v1::CIRCUIT_OPEN},
      {0, 2, 1205 * kMs, 1215 * kMs, v1::CIRCUIT_OPEN}};
  std::vector<AdmitRecord> admits = {
      Local(0, 0, 900, 901), Local(0, 1, 950, 951),  // before (955, 1205]
      Local(0, 2, 1150, 1151), Local(0, 3, 1190, 1191),  // holders
      Local(0, 1, 1207, 1209),  // answered after open_lo = 1205
      Local(0, 2, 1213, 1219),  // sent after open_hi = 1212: a leak
      Local(0, 3, 1600, 1601),  // after the down phase: not counted
  };
  // The coordinator's own PROCEED is no local answer.
  admits.push_back({0, 0, 1300 * kMs, 1301 * kMs, v1::PROCEED,
                    v1::HALF_OPEN_PROBE, engine::kProbeAdmissionBit | 7, -1});
  const RevokeStats r = AnalyzeRevokes(s, admits, failures, 5);
  EXPECT_EQ(r.victims, 2);
  EXPECT_EQ(r.tripped, 1);  // victim 1 has no failure answered CIRCUIT_OPEN
  ASSERT_EQ(r.revoke_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(r.revoke_ms[0], 14.0);      // 1219 - 1205
  EXPECT_DOUBLE_EQ(r.open_report_ms[0], 10.0);  // the report sent at 1205
  EXPECT_EQ(r.leaked, 1);
  EXPECT_DOUBLE_EQ(r.mean_holders, 2.0);  // agents 2 and 3 within 250 ms
}

TEST(VictimLogTest, EveryCallOnlyUnderAVictimWithALeak) {
  const VictimSchedule s = Schedule(2);
  // Victim 0 as above (one leak); victim 1 (down at 1300 ms) trips with no
  // local answer after the opening: its line only.
  const std::vector<FailureRecord> failures = {
      {0, 0, 1201 * kMs, 1203 * kMs, v1::BACKOFF},
      {0, 1, 1210 * kMs, 1212 * kMs, v1::CIRCUIT_OPEN},
      {0, 2, 1205 * kMs, 1215 * kMs, v1::CIRCUIT_OPEN},
      {1, 3, 1320 * kMs, 1322 * kMs, v1::CIRCUIT_OPEN}};
  const std::vector<AdmitRecord> admits = {
      Local(0, 1, 1207, 1209), Local(0, 2, 1213, 1219),
      {0, 0, 1300 * kMs, 1301 * kMs, v1::PROCEED, v1::HALF_OPEN_PROBE,
       engine::kProbeAdmissionBit | 7, -1},
      {0, 3, 1230 * kMs, 1231 * kMs, v1::DEFER, v1::CIRCUIT_OPEN, 0, -1},
      Local(0, 0, 1150, 1151)};
  const RevokeStats r = AnalyzeRevokes(s, admits, failures, 5);
  ASSERT_EQ(r.tripped, 2);
  const std::string path = ::testing::TempDir() + "/victim_log.txt";
  ASSERT_TRUE(WriteVictimLog(path, s, r, admits, failures));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string header = text.str().substr(0, text.str().find('\n') + 1);
  EXPECT_EQ(header[0], '#');
  // Times: the opening's bounds from the down phase, the rest from open_lo
  // (1205 ms); calls in send order, the local answer before open_lo too.
  EXPECT_EQ(text.str().substr(header.size()),
            "0 5.00 12.00 10.00 14.00 1 1 | 1:2.00:4.00 2:8.00:14.00\n"
            "  A 0 -55.00 -54.00 PROCEED INITIAL_JITTER local\n"
            "  F 0 -4.00 -2.00 - BACKOFF -\n"
            "  F 2 0.00 10.00 - CIRCUIT_OPEN -\n"
            "  A 1 2.00 4.00 PROCEED INITIAL_JITTER local\n"
            "  F 1 5.00 7.00 - CIRCUIT_OPEN -\n"
            "  A 2 8.00 14.00 PROCEED INITIAL_JITTER local\n"
            "  A 3 25.00 26.00 DEFER CIRCUIT_OPEN coordinator\n"
            "  A 0 95.00 96.00 PROCEED HALF_OPEN_PROBE probe\n"
            "1 20.00 22.00 2.00 0.00 0 0 |\n");
  EXPECT_FALSE(WriteVictimLog(::testing::TempDir() + "/no/such/dir/log", s,
                              r, admits, failures));
}

TEST(RevokeAnalysisTest, NoLocalAnswerAfterTheOpeningIsZero) {
  const VictimSchedule s = Schedule(1);
  const RevokeStats r = AnalyzeRevokes(
      s, {Local(0, 0, 940, 945)},
      {{0, 0, 1250 * kMs, 1252 * kMs, v1::CIRCUIT_OPEN}}, 5);
  ASSERT_EQ(r.revoke_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(r.revoke_ms[0], 0.0);
  EXPECT_EQ(r.leaked, 0);
  EXPECT_DOUBLE_EQ(r.mean_holders, 0.0);  // 945: before (1000, 1250]
}

AdmitRecord Probe(uint64_t period, int64_t recv_ms, int64_t report_ms) {
  return {0, 0, (recv_ms - 1) * kMs, recv_ms * kMs, v1::PROCEED,
          v1::HALF_OPEN_PROBE, engine::kProbeAdmissionBit | period,
          report_ms < 0 ? -1 : report_ms * kMs};
}

TEST(RevokeAnalysisTest, ProbesInFlightPerHalfOpenPeriod) {
  const VictimSchedule s = Schedule(1);
  const std::vector<AdmitRecord> admits = {
      // Period 1: three overlapping probes, quota 2: an overshoot.
      Probe(1, 10, 20), Probe(1, 11, 21), Probe(1, 12, 22),
      // Period 2: three in turn, each answered as the last one's report
      // goes (a tie is no overlap), one never reported: at most 2 at once.
      Probe(2, 30, 31), Probe(2, 31, 32), Probe(2, 32, -1), Probe(2, 40, 41)};
  const RevokeStats r = AnalyzeRevokes(s, admits, {}, 2);
  EXPECT_EQ(r.probe_periods, 2);
  EXPECT_EQ(r.probe_max_in_flight, 3);
  EXPECT_EQ(r.probe_max_per_period, 4);
  EXPECT_EQ(r.probe_overshoot, 1);
  EXPECT_EQ(AnalyzeRevokes(s, admits, {}, 3).probe_overshoot, 0);
}

TEST(QuantileTest, NearestRank) {
  EXPECT_EQ(Quantile({}, 0.5), 0);
  EXPECT_EQ(Quantile({3, 1, 2}, 0.5), 2);
  EXPECT_EQ(Quantile({3, 1, 2}, 0.99), 3);
  EXPECT_EQ(Quantile({3, 1, 2}, 0), 1);
}

TEST(SumMetricTest, SumsOneFamilyAndOptionallyOneLabel) {
  const char* page =
      "# HELP stagger_sync_messages_total Messages\n"
      "# TYPE stagger_sync_messages_total counter\n"
      "stagger_sync_messages_total{direction=\"in\"} 12\n"
      "stagger_sync_messages_total{direction=\"out\"} 30\n"
      "stagger_sync_messages_total_other 1000\n"
      "stagger_rpc_duration_seconds_count{method=\"Admit\"} 5\n"
      "stagger_rpc_duration_seconds_count{method=\"Report\"} 7\n"
      "stagger_rpc_duration_seconds_sum{method=\"Report\"} 0.5\n"
      "stagger_leases 3\n";
  EXPECT_EQ(SumMetric(page, "stagger_sync_messages_total"), 42);
  EXPECT_EQ(SumMetric(page, "stagger_sync_messages_total", "direction=\"in\""),
            12);
  EXPECT_EQ(SumMetric(page, "stagger_rpc_duration_seconds_count"), 12);
  EXPECT_EQ(SumMetric(page, "stagger_leases"), 3);
  EXPECT_EQ(SumMetric(page, "stagger_missing_total"), 0);
}

}  // namespace
}  // namespace stagger::bench
