// stagger-agent-load: paced deliveries through stagger-agents (or straight
// to staggerd), measured as bench/run's agent lines need them
// (bench/agent/README.md has the method and every output field).
//
// --threads workers (delivery_worker.h), each with its own connection to
// one of --targets (worker i to target i mod N), share --rate deliveries/s
// (0: closed loop, as fast as they go), on background keys chosen
// uniformly or by Zipf (--keys; key_choice.h), a --fail_share of them
// failing once and retried. Deliveries run for --warmup, then --duration is
// measured. With --coordinator_metrics (and --coordinator_pid), staggerd is
// sampled as the measured window opens and again once the last delivery
// ended: its calls and CPU per delivery.
// With --victims, victim endpoints (victim_schedule.h) fail in turn during
// the measured window, and the victim analysis (victim_analysis.h) runs.
//
// Last line of stdout, machine-readable: "result key=value ...".
// Exit status: 0 ok; 1 RPC errors, no delivery, or (--victims) no victim
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
#include "bench/agent/run_report.h"
#include "bench/agent/victim_analysis.h"
#include "core/cli/usage.h"

ABSL_FLAG(std::string, targets, "",
          "comma-separated targets (unix:/path of agents, or host:port of "
          "staggerd); worker i uses target i mod N");
ABSL_FLAG(int, threads, 32, "worker threads, one connection each; 1..4096");
ABSL_FLAG(double, rate, 0,
          "offered deliveries per second over all workers; 0: closed loop");
ABSL_FLAG(int64_t, endpoints, 1000, "background endpoint keys, >= 1");
ABSL_FLAG(std::string, keys, "uniform",
          "how background keys are chosen: uniform (each target's workers "
          "cycle over every key) or zipf (drawn, Zipf(--zipf_exponent))");
ABSL_FLAG(double, zipf_exponent, 1.0, "--keys=zipf: the exponent, [0, 10]");
ABSL_FLAG(uint64_t, seed, 1,
          "seeds each worker's draws of keys and failing attempts");
ABSL_FLAG(double, fail_share, 0,
          "share of background first attempts that fail and are retried "
          "once, [0, 1]");
ABSL_FLAG(absl::Duration, max_retry_wait, absl::Seconds(1),
          "--fail_share: a retry waits what its failure report's answer "
          "says, at most this; >= 0");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(3), "unmeasured time first");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "measured time");
ABSL_FLAG(absl::Duration, call_timeout, absl::Seconds(5), "deadline per call");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(20),
          "how long each worker's connection may take");
ABSL_FLAG(std::string, coordinator_metrics, "",
          "staggerd's metrics address host:port; empty: not sampled");
ABSL_FLAG(int, coordinator_pid, 0, "staggerd's pid, for its CPU time; 0: none");
ABSL_FLAG(std::string, agent_pids, "",
          "comma-separated pids of the agents, for their CPU time");
ABSL_FLAG(bool, victims, false, "drive failing victim endpoints (see above)");
ABSL_FLAG(absl::Duration, victim_warm, absl::Milliseconds(400),
          "--victims: a victim's healthy phase");
ABSL_FLAG(absl::Duration, victim_down, absl::Milliseconds(800),
          "--victims: its down phase (every attempt fails)");
ABSL_FLAG(absl::Duration, victim_up, absl::Milliseconds(800),
          "--victims: its recovered phase (probes close the breaker)");
ABSL_FLAG(absl::Duration, victim_spacing, absl::Milliseconds(250),
          "--victims: between the starts of consecutive victims");
ABSL_FLAG(double, victim_share, 0.5,
          "--victims: share of deliveries on the victims driven now, [0, 1]");
ABSL_FLAG(std::string, victim_log, "",
          "--victims: write each tripped victim's result, and the local "
          "answers on it after open_lo, to this file");
ABSL_FLAG(int, half_open_probes, 5,
          "--victims: staggerd's breaker.half_open_probes (the quota checked)");

namespace stagger::bench {
namespace {

struct Options {
  std::vector<std::string> targets;
  int threads = 1;
  double rate = 0;
  int64_t endpoints = 1;
  bool zipf = false;
  double zipf_exponent = 1;
  uint64_t seed = 1;
  double fail_share = 0;
  absl::Duration max_retry_wait;
  absl::Duration warmup, duration, call_timeout, connect_timeout;
  std::string metrics;
  int pid = 0;
  std::vector<int> agent_pids;
  bool victims_on = false;
  VictimSchedule victims;  // durations only; start and count set at run
  double victim_share = 0;
  int half_open_probes = 1;
  std::string victim_log;
};

std::optional<std::string> ReadVictimFlags(Options* o) {
  o->victims_on = absl::GetFlag(FLAGS_victims);
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

std::optional<std::string> ReadKeyFlags(Options* o) {
  const std::string keys = absl::GetFlag(FLAGS_keys);
  if (keys != "uniform" && keys != "zipf") {
    return absl::StrCat("--keys: \"", keys, "\" is neither uniform nor zipf");
  }
  o->zipf = keys == "zipf";
  o->zipf_exponent = absl::GetFlag(FLAGS_zipf_exponent);
  o->seed = absl::GetFlag(FLAGS_seed);
  o->fail_share = absl::GetFlag(FLAGS_fail_share);
  o->max_retry_wait = absl::GetFlag(FLAGS_max_retry_wait);
  if (o->max_retry_wait < absl::ZeroDuration()) {
    return "--max_retry_wait must be >= 0";
  }
  if (!(o->zipf_exponent >= 0 && o->zipf_exponent <= 10)) {
    return "--zipf_exponent must be in [0, 10]";
  }
  if (!(o->fail_share >= 0 && o->fail_share <= 1)) {
    return "--fail_share must be in [0, 1]";
  }
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
  if (std::optional<std::string> err = ReadKeyFlags(o)) return err;
  return ReadVictimFlags(o);
}

double DriverCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}


std::vector<std::unique_ptr<DeliveryWorker>> MakeWorkers(
    const Options& o, const DriveClock* clock, const VictimSchedule* victims,
    const ZipfTable* zipf) {
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
    w.zipf = zipf;
    w.seed = o.seed;
    w.fail_share = o.fail_share;
    w.max_retry_wait_ns = absl::ToInt64Nanoseconds(o.max_retry_wait);
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

// Runs the workers; samples the coordinator (and the CPU times) when the
// measured window opens and once every worker is done. False (after a
// message) if a sample failed.
bool Drive(const Options& o, int64_t warm_end,
           std::vector<std::unique_ptr<DeliveryWorker>>& workers, Window* w) {
  std::vector<std::thread> threads;
  for (auto& worker : workers) {
    threads.emplace_back([&worker] { worker->Run(); });
  }
  absl::SleepFor(absl::Nanoseconds(warm_end - NowNs()));
  std::string failed;
  const auto sample = [&](std::optional<CoordinatorSample>* out) {
    if (o.metrics.empty()) return;
    absl::StatusOr<CoordinatorSample> s = SampleCoordinator(o.metrics, o.pid);
    if (s.ok()) *out = *s;
    if (!s.ok() && failed.empty()) failed = std::string(s.status().message());
  };
  const absl::StatusOr<double> agents0 = CpuOf(o.agent_pids);
  const double driver0 = DriverCpuSeconds();
  const int64_t from = NowNs();
  sample(&w->before);
  for (std::thread& t : threads) t.join();
  sample(&w->after);
  w->sample_seconds = static_cast<double>(NowNs() - from) / 1e9;
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

RunShape ShapeOf(const Options& o) {
  RunShape shape;
  shape.targets = static_cast<int>(o.targets.size());
  shape.threads = o.threads;
  shape.rate = o.rate;
  shape.seconds = absl::ToDoubleSeconds(o.duration);
  shape.endpoints = o.endpoints;
  shape.keys = o.zipf ? "zipf" : "uniform";
  shape.zipf_exponent = o.zipf ? o.zipf_exponent : 0;
  shape.seed = o.seed;
  shape.fail_share = o.fail_share;
  return shape;
}

int Main() {
  Options o;
  if (std::optional<std::string> err = ReadFlags(&o)) {
    std::fprintf(stderr, "stagger-agent-load: %s\n", err->c_str());
    return 2;
  }
  DriveClock clock;
  VictimSchedule victims = o.victims;
  std::optional<ZipfTable> zipf;
  if (o.zipf) zipf.emplace(o.endpoints, o.zipf_exponent);
  auto workers = MakeWorkers(o, &clock, o.victims_on ? &victims : nullptr,
                             zipf ? &*zipf : nullptr);
  if (!ConnectAll(o, workers)) return 2;
  const int64_t window = absl::ToInt64Nanoseconds(o.duration);
  const int64_t warm_end = NowNs() + absl::ToInt64Nanoseconds(o.warmup);
  clock.measure_from_ns.store(warm_end);
  clock.end_ns.store(warm_end + window);
  victims.start_ns = warm_end;
  victims.count = o.victims_on ? VictimSchedule::CountFor(
                                 window, victims.warm_ns + victims.down_ns +
                                             victims.up_ns,
                                 victims.spacing_ns)
                           : 0;
  Window w;
  const bool sampled = Drive(o, warm_end, workers, &w);
  WorkerStats all;
  for (auto& worker : workers) all.Merge(worker->stats());
  w.warmup_seconds = absl::ToDoubleSeconds(o.warmup);
  w.agents = static_cast<int>(o.agent_pids.size());
  std::string line = absl::StrCat("result ", LoadFields(ShapeOf(o), all, w),
                                  CoordinatorFields(all, w));
  std::optional<VictimStats> r;
  if (o.victims_on) {
    r = AnalyzeVictims(victims, all.admits, all.failures, o.half_open_probes);
    absl::StrAppend(&line, VictimFields(*r, o.half_open_probes));
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
