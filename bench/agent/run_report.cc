#include "bench/agent/run_report.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_format.h"
#include "core/engine/decision.h"
#include "stagger/v1/coordinator.pb.h"

namespace stagger::bench {
namespace {

std::string Us(int64_t ns) { return absl::StrFormat("%.1f", ns / 1000.0); }

}  // namespace

std::string LoadFields(const RunShape& o, const WorkerStats& s,
                       const Window& w) {
  const double secs = o.seconds;
  const double per = s.delivered > 0 ? 1e6 / static_cast<double>(s.delivered)
                                     : 0;
  std::string out = absl::StrFormat(
      "targets=%d threads=%d endpoints=%d keys=%s zipf_exponent=%.2f seed=%d "
      "fail_share=%.4f offered_per_sec=%.0f started_per_sec=%.0f "
      "achieved_per_sec=%.0f seconds=%.1f started=%d delivered=%d "
      "local_admit_share=%.4f not_admitted=%d ",
      o.targets, o.threads, o.endpoints, o.keys, o.zipf_exponent, o.seed,
      o.fail_share, o.rate, s.started / secs, s.delivered / secs, secs,
      s.started, s.delivered,
      s.started > 0 ? static_cast<double>(s.local_admits) / s.started : 0.0,
      s.not_admitted);
  absl::StrAppendFormat(
      &out,
      "failed=%d retried=%d retry_deferred=%d gave_up=%d unfinished=%d "
      "retry_wait_p50_ms=%.1f retry_wait_p99_ms=%.1f unexpected=%d errors=%d ",
      s.failed, s.retried, s.retry_deferred, s.gave_up, s.unfinished,
      s.retry_wait.Quantile(0.5) / 1e6, s.retry_wait.Quantile(0.99) / 1e6,
      s.unexpected, s.errors);
  absl::StrAppendFormat(
      &out,
      "delivery_p50_us=%s delivery_p99_us=%s admit_p50_us=%s admit_p99_us=%s "
      "report_p50_us=%s report_p99_us=%s driver_cpu_us_per_delivery=%.1f "
      "agent_cpu_us_per_delivery=%.1f warmup_seconds=%.1f",
      Us(s.delivery.Quantile(0.5)), Us(s.delivery.Quantile(0.99)),
      Us(s.admit.Quantile(0.5)), Us(s.admit.Quantile(0.99)),
      Us(s.report.Quantile(0.5)), Us(s.report.Quantile(0.99)),
      w.driver_cpu * per, w.agent_cpu * per, w.warmup_seconds);
  return out;
}

std::string CoordinatorFields(const WorkerStats& s, const Window& w) {
  if (!w.before.has_value() || !w.after.has_value()) return "";
  const CoordinatorSample& a = *w.before;
  const CoordinatorSample& b = *w.after;
  const double d = static_cast<double>(s.delivered);
  const double calls = b.calls() - a.calls();
  const double sync_in = b.sync_in - a.sync_in;
  const double sync_out = b.sync_out - a.sync_out;
  const double in_per_sec =
      w.sample_seconds > 0 ? sync_in / w.sample_seconds : 0;
  return absl::StrFormat(
      " coordinator_calls=%.0f coordinator_rpcs=%.0f sync_in=%.0f "
      "sync_out=%.0f sample_seconds=%.2f sync_in_per_sec=%.2f "
      "sync_in_per_agent_sec=%s coordinator_decisions=%.0f "
      "calls_per_delivery=%.4f sync_out_per_delivery=%.4f "
      "coordinator_cpu_us_per_delivery=%.2f",
      calls, b.rpcs - a.rpcs, sync_in, sync_out, w.sample_seconds, in_per_sec,
      w.agents > 0 ? absl::StrFormat("%.2f", in_per_sec / w.agents) : "nan",
      b.decisions - a.decisions, d > 0 ? calls / d : 0.0,
      d > 0 ? sync_out / d : 0.0,
      d > 0 ? (b.cpu_seconds - a.cpu_seconds) * 1e6 / d : 0.0);
}

std::string VictimFields(const VictimStats& r, int quota) {
  return absl::StrFormat(
      " victims=%d tripped=%d stop_p50_ms=%.2f stop_p99_ms=%.2f "
      "stop_max_ms=%.2f open_report_p50_ms=%.2f open_report_p99_ms=%.2f "
      "local_after_open=%d answering_at_open=%.2f probe_periods=%d "
      "probe_max_in_flight=%d probe_max_per_period=%d half_open_probes=%d "
      "probe_overshoot=%d",
      r.victims, r.tripped, Quantile(r.stop_ms, 0.5),
      Quantile(r.stop_ms, 0.99), Quantile(r.stop_ms, 1.0),
      Quantile(r.open_report_ms, 0.5), Quantile(r.open_report_ms, 0.99),
      r.local_after_open, r.mean_answering, r.probe_periods,
      r.probe_max_in_flight, r.probe_max_per_period, quota, r.probe_overshoot);
}

namespace {

// Every call on one victim, in send order: "A agent send recv verdict reason
// source" for Admits (source: local, coordinator, probe) and "F agent send
// recv - reason -" for failure reports (ms after open_lo).
void WriteDetail(std::FILE* f, const VictimResult& v,
                 const std::vector<AdmitRecord>& admits,
                 const std::vector<FailureRecord>& failures) {
  const auto ms = [&v](int64_t ns) {
    return static_cast<double>(ns - v.open_lo) / 1e6;
  };
  std::vector<std::pair<int64_t, std::string>> lines;
  for (const AdmitRecord& x : admits) {
    if (x.victim != v.victim) continue;
    const char* src = x.admission == engine::kLocalAdmission ? "local"
                      : (x.admission & engine::kProbeAdmissionBit) != 0
                          ? "probe"
                          : "coordinator";
    lines.emplace_back(
        x.send_ns, absl::StrFormat("  A %d %.2f %.2f %s %s %s\n", x.agent,
                                   ms(x.send_ns), ms(x.recv_ns),
                                   v1::Verdict_Name(x.verdict),
                                   v1::Reason_Name(x.reason), src));
  }
  for (const FailureRecord& x : failures) {
    if (x.victim != v.victim) continue;
    lines.emplace_back(x.send_ns,
                       absl::StrFormat("  F %d %.2f %.2f - %s -\n", x.agent,
                                       ms(x.send_ns), ms(x.recv_ns),
                                       v1::Reason_Name(x.reason)));
  }
  std::sort(lines.begin(), lines.end());
  for (const auto& [t, line] : lines) std::fputs(line.c_str(), f);
}

}  // namespace

bool WriteVictimLog(const std::string& path, const VictimSchedule& s,
                    const VictimStats& r, const std::vector<AdmitRecord>& a,
                    const std::vector<FailureRecord>& failures) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  const auto ms = [](int64_t ns) { return static_cast<double>(ns) / 1e6; };
  std::fprintf(f, "# victim open_lo open_hi open_call_ms stop_ms "
                  "local_after_open answering | agent:send:recv of each local "
                  "answer after open_lo (ms after it); victims with a local "
                  "answer after open_hi: every call\n");
  for (const VictimResult& v : r.per_victim) {
    const int64_t down = s.DownFrom(v.victim);
    std::fprintf(f, "%d %.2f %.2f %.2f %.2f %lld %d |", v.victim,
                 ms(v.open_lo - down), ms(v.open_hi - down),
                 ms(v.open_call_ns), ms(v.last_local - v.open_lo),
                 static_cast<long long>(v.local_after_open), v.answering);
    for (const AdmitRecord& x : a) {
      if (x.victim == v.victim && x.verdict == v1::PROCEED &&
          x.admission == engine::kLocalAdmission && x.recv_ns > v.open_lo &&
          x.send_ns < s.UpFrom(v.victim)) {
        std::fprintf(f, " %d:%.2f:%.2f", x.agent, ms(x.send_ns - v.open_lo),
                     ms(x.recv_ns - v.open_lo));
      }
    }
    std::fprintf(f, "\n");
    if (v.local_after_open > 0) WriteDetail(f, v, a, failures);
  }
  return std::fclose(f) == 0;
}

}  // namespace stagger::bench
