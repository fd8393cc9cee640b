#include "bench/agent/victim_analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "core/engine/decision.h"
#include "stagger/v1/coordinator.pb.h"

namespace stagger::bench {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

bool LocalProceed(const AdmitRecord& a) {
  return a.verdict == v1::PROCEED && a.admission == engine::kLocalAdmission;
}

// The records of one victim, by kind.
struct VictimRecords {
  std::vector<const AdmitRecord*> admits;
  std::vector<const FailureRecord*> failures;
};

std::vector<VictimRecords> ByVictim(const VictimSchedule& s,
                                    const std::vector<AdmitRecord>& admits,
                                    const std::vector<FailureRecord>& failures) {
  std::vector<VictimRecords> out(static_cast<size_t>(s.count));
  for (const AdmitRecord& a : admits) {
    if (a.victim >= 0 && a.victim < s.count) out[a.victim].admits.push_back(&a);
  }
  for (const FailureRecord& f : failures) {
    if (f.victim >= 0 && f.victim < s.count) {
      out[f.victim].failures.push_back(&f);
    }
  }
  return out;
}

// One victim's result; false if it did not trip.
bool AnalyzeVictim(const VictimSchedule& s, int v, const VictimRecords& r,
                   VictimResult* out) {
  int64_t open_lo = kNever, open_hi = kNever, open_call = 0;
  for (const FailureRecord* f : r.failures) {
    if (f->reason != v1::CIRCUIT_OPEN) continue;
    if (f->send_ns < open_lo) {
      open_lo = f->send_ns;
      open_call = f->recv_ns - f->send_ns;
    }
    open_hi = std::min(open_hi, f->recv_ns);
  }
  if (open_lo == kNever) return false;
  const int64_t up = s.UpFrom(v);
  int64_t last_local = open_lo;  // no local answer after it: 0 ms
  int64_t local_after_open = 0;
  std::set<int> answering;
  for (const AdmitRecord* a : r.admits) {
    if (!LocalProceed(*a) || a->send_ns >= up) continue;
    last_local = std::max(last_local, a->recv_ns);
    if (a->send_ns > open_hi) ++local_after_open;
    if (a->recv_ns <= open_lo &&
        a->recv_ns > open_lo - VictimStats::kAnsweringWindowNs) {
      answering.insert(a->agent);
    }
  }
  *out = {v,          open_lo,          open_hi,
          open_call,  last_local,       local_after_open,
          static_cast<int>(answering.size())};
  return true;
}

// The most probes of one period in flight at once (ends sort before
// starts at the same instant: a report sent, then another probe answered).
int MaxInFlight(const std::vector<const AdmitRecord*>& probes) {
  std::vector<std::pair<int64_t, int>> events;
  for (const AdmitRecord* p : probes) {
    events.emplace_back(p->recv_ns, +1);
    events.emplace_back(p->report_ns < 0 ? kNever : p->report_ns, -1);
  }
  std::sort(events.begin(), events.end());
  int now = 0, most = 0;
  for (const auto& [t, delta] : events) {
    now += delta;
    most = std::max(most, now);
  }
  return most;
}

void AnalyzeProbes(const std::vector<AdmitRecord>& admits, int quota,
                   VictimStats* out) {
  std::map<std::pair<int, uint64_t>, std::vector<const AdmitRecord*>> periods;
  for (const AdmitRecord& a : admits) {
    if (a.verdict == v1::PROCEED && a.reason == v1::HALF_OPEN_PROBE) {
      periods[{a.victim, a.admission}].push_back(&a);
    }
  }
  out->probe_periods = static_cast<int>(periods.size());
  for (const auto& [period, probes] : periods) {
    const int most = MaxInFlight(probes);
    out->probe_max_in_flight = std::max(out->probe_max_in_flight, most);
    out->probe_max_per_period =
        std::max(out->probe_max_per_period, static_cast<int>(probes.size()));
    if (most > quota) ++out->probe_overshoot;
  }
}

}  // namespace

VictimStats AnalyzeVictims(const VictimSchedule& schedule,
                           const std::vector<AdmitRecord>& admits,
                           const std::vector<FailureRecord>& failures,
                           int half_open_probes) {
  VictimStats out;
  out.victims = schedule.count;
  const std::vector<VictimRecords> by = ByVictim(schedule, admits, failures);
  for (int v = 0; v < schedule.count; ++v) {
    VictimResult r;
    if (!AnalyzeVictim(schedule, v, by[v], &r)) continue;
    ++out.tripped;
    out.stop_ms.push_back(static_cast<double>(r.last_local - r.open_lo) /
                            1e6);
    out.open_report_ms.push_back(static_cast<double>(r.open_call_ns) / 1e6);
    out.local_after_open += r.local_after_open;
    out.mean_answering += r.answering;
    out.per_victim.push_back(r);
  }
  if (out.tripped > 0) out.mean_answering /= out.tripped;
  AnalyzeProbes(admits, half_open_probes, &out);
  return out;
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  const size_t i = static_cast<size_t>(std::max(1.0, rank)) - 1;
  return values[std::min(i, values.size() - 1)];
}

}  // namespace stagger::bench
