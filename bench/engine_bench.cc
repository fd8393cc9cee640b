// stagger-engine-bench: the cost of one engine decision (Google Benchmark).
//
// Decisions measured, each on a known endpoint (already tracked) and on a new
// one (first sight: the table inserts it), with 1 and 2 threads, in a table
// of 1 and of 1,000,000 tracked endpoints:
//   Admit         Admit(attempt 1): budget count + initial-jitter draw.
//   Report        Report(RETRYABLE_FAILURE, attempt 2): breaker count, budget
//                 check, decorrelated-jitter draw, deadline check.
//   ReportRA      Report(RATE_LIMITED, attempt 2, Retry-After 2 s): the
//                 fleet-wide Retry-After window is recorded and wins.
// "1 endpoint" with 2 threads is one hot endpoint both threads share (one
// shard lock); at 1,000,000 the threads spread over all shards, which is
// where the 2-thread scaling target applies.
//
// Time is per decision: the Time column with UseRealTime() is wall time per
// iteration of one thread; items_per_second sums the threads (decisions/s,
// whole process). Keys look like real ones
// ("https://hooks.tenant-123456.example.com/webhooks/v1") and are formatted
// per call into a stack buffer (BM_KeyFormat measures that overhead alone).
// The clock is RealClock and the randomness PerThreadRandom, as in staggerd.
//
// Bench policy: the default policy, except that the breaker never trips on
// its own (consecutive_failures 1e6, min_throughput 1e9: it still counts
// every failure) and every 65536th failure report on a thread is a success,
// so a repeated failure report keeps taking the full backoff path instead
// of the (cheaper) deferral of an open breaker. max_endpoints is raised so
// the new-endpoint runs never hit the table limit.
//
// Not a test: nothing here asserts a time. bench/run reads the output.
#include <atomic>
#include <cstdint>
#include <memory>
#include <cstdio>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/bench_keys.h"
#include "benchmark/benchmark.h"
#include "core/engine/clock.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"

namespace stagger::bench {
namespace {

using engine::AdmitInput;
using engine::Engine;
using engine::EngineConfig;
using engine::Outcome;
using engine::ReportInput;

constexpr int64_t kMillion = 1000000;
// New-endpoint runs insert this many endpoints per thread (fixed, so each
// run inserts a known number and its table is rebuilt for the next run).
constexpr int64_t kNewPerThread = 200000;

EngineConfig BenchConfig() {
  EngineConfig c;
  c.limits.max_endpoints = 100 * kMillion;
  c.default_policy.breaker.consecutive_failures = 1000000;
  c.default_policy.breaker.min_throughput = 1000000000;
  return c;
}

// Endpoints 0..n-1 tracked.
std::unique_ptr<Engine> MakeEngine(int64_t n) {
  auto e = std::make_unique<Engine>(BenchConfig(),
                                    engine::RealClock::Instance(),
                                    engine::PerThreadRandom::Instance());
  char buf[kKeyBufferBytes];
  for (int64_t i = 0; i < n; ++i) {
    AdmitInput in;
    in.endpoint = FormatKey(static_cast<uint64_t>(i), buf);
    (void)e->Admit(in);
  }
  return e;
}

// Known-endpoint runs share one engine per table size, built on first use
// and kept for the process (building 1,000,000 endpoints takes a while).
Engine* SharedEngine(int64_t n) {
  static std::mutex mu;
  static std::unique_ptr<Engine> one, million;
  std::lock_guard<std::mutex> l(mu);
  std::unique_ptr<Engine>& slot = n == 1 ? one : million;
  if (!slot) slot = MakeEngine(n);
  return slot.get();
}

// Cheap per-thread sequence over [0, n): the next endpoint to touch.
class Picker {
 public:
  Picker(int64_t n, int thread) : n_(static_cast<uint64_t>(n)),
      x_(0x9E3779B97F4A7C15ull * static_cast<uint64_t>(thread + 1)) {}
  uint64_t Next() {
    if (n_ == 1) return 0;
    x_ ^= x_ << 13;  // xorshift64
    x_ ^= x_ >> 7;
    x_ ^= x_ << 17;
    return static_cast<uint64_t>(
        (static_cast<unsigned __int128>(x_) * n_) >> 64);
  }

 private:
  uint64_t n_;
  uint64_t x_;
};

enum class Kind { kAdmit, kReport, kReportRetryAfter };

// One decision of `kind` on endpoint `id`; `i` is the thread's iteration.
inline void Decide(Engine& e, Kind kind, uint64_t id, int64_t i) {
  char buf[kKeyBufferBytes];
  const absl::string_view key = FormatKey(id, buf);
  if (kind == Kind::kAdmit) {
    AdmitInput in;
    in.endpoint = key;
    in.attempt = 1;
    benchmark::DoNotOptimize(e.Admit(in));
    return;
  }
  ReportInput in;
  in.endpoint = key;
  in.attempt = 2;
  if (kind == Kind::kReportRetryAfter) {
    in.outcome = Outcome::kRateLimited;
    in.retry_after = absl::Seconds(2);
  } else {
    in.outcome = (i & 0xFFFF) == 0xFFFF ? Outcome::kSuccess
                                        : Outcome::kRetryableFailure;
  }
  benchmark::DoNotOptimize(e.Report(in));
}

void Known(benchmark::State& state, Kind kind) {
  const int64_t n = state.range(0);
  Engine* e = SharedEngine(n);
  Picker pick(n, state.thread_index());
  int64_t i = 0;
  for (auto _ : state) {
    Decide(*e, kind, pick.Next(), i++);
  }
  state.SetItemsProcessed(state.iterations());
}

// Each thread inserts kNewPerThread endpoints never seen before into a
// table that tracks `range(0)` endpoints when the run starts.
void New(benchmark::State& state, Kind kind) {
  static std::unique_ptr<Engine> fresh;  // written by thread 0 only
  const int64_t n = state.range(0);
  if (state.thread_index() == 0) fresh = MakeEngine(n);
  // The loop's start is a barrier for all threads: `fresh` is ready there.
  const uint64_t first =
      static_cast<uint64_t>(n) +
      static_cast<uint64_t>(state.thread_index()) * kNewPerThread;
  uint64_t id = first;
  int64_t i = 0;
  for (auto _ : state) {
    Decide(*fresh, kind, id++, i++);
  }
  state.SetItemsProcessed(state.iterations());
  // The loop's end is a barrier too: every thread is done with `fresh`,
  // and the timer has stopped.
  if (state.thread_index() == 0) fresh.reset();
}

void BM_AdmitKnown(benchmark::State& s) { Known(s, Kind::kAdmit); }
void BM_ReportKnown(benchmark::State& s) { Known(s, Kind::kReport); }
void BM_ReportRAKnown(benchmark::State& s) {
  Known(s, Kind::kReportRetryAfter);
}
void BM_AdmitNew(benchmark::State& s) { New(s, Kind::kAdmit); }
void BM_ReportNew(benchmark::State& s) { New(s, Kind::kReport); }
void BM_ReportRANew(benchmark::State& s) { New(s, Kind::kReportRetryAfter); }

// The key formatting every run above includes, alone.
void BM_KeyFormat(benchmark::State& state) {
  Picker pick(kMillion, 0);
  char buf[kKeyBufferBytes];
  for (auto _ : state) {
    benchmark::DoNotOptimize(FormatKey(pick.Next(), buf));
  }
  state.SetItemsProcessed(state.iterations());
}

void KnownArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("endpoints")->Arg(1)->Arg(kMillion)->Threads(1)->Threads(2)
      ->UseRealTime();
}
void NewArgs(benchmark::internal::Benchmark* b) {
  b->ArgName("endpoints")->Arg(1)->Arg(kMillion)->Threads(1)->Threads(2)
      ->Iterations(kNewPerThread)->UseRealTime();
}

BENCHMARK(BM_KeyFormat);
BENCHMARK(BM_AdmitKnown)->Apply(KnownArgs);
BENCHMARK(BM_ReportKnown)->Apply(KnownArgs);
BENCHMARK(BM_ReportRAKnown)->Apply(KnownArgs);
BENCHMARK(BM_AdmitNew)->Apply(NewArgs);
BENCHMARK(BM_ReportNew)->Apply(NewArgs);
BENCHMARK(BM_ReportRANew)->Apply(NewArgs);

// Consumes --mutex_deadlock_detection=default|off from argv. Debian's
// Abseil is built without NDEBUG, so by default every absl::Mutex::Lock()
// runs the deadlock detector (a process-wide spin lock and a lock graph);
// "off" sets absl::OnDeadlockCycle::kIgnore first, as a server can.
bool ApplyMutexFlag(int* argc, char** argv) {
  constexpr absl::string_view kFlag = "--mutex_deadlock_detection=";
  int out = 1;
  bool ok = true;
  for (int i = 1; i < *argc; ++i) {
    const absl::string_view arg = argv[i];
    if (!absl::StartsWith(arg, kFlag)) {
      argv[out++] = argv[i];
      continue;
    }
    const absl::string_view v = arg.substr(kFlag.size());
    if (v == "off") {
      absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
    } else if (v != "default") {
      std::fprintf(stderr, "--mutex_deadlock_detection: default or off\n");
      ok = false;
    }
  }
  *argc = out;
  return ok;
}

}  // namespace
}  // namespace stagger::bench

int main(int argc, char** argv) {
  if (!stagger::bench::ApplyMutexFlag(&argc, argv)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
