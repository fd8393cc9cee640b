// stagger-agent-load: paced deliveries through stagger-agents (or straight
// to staggerd), measured as bench/run's agent lines need them
// (bench/agent/README.md has the method and every output field).
//
// --threads workers (delivery_worker.h), each with its own connection to
// one of --targets (worker i to target i mod N), share --rate deliveries/s
// (0: closed loop, as fast as they go). Deliveries run for --warmup (with
// --warmup_covers, until every worker has also delivered to each of its keys
// once since then), then --duration is measured. With --coordinator_metrics
// (and
// --coordinator_pid), staggerd is sampled as the measured window opens and
// again once the last delivery ended: its calls and CPU per delivery.
// With --revoke, victim endpoints (victim_schedule.h) fail in turn during
// the measured window, and the revoke analysis (revoke_analysis.h) runs.
//
// Last line of stdout, machine-readable: "result key=value ...".
// Exit status: 0 ok; 1 RPC errors, no delivery, or (--revoke) no victim
// tripped; 2 bad flags, a target not reachable, or a sample failed.
#include <sys/resource.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/agent/coordinator_sample.h"
#include "bench/agent/delivery_worker.h"
#include "bench/agent/revoke_analysis.h"
#include "bench/agent/run_report.h"
#include "core/cli/usage.h"

ABSL_FLAG(std::string, targets, "",
          "comma-separated targets (unix:/path of agents, or host:port of "
          "staggerd); worker i uses target i mod N");
ABSL_FLAG(int, threads, 32, "worker threads, one connection each; 1..4096");
ABSL_FLAG(double, rate, 0,
          "offered deliveries per second over all workers; 0: closed loop");
ABSL_FLAG(int64_t, endpoints, 1000, "background endpoint keys, >= 1");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(3), "unmeasured time first");
ABSL_FLAG(bool, warmup_covers, false,
          "the warm-up also lasts until every worker has delivered to each "
          "of its keys once after --warmup (at most 60 s more)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "measured time");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(5), "deadline per call");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(20),
          "how long each worker's connection may take");
ABSL_FLAG(std::string, coordinator_metrics, "",
          "staggerd's metrics address host:port; empty: not sampled");
ABSL_FLAG(int, coordinator_pid, 0, "staggerd's pid, for its CPU time; 0: none");
ABSL_FLAG(std::string, agent_pids, "",
          "comma-separated pids of the agents, for their CPU time");
ABSL_FLAG(bool, revoke, false, "drive failing victim endpoints (see above)");
ABSL_FLAG(absl::Duration, victim_warm, absl::Milliseconds(400),
          "--revoke: a victim's healthy phase");
ABSL_FLAG(absl::Duration, victim_down, absl::Milliseconds(800),
          "--revoke: its down phase (every attempt fails)");
ABSL_FLAG(absl::Duration, victim_up, absl::Milliseconds(800),
          "--revoke: its recovered phase (probes close the breaker)");
ABSL_FLAG(absl::Duration, victim_spacing, absl::Milliseconds(250),
          "--revoke: between the starts of consecutive victims");
ABSL_FLAG(double, victim_share, 0.5,
          "--revoke: share of deliveries on the victims driven now, [0, 1]");
ABSL_FLAG(std::string, victim_log, "",
          "--revoke: write each tripped victim's result, and the local "
          "answers on it after open_lo, to this file");
ABSL_FLAG(int, half_open_probes, 5,
          "--revoke: staggerd's breaker.half_open_probes (the quota checked)");

namespace stagger::bench {
namespace {

struct Options {
  std::vector<std::string> targets;
  int threads = 1;
  double rate = 0;
  int64_t endpoints = 1;
  absl::Duration warmup, duration, call_timeout, connect_timeout;
  bool warmup_covers = false;
  std::string metrics;
  int pid = 0;
  std::vector<int> agent_pids;
  bool revoke = false;
  VictimSchedule victims;  // durations only; start and count set at run
  double victim_share = 0;
  int half_open_probes = 1;
  std::string victim_log;
};

std::optional<std::string> ReadVictimFlags(Options* o) {
  o->revoke = absl::GetFlag(FLAGS_revoke);
  o->victims.warm_ns = absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_victim_warm));
  o->victims.down_ns = absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_victim_down));
  o->victims.up_ns = absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_victim_up));
  o->victims.spacing_ns =
      absl::ToInt64Nanoseconds(absl::GetFlag(FLAGS_victim_spacing));
  o->victim_share = absl::GetFlag(FLAGS_victim_share);
  o->half_open_probes = absl::GetFlag(FLAGS_half_open_probes);
  o->victim_log = absl::GetFlag(FLAGS_victim_log);
  if (o->victims.warm_ns <= 0 || o->victims.down_ns <= 0 ||
      o->victims.up_ns <= 0 || o->victims.spacing_ns <= 0) {
    return "--victim_warm, --victim_down, --victim_up and --victim_spacing "
           "must be > 0";
  }
  if (!(o->victim_share >= 0 && o->victim_share <= 1)) {
    return "--victim_share must be in [0, 1]";
  }
  if (o->half_open_probes < 1) return "--half_open_probes must be >= 1";
  return std::nullopt;
}

std::optional<std::string> ReadFlags(Options* o) {
  for (absl::string_view t :
       absl::StrSplit(absl::GetFlag(FLAGS_targets), ',', absl::SkipEmpty())) {
    o->targets.emplace_back(t);
  }
  if (o->targets.empty()) return "--targets: give at least one target";
  o->threads = absl::GetFlag(FLAGS_threads);
  o->rate = absl::GetFlag(FLAGS_rate);
  o->endpoints = absl::GetFlag(FLAGS_endpoints);
  o->warmup = absl::GetFlag(FLAGS_warmup);
  o->warmup_covers = absl::GetFlag(FLAGS_warmup_covers);
  o->duration = absl::GetFlag(FLAGS_duration);
  o->call_timeout = absl::GetFlag(FLAGS_call_timeout);
  o->connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  o->metrics = absl::GetFlag(FLAGS_coordinator_metrics);
  o->pid = absl::GetFlag(FLAGS_coordinator_pid);
  for (absl::string_view p : absl::StrSplit(absl::GetFlag(FLAGS_agent_pids),
                                            ',', absl::SkipEmpty())) {
    int pid = 0;
    if (!absl::SimpleAtoi(p, &pid) || pid <= 0) {
      return absl::StrCat("--agent_pids: \"", p, "\" is not a pid");
    }
    o->agent_pids.push_back(pid);
  }
  if (o->threads < 1 || o->threads > 4096) return "--threads: 1..4096";
  if (!(o->rate >= 0)) return "--rate must be >= 0";
  if (o->endpoints < 1) return "--endpoints must be >= 1";
  if (o->duration <= absl::ZeroDuration() || o->warmup < absl::ZeroDuration()) {
    return "--duration must be > 0 and --warmup >= 0";
  }
  if (o->pid != 0 && o->metrics.empty()) {
    return "--coordinator_pid needs --coordinator_metrics";
  }
  if (o->warmup_covers && absl::GetFlag(FLAGS_revoke)) {
    return "--warmup_covers and --revoke: the victims' schedule starts at a "
           "fixed time; use --warmup alone with --revoke";
  }
  return ReadVictimFlags(o);
}

double DriverCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}


std::vector<std::unique_ptr<DeliveryWorker>> MakeWorkers(
    const Options& o, const DriveClock* clock, const VictimSchedule* victims) {
  std::vector<std::unique_ptr<DeliveryWorker>> workers;
  const int n = static_cast<int>(o.targets.size());
  for (int i = 0; i < o.threads; ++i) {
    WorkerOptions w;
    w.target = o.targets[i % n];
    w.target_index = i % n;
    w.channel_index = i;
    w.rate = o.rate / o.threads;
    w.endpoints = o.endpoints;
    // The workers of one target together cycle over every key.
    const int64_t per_target = (o.threads - 1 - i % n) / n + 1;
    w.first_key = (i / n) % o.endpoints;
    w.key_stride = per_target;
    w.victim_share = o.victim_share;
    w.victims = victims;
    w.call_timeout = o.call_timeout;
    workers.push_back(std::make_unique<DeliveryWorker>(w, clock));
  }
  return workers;
}
// Connects every worker; false (after a message) if one cannot.
bool ConnectAll(const Options& o,
                std::vector<std::unique_ptr<DeliveryWorker>>& workers) {
  for (size_t i = 0; i < workers.size(); ++i) {
    if (!workers[i]->Connect(o.connect_timeout)) {
      std::fprintf(stderr, "stagger-agent-load: cannot connect to %s within %s\n",
                   o.targets[i % o.targets.size()].c_str(),
                   absl::FormatDuration(o.connect_timeout).c_str());
      return false;
    }
  }
  return true;
}

// Waits out the warm-up, which ends at `warm_end` or, with
// --warmup_covers, once every worker has covered its keys since then (at
// most kMaxCover later); then opens the measured window.
void EndWarmup(const Options& o, int64_t warm_end, DriveClock& clock,
               const std::vector<std::unique_ptr<DeliveryWorker>>& workers) {
  constexpr int64_t kMaxCover = int64_t{60} * 1000 * 1000 * 1000;
  absl::SleepFor(absl::Nanoseconds(warm_end - NowNs()));
  if (!o.warmup_covers) return;  // the window was set before the start
  const auto covered = [&] {
    for (const auto& w : workers) {
      if (!w->covered_since(warm_end)) return false;
    }
    return true;
  };
  while (!covered() && NowNs() < warm_end + kMaxCover) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const int64_t from = NowNs();
  clock.end_ns.store(from + absl::ToInt64Nanoseconds(o.duration));
  clock.measure_from_ns.store(from);
}

// Runs the workers; samples the coordinator (and the CPU times) when the
// measured window opens and once every worker is done. False (after a
// message) if a sample failed.
bool Drive(const Options& o, int64_t warm_end, DriveClock& clock,
           std::vector<std::unique_ptr<DeliveryWorker>>& workers, Window* w) {
  std::vector<std::thread> threads;
  for (auto& worker : workers) {
    threads.emplace_back([&worker] { worker->Run(); });
  }
  EndWarmup(o, warm_end, clock, workers);
  std::string failed;
  const auto sample = [&](std::optional<CoordinatorSample>* out) {
    if (o.metrics.empty()) return;
    absl::StatusOr<CoordinatorSample> s = SampleCoordinator(o.metrics, o.pid);
    if (s.ok()) *out = *s;
    if (!s.ok() && failed.empty()) failed = std::string(s.status().message());
  };
  const absl::StatusOr<double> agents0 = CpuOf(o.agent_pids);
  const double driver0 = DriverCpuSeconds();
  sample(&w->before);
  for (std::thread& t : threads) t.join();
  sample(&w->after);
  const absl::StatusOr<double> agents1 = CpuOf(o.agent_pids);
  w->driver_cpu = DriverCpuSeconds() - driver0;
  if (agents0.ok() && agents1.ok()) w->agent_cpu = *agents1 - *agents0;
  if (failed.empty() && !agents1.ok()) {
    failed = std::string(agents1.status().message());
  }
  if (!failed.empty()) {
    std::fprintf(stderr, "stagger-agent-load: sample failed: %s\n",
                 failed.c_str());
  }
  return failed.empty();
}

int Main() {
  Options o;
  if (std::optional<std::string> err = ReadFlags(&o)) {
    std::fprintf(stderr, "stagger-agent-load: %s\n", err->c_str());
    return 2;
  }
  DriveClock clock;
  VictimSchedule victims = o.victims;
  auto workers = MakeWorkers(o, &clock, o.revoke ? &victims : nullptr);
  if (!ConnectAll(o, workers)) return 2;
  const int64_t window = absl::ToInt64Nanoseconds(o.duration);
  const int64_t warm_end = NowNs() + absl::ToInt64Nanoseconds(o.warmup);
  if (!o.warmup_covers) {
    clock.measure_from_ns.store(warm_end);
    clock.end_ns.store(warm_end + window);
  }
  victims.start_ns = warm_end;
  victims.count = o.revoke ? VictimSchedule::CountFor(
                                 window, victims.warm_ns + victims.down_ns +
                                             victims.up_ns,
                                 victims.spacing_ns)
                           : 0;
  Window w;
  const bool sampled = Drive(o, warm_end, clock, workers, &w);
  WorkerStats all;
  for (auto& worker : workers) all.Merge(worker->stats());
  w.warmup_seconds =
      static_cast<double>(clock.measure_from() - warm_end) / 1e9 +
      absl::ToDoubleSeconds(o.warmup);
  const RunShape shape{static_cast<int>(o.targets.size()), o.threads, o.rate,
                       absl::ToDoubleSeconds(o.duration)};
  std::string line = absl::StrCat("result ", LoadFields(shape, all, w),
                                  CoordinatorFields(all, w));
  std::optional<RevokeStats> r;
  if (o.revoke) {
    r = AnalyzeRevokes(victims, all.admits, all.failures, o.half_open_probes);
    absl::StrAppend(&line, RevokeFields(*r, o.half_open_probes));
    if (!o.victim_log.empty() &&
        !WriteVictimLog(o.victim_log, victims, *r, all.admits,
                        all.failures)) {
      std::fprintf(stderr, "stagger-agent-load: cannot write --victim_log %s\n",
                   o.victim_log.c_str());
      return 2;
    }
  }
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  if (all.errors > 0) {
    std::fprintf(stderr, "stagger-agent-load: %lld RPC errors; first: %s\n",
                 static_cast<long long>(all.errors), all.first_error.c_str());
  }
  if (!sampled) return 2;
  if (all.errors > 0 || all.delivered == 0 || (r && r->tripped == 0)) return 1;
  return 0;
}

}  // namespace
}  // namespace stagger::bench

int main(int argc, char** argv) {
  // --help lists this program's flags (bench/agent/).
  stagger::cli::InstallUsage(
      "Paced deliveries through stagger-agents or to staggerd; see "
      "bench/agent/README.md.",
      "bench/agent");
  absl::ParseCommandLine(argc, argv);
  // The driver is the instrument: no deadlock detection on gRPC's locks.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return stagger::bench::Main();
}
