// stagger-push-bench: how fast staggerd pushes its not-clear set to the
// lease streams, measured on a real staggerd (bench/agent/README.md, "The
// push benchmark", has the method).
//
//   stagger-push-bench --staggerd=build/bin/staggerd [--streams=8]
//                      [--trials=200] [--mass_keys=10000]
//
// Starts its own staggerd (loopback, a config whose breaker opens on the
// first failure, probe_timeout 1 s so that leases come after its default
// 2 s ttl), opens --streams lease streams as agents do (sync_watcher.h) and
// waits until each holds a lease. Then:
//   1. trials: one key at a time leaves clear, through a real unary Report
//      of a failure (attempt 1) on a key never seen; each key's push
//      latency is, per stream, the key's arrival in a delta minus the
//      moment the Report was answered. The next trial starts once every
//      stream has the key, and --gap later.
//   2. mass entry: --mass_keys keys at once, in ReportBatch calls of 1,000
//      failures (staggerd's default limits.max_batch_size), one thread and
//      connection each, released together; latency from each batch's
//      answer; and what each stream received from the first batch's send
//      to its last mass key: messages and protobuf bytes.
// Also counted: entries pushed again for a key a stream held already (a
// change within not-clear, e.g. OPEN to HALF_OPEN, must not be pushed).
//
// Last line of stdout, machine-readable: "result key=value ..." (fields in
// the README). Exit status: 0; 1 if a key never reached a stream within
// --timeout or a call failed; 2 bad flags, or staggerd or a lease did not
// come.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/agent/push_latency.h"
#include "bench/agent/steady_now.h"
#include "bench/agent/sync_watcher.h"
#include "bench/agent/victim_analysis.h"
#include "bench/bench_keys.h"
#include "bench/child_process.h"
#include "core/cli/usage.h"
#include "core/lease/time_bounds.h"
#include "grpcpp/grpcpp.h"
#include "stagger/v1/coordinator.grpc.pb.h"

ABSL_FLAG(std::string, staggerd, "", "the staggerd binary (required)");
ABSL_FLAG(int, streams, 8, "lease streams, opened as agents open them; 1..1000");
ABSL_FLAG(int, trials, 200, "keys entering the set one at a time; 1..100000");
ABSL_FLAG(absl::Duration, gap, absl::Milliseconds(20),
          "between a trial's last arrival and the next trial's Report");
ABSL_FLAG(int, mass_keys, 10000,
          "keys entering at once after the trials; 0..100000 (0: none)");
ABSL_FLAG(absl::Duration, flush_interval, stagger::lease::kDefaultFlushInterval,
          "how often each stream sends its message up (its renewal)");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(30),
          "the most a lease, or a key's arrival on every stream, may take");

namespace stagger::bench {
namespace {

constexpr uint64_t kTrialFirstId = 7000000;  // bench key ids of the trials
constexpr uint64_t kMassFirstId = 8000000;   // ... of the mass entry
constexpr int kBatch = 1000;  // staggerd's default limits.max_batch_size

struct Options {
  std::string staggerd;
  int streams = 0, trials = 0, mass_keys = 0;
  absl::Duration gap, flush_interval, timeout;
};

std::optional<std::string> ReadFlags(Options* o) {
  o->staggerd = absl::GetFlag(FLAGS_staggerd);
  o->streams = absl::GetFlag(FLAGS_streams);
  o->trials = absl::GetFlag(FLAGS_trials);
  o->mass_keys = absl::GetFlag(FLAGS_mass_keys);
  o->gap = absl::GetFlag(FLAGS_gap);
  o->flush_interval = absl::GetFlag(FLAGS_flush_interval);
  o->timeout = absl::GetFlag(FLAGS_timeout);
  if (o->staggerd.empty()) return "--staggerd: give the staggerd binary";
  if (o->streams < 1 || o->streams > 1000) return "--streams: 1..1000";
  if (o->trials < 1 || o->trials > 100000) return "--trials: 1..100000";
  if (o->mass_keys < 0 || o->mass_keys > 100000) {
    return "--mass_keys: 0..100000";
  }
  if (o->gap < absl::ZeroDuration()) return "--gap must be >= 0";
  if (o->flush_interval <= absl::ZeroDuration() ||
      o->timeout <= absl::ZeroDuration()) {
    return "--flush_interval and --timeout must be > 0";
  }
  return std::nullopt;
}

std::string Key(uint64_t id) {
  char buf[kKeyBufferBytes];
  return std::string(FormatKey(id, buf));
}

// Polls until `done` or `timeout`; whether it is done.
template <typename Done>
bool PollFor(Done done, absl::Duration timeout) {
  const absl::Time until = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= until) return false;
    absl::SleepFor(absl::Microseconds(500));
  }
  return true;
}

std::vector<std::optional<int64_t>> Arrivals(
    const std::vector<std::unique_ptr<SyncWatcher>>& ws, const std::string& k) {
  std::vector<std::optional<int64_t>> out;
  for (const auto& w : ws) out.push_back(w->ArrivedAt(k));
  return out;
}

// Opens the streams and waits for every lease; false after a message.
bool OpenStreams(const Options& o, const std::string& target,
                 std::vector<std::unique_ptr<SyncWatcher>>* ws) {
  for (int i = 0; i < o.streams; ++i) {
    SyncWatcher::Options w;
    w.target = target;
    w.agent_id = absl::StrCat("push-bench-", i + 1);
    w.incarnation = (static_cast<uint64_t>(getpid()) << 16) + i + 1;
    w.flush_interval = o.flush_interval;
    w.channel_index = i;
    ws->push_back(std::make_unique<SyncWatcher>(w));
    if (absl::Status s = ws->back()->Start(o.timeout); !s.ok()) {
      std::fprintf(stderr, "stagger-push-bench: stream %d: %s\n", i + 1,
                   std::string(s.message()).c_str());
      return false;
    }
  }
  const bool leased = PollFor(
      [&] {
        for (const auto& w : *ws) {
          if (!w->leased()) return false;
        }
        return true;
      },
      o.timeout);
  if (leased) return true;
  for (size_t i = 0; i < ws->size(); ++i) {
    const SyncWatcher& w = *(*ws)[i];
    if (w.leased()) continue;
    std::fprintf(stderr, "stagger-push-bench: stream %zu got no lease within "
                 "%s%s%s%s\n", i + 1,
                 absl::FormatDuration(o.timeout).c_str(),
                 w.refusal().empty() ? "" : ": ", w.refusal().c_str(),
                 w.ended().empty() ? "" : (": " + w.ended()).c_str());
  }
  return false;
}

// A failure report of attempt 1 on `key`; false if the call failed.
bool ReportFailure(v1::RetryCoordinator::Stub& stub, const std::string& key,
                   int* not_tripped) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ReportRequest r;
  r.set_endpoint(key);
  r.set_attempt(1);
  r.set_outcome(v1::RETRYABLE_FAILURE);
  v1::ReportResponse resp;
  if (!stub.Report(&ctx, r, &resp).ok()) return false;
  if (resp.decision().reason() != v1::CIRCUIT_OPEN) ++*not_tripped;
  return true;
}

struct Result {
  PushLatencies trials, mass;
  int not_tripped = 0;
  int call_errors = 0;
  double mass_report_ms = 0;
  double bytes_mean = 0, bytes_max = 0, messages_mean = 0;
};

void RunTrials(const Options& o, v1::RetryCoordinator::Stub& stub,
               const std::vector<std::unique_ptr<SyncWatcher>>& ws,
               Result* r) {
  for (int i = 0; i < o.trials; ++i) {
    const std::string key = Key(kTrialFirstId + static_cast<uint64_t>(i));
    if (!ReportFailure(stub, key, &r->not_tripped)) {
      ++r->call_errors;
      continue;
    }
    const int64_t answered = NowNs();
    PollFor(
        [&] {
          for (const auto& w : ws) {
            if (!w->ArrivedAt(key).has_value()) return false;
          }
          return true;
        },
        o.timeout);
    r->trials.Add(answered, Arrivals(ws, key));
    absl::SleepFor(o.gap);
  }
}

// One ReportBatch of failures on `keys`; its answer time (steady ns), or
// -1 if it failed.
int64_t ReportBatch(const std::string& target, int channel_index,
                    const std::vector<std::string>& keys,
                    const absl::Notification& go) {
  grpc::ChannelArguments args;
  args.SetInt("stagger.push_bench.channel", channel_index);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);
  auto stub = v1::RetryCoordinator::NewStub(channel);
  v1::ReportBatchRequest req;
  for (const std::string& k : keys) {
    v1::ReportRequest* r = req.add_items();
    r->set_endpoint(k);
    r->set_attempt(1);
    r->set_outcome(v1::RETRYABLE_FAILURE);
  }
  // Connected before the start, so the batches go together.
  channel->WaitForConnected(std::chrono::system_clock::now() +
                            std::chrono::seconds(10));
  go.WaitForNotification();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ReportBatchResponse resp;
  return stub->ReportBatch(&ctx, req, &resp).ok() ? NowNs() : -1;
}

// What each stream received from `start` to its last key of `keys`.
void MassTraffic(const std::vector<std::unique_ptr<SyncWatcher>>& ws,
                 const std::vector<std::string>& keys, int64_t start,
                 Result* r) {
  for (const auto& w : ws) {
    int64_t last = start;
    for (const std::string& k : keys) {
      if (std::optional<int64_t> at = w->ArrivedAt(k)) {
        last = std::max(last, *at);
      }
    }
    const Traffic t = TrafficBetween(w->messages(), start, last);
    r->bytes_mean += static_cast<double>(t.bytes) / ws.size();
    r->messages_mean += static_cast<double>(t.messages) / ws.size();
    r->bytes_max = std::max(r->bytes_max, static_cast<double>(t.bytes));
  }
}

void RunMass(const Options& o, const std::string& target,
             const std::vector<std::unique_ptr<SyncWatcher>>& ws, Result* r) {
  std::vector<std::vector<std::string>> batches;
  std::vector<std::string> all;
  for (int i = 0; i < o.mass_keys; ++i) {
    if (i % kBatch == 0) batches.emplace_back();
    batches.back().push_back(Key(kMassFirstId + static_cast<uint64_t>(i)));
    all.push_back(batches.back().back());
  }
  std::vector<int64_t> answered(batches.size(), -1);
  absl::Notification go;
  std::vector<std::thread> threads;
  for (size_t b = 0; b < batches.size(); ++b) {
    threads.emplace_back([&, b] {
      answered[b] = ReportBatch(target, static_cast<int>(b) + 1000, batches[b],
                                go);
    });
  }
  absl::SleepFor(absl::Milliseconds(200));  // the connections
  const int64_t start = NowNs();
  go.Notify();
  for (std::thread& t : threads) t.join();
  int64_t last_answer = start;
  for (int64_t a : answered) last_answer = std::max(last_answer, a);
  r->mass_report_ms = static_cast<double>(last_answer - start) / 1e6;
  PollFor(
      [&] {
        for (const auto& w : ws) {
          if (w->CountArrived(all) < all.size()) return false;
        }
        return true;
      },
      o.timeout);
  for (size_t b = 0; b < batches.size(); ++b) {
    if (answered[b] < 0) {
      ++r->call_errors;
      continue;
    }
    for (const std::string& k : batches[b]) {
      r->mass.Add(answered[b], Arrivals(ws, k));
    }
  }
  MassTraffic(ws, all, start, r);
}

std::string ResultLine(const Options& o, const Result& r, int64_t readded) {
  const auto q = [](const PushLatencies& l, double x) {
    return Quantile(l.ms, x);
  };
  std::string line = absl::StrFormat(
      "result streams=%d trials=%d push_p50_ms=%.2f push_p99_ms=%.2f "
      "push_max_ms=%.2f push_before_answer=%d push_missing=%d not_tripped=%d",
      o.streams, o.trials, q(r.trials, 0.5), q(r.trials, 0.99),
      q(r.trials, 1.0), r.trials.before_answer, r.trials.missing,
      r.not_tripped);
  absl::StrAppendFormat(
      &line,
      " mass_keys=%d mass_report_ms=%.1f mass_push_p50_ms=%.2f "
      "mass_push_p99_ms=%.2f mass_push_max_ms=%.2f mass_push_missing=%d "
      "mass_bytes_per_stream=%.0f mass_bytes_per_stream_max=%.0f "
      "mass_messages_per_stream=%.1f mass_bytes_per_key=%.1f readded=%d "
      "call_errors=%d",
      o.mass_keys, r.mass_report_ms, q(r.mass, 0.5), q(r.mass, 0.99),
      q(r.mass, 1.0), r.mass.missing, r.bytes_mean, r.bytes_max,
      r.messages_mean,
      o.mass_keys > 0 ? r.bytes_mean / o.mass_keys : 0.0, readded,
      r.call_errors);
  return line;
}

// Starts staggerd on a config of its own; its address, or "" after a
// message.
std::string StartStaggerd(const Options& o, const std::string& dir,
                          ChildProcess* sd) {
  const std::string config = dir + "/push.textproto";
  std::ofstream(config) << "default_policy { breaker { consecutive_failures: 1 "
                           "probe_timeout { seconds: 1 } } }\n";
  *sd = ChildProcess::Spawn({o.staggerd, "--address=127.0.0.1:0",
                             "--metrics_address=", "--config=" + config});
  const std::string port =
      MatchFirst(sd->line, "listening on 127\\.0\\.0\\.1:(\\d+)");
  if (port.empty()) {
    std::fprintf(stderr, "stagger-push-bench: %s did not start\n",
                 o.staggerd.c_str());
    return "";
  }
  return "127.0.0.1:" + port;
}

int Main() {
  Options o;
  if (std::optional<std::string> err = ReadFlags(&o)) {
    std::fprintf(stderr, "stagger-push-bench: %s\n", err->c_str());
    return 2;
  }
  char dir_template[] = "/tmp/stagger-push-bench.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return 2;
  ChildProcess sd;
  const std::string target = StartStaggerd(o, dir, &sd);
  int status = 2;
  if (!target.empty()) {
    std::vector<std::unique_ptr<SyncWatcher>> ws;
    if (OpenStreams(o, target, &ws)) {
      auto stub = v1::RetryCoordinator::NewStub(
          grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
      Result r;
      RunTrials(o, *stub, ws, &r);
      if (o.mass_keys > 0) RunMass(o, target, ws, &r);
      int64_t readded = 0;
      for (const auto& w : ws) readded += w->readded();
      std::printf("%s\n", ResultLine(o, r, readded).c_str());
      std::fflush(stdout);
      const bool all_in = r.trials.missing == 0 && r.mass.missing == 0;
      status = all_in && r.call_errors == 0 ? 0 : 1;
    }
    for (auto& w : ws) w->Stop();
  }
  if (sd.pid > 0) {
    kill(sd.pid, SIGTERM);
    waitpid(sd.pid, nullptr, 0);
  }
  std::remove((std::string(dir) + "/push.textproto").c_str());
  rmdir(dir);
  return status;
}

}  // namespace
}  // namespace stagger::bench

int main(int argc, char** argv) {
  // --help lists this program's flags (bench/agent/: of its files, only
  // push_bench.cc defines flags).
  stagger::cli::InstallUsage(
      "Times staggerd's pushes of its not-clear set to lease streams: one "
      "key at a time, then a mass entry; see bench/agent/README.md.\n"
      "  stagger-push-bench --staggerd=build/bin/staggerd",
      "bench/agent");
  absl::ParseCommandLine(argc, argv);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return stagger::bench::Main();
}
