// The agent benchmarks' pure parts on records made up by hand: the key
// choice (Zipf, seeds), the victim schedule, the victim analysis (the
// bounds of the opening, the time local answers stop, local answers after
// the opening, the agents answering, probes per half-open period), the
// victim log, the /metrics parsing, the calls per delivery, and the push
// bench's latencies and bytes. No network, no clock.
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/agent/coordinator_sample.h"
#include "bench/agent/key_choice.h"
#include "bench/agent/push_latency.h"
#include "bench/agent/run_report.h"
#include "bench/agent/victim_analysis.h"
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

TEST(VictimAnalysisTest, BoundsTheOpeningAndCountsLocalAnswersAfterIt) {
  const VictimSchedule s = Schedule(2);
  // Victim 0 goes down at 1200 ms; its failure reports, the second and
  // third answered CIRCUIT_OPEN (sent at 1210 and 1205).
  const std::vector<FailureRecord> failures = {
      {0, 0, 1201 * kMs, 1203 * kMs, v1::BACKOFF},
      {0, 1, 1210 * kMs, 1212 * kMs, v1::CIRCUIT_OPEN},
      {0, 2, 1205 * kMs, 1215 * kMs, v1::CIRCUIT_OPEN}};
  std::vector<AdmitRecord> admits = {
      Local(0, 0, 900, 901), Local(0, 1, 950, 951),  // before (955, 1205]
      Local(0, 2, 1150, 1151), Local(0, 3, 1190, 1191),  // answering
      Local(0, 1, 1207, 1209),  // answered after open_lo = 1205
      Local(0, 2, 1213, 1219),  // sent after open_hi = 1212: counted
      Local(0, 3, 1600, 1601),  // after the down phase: not counted
  };
  // The coordinator's own PROCEED is no local answer.
  admits.push_back({0, 0, 1300 * kMs, 1301 * kMs, v1::PROCEED,
                    v1::HALF_OPEN_PROBE, engine::kProbeAdmissionBit | 7, -1});
  const VictimStats r = AnalyzeVictims(s, admits, failures, 5);
  EXPECT_EQ(r.victims, 2);
  EXPECT_EQ(r.tripped, 1);  // victim 1 has no failure answered CIRCUIT_OPEN
  ASSERT_EQ(r.stop_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(r.stop_ms[0], 14.0);      // 1219 - 1205
  EXPECT_DOUBLE_EQ(r.open_report_ms[0], 10.0);  // the report sent at 1205
  EXPECT_EQ(r.local_after_open, 1);
  EXPECT_DOUBLE_EQ(r.mean_answering, 2.0);  // agents 2 and 3 within 250 ms
}

TEST(VictimLogTest, EveryCallOnlyUnderAVictimAnsweredLocallyAfterOpenHi) {
  const VictimSchedule s = Schedule(2);
  // Victim 0 as above (one local answer after open_hi); victim 1 (down at 1300 ms) trips with no
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
  const VictimStats r = AnalyzeVictims(s, admits, failures, 5);
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

TEST(VictimAnalysisTest, NoLocalAnswerAfterTheOpeningIsZero) {
  const VictimSchedule s = Schedule(1);
  const VictimStats r = AnalyzeVictims(
      s, {Local(0, 0, 940, 945)},
      {{0, 0, 1250 * kMs, 1252 * kMs, v1::CIRCUIT_OPEN}}, 5);
  ASSERT_EQ(r.stop_ms.size(), 1u);
  EXPECT_DOUBLE_EQ(r.stop_ms[0], 0.0);
  EXPECT_EQ(r.local_after_open, 0);
  EXPECT_DOUBLE_EQ(r.mean_answering, 0.0);  // 945: before (1000, 1250]
}

AdmitRecord Probe(uint64_t period, int64_t recv_ms, int64_t report_ms) {
  return {0, 0, (recv_ms - 1) * kMs, recv_ms * kMs, v1::PROCEED,
          v1::HALF_OPEN_PROBE, engine::kProbeAdmissionBit | period,
          report_ms < 0 ? -1 : report_ms * kMs};
}

TEST(VictimAnalysisTest, ProbesInFlightPerHalfOpenPeriod) {
  const VictimSchedule s = Schedule(1);
  const std::vector<AdmitRecord> admits = {
      // Period 1: three overlapping probes, quota 2: an overshoot.
      Probe(1, 10, 20), Probe(1, 11, 21), Probe(1, 12, 22),
      // Period 2: three in turn, each answered as the last one's report
      // goes (a tie is no overlap), one never reported: at most 2 at once.
      Probe(2, 30, 31), Probe(2, 31, 32), Probe(2, 32, -1), Probe(2, 40, 41)};
  const VictimStats r = AnalyzeVictims(s, admits, {}, 2);
  EXPECT_EQ(r.probe_periods, 2);
  EXPECT_EQ(r.probe_max_in_flight, 3);
  EXPECT_EQ(r.probe_max_per_period, 4);
  EXPECT_EQ(r.probe_overshoot, 1);
  EXPECT_EQ(AnalyzeVictims(s, admits, {}, 3).probe_overshoot, 0);
}

TEST(KeyChoiceTest, ZipfTableFollowsOneOverRank) {
  const ZipfTable z(1000, 1.0);
  double harmonic = 0;
  for (int r = 1; r <= 1000; ++r) harmonic += 1.0 / r;
  EXPECT_NEAR(z.Probability(0), 1 / harmonic, 1e-12);
  EXPECT_NEAR(z.Probability(9), 1 / (10 * harmonic), 1e-12);
  EXPECT_NEAR(z.Probability(0) / z.Probability(1), 2.0, 1e-9);
  EXPECT_EQ(z.Rank(0.0), 0);
  EXPECT_EQ(z.Rank(z.Probability(0) * 0.999), 0);
  EXPECT_EQ(z.Rank(z.Probability(0) * 1.001), 1);
  EXPECT_EQ(z.Rank(0.999999999), 999);
  // Exponent 0: every rank alike.
  const ZipfTable flat(4, 0.0);
  EXPECT_EQ(flat.Rank(0.24), 0);
  EXPECT_EQ(flat.Rank(0.26), 1);
  EXPECT_EQ(flat.Rank(0.99), 3);
}

TEST(KeyChoiceTest, DrawsFollowTheTableAndRepeatWithTheSeed) {
  const ZipfTable z(100000, 1.0);
  WorkerRandom a(WorkerSeed(1, 3)), b(WorkerSeed(1, 3)), c(WorkerSeed(1, 4));
  std::vector<int64_t> counts(3, 0);
  bool differs = false;
  constexpr int kDraws = 200000;
  for (int i = 0; i < kDraws; ++i) {
    const double u = a.Unit();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u, b.Unit());  // same seed, same draws
    if (u != c.Unit()) differs = true;
    const int64_t r = z.Rank(u);
    if (r < 3) ++counts[r];
  }
  EXPECT_TRUE(differs);  // another worker draws its own
  // Rank 0 has 1/H(100000) = 8.3% of the draws, rank 2 a third of that
  // (within 5 standard deviations).
  for (int r = 0; r < 3; ++r) {
    const double want = z.Probability(r) * kDraws;
    EXPECT_NEAR(static_cast<double>(counts[r]), want, 5 * std::sqrt(want))
        << "rank " << r;
  }
}

TEST(CoordinatorFieldsTest, CallsAreUnaryRpcsAndSyncMessagesIn) {
  WorkerStats s;
  s.delivered = 1000;
  Window w;
  w.before = CoordinatorSample{100, 10, 30, 500, 1.0};
  w.after = CoordinatorSample{104, 26, 70, 520, 1.002};
  w.sample_seconds = 4;
  w.agents = 2;
  const std::string f = CoordinatorFields(s, w);
  // (4 RPCs + 16 messages in) / 1000; the 40 out are apart.
  EXPECT_NE(f.find(" coordinator_calls=20 "), std::string::npos) << f;
  EXPECT_NE(f.find(" calls_per_delivery=0.0200 "), std::string::npos) << f;
  EXPECT_NE(f.find(" sync_out=40 "), std::string::npos) << f;
  EXPECT_NE(f.find(" sync_out_per_delivery=0.0400 "), std::string::npos) << f;
  // 16 in over 4 s, from 2 agents.
  EXPECT_NE(f.find(" sync_in_per_sec=4.00 "), std::string::npos) << f;
  EXPECT_NE(f.find(" sync_in_per_agent_sec=2.00 "), std::string::npos) << f;
  EXPECT_NE(f.find(" coordinator_cpu_us_per_delivery=2.00"), std::string::npos)
      << f;
  w.agents = 0;  // direct: no agents
  EXPECT_NE(CoordinatorFields(s, w).find(" sync_in_per_agent_sec=nan "),
            std::string::npos);
}

TEST(PushLatencyTest, FromTheAnswerPerStream) {
  PushLatencies l;
  // A key answered at 100 ms: stream 0 had it at 104 ms, stream 1 before
  // the answer came back (0 ms, counted apart), stream 2 never.
  l.Add(100 * kMs, {104 * kMs, 99 * kMs, std::nullopt});
  ASSERT_EQ(l.ms.size(), 2u);
  EXPECT_DOUBLE_EQ(l.ms[0], 4.0);
  EXPECT_DOUBLE_EQ(l.ms[1], 0.0);
  EXPECT_EQ(l.before_answer, 1);
  EXPECT_EQ(l.missing, 1);
}

TEST(PushLatencyTest, TrafficInAWindow) {
  struct Message {
    int64_t at_ns;
    int64_t bytes;
  };
  const std::vector<Message> m = {{10, 100}, {20, 60000}, {30, 500}, {41, 7}};
  const Traffic t = TrafficBetween(m, 20, 40);  // both ends included
  EXPECT_EQ(t.messages, 2);
  EXPECT_EQ(t.bytes, 60500);
  EXPECT_EQ(TrafficBetween(m, 50, 60).messages, 0);
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
