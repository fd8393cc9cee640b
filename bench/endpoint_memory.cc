// stagger-endpoint-memory: resident memory per tracked endpoint.
//
// Builds an Engine on the embedded defaults (max_endpoints raised to fit),
// makes it track --endpoints endpoints with realistic keys
// ("https://hooks.tenant-123456.example.com/webhooks/v1", 51 bytes) by one
// Admit each, and reports the growth of the process's resident set
// (/proc/self/statm) divided by the number tracked. The key is formatted
// into one reused stack buffer, so the growth is the engine's alone:
// table slots, per-endpoint state, keys, and the allocator's overhead on
// them. heap_bytes_per_endpoint is the same from malloc's own count
// (mallinfo2: bytes in use), which excludes pages the allocator holds but
// has not handed out.
//
// Output, one line:
//   endpoints=N tracked=T rss_before_bytes=A rss_after_bytes=B
//   bytes_per_endpoint=M heap_bytes_per_endpoint=H seconds=S
// Exit 1 if the engine tracked fewer than N (the table refused some).
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_keys.h"
#include "core/cli/usage.h"
#include "core/engine/clock.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"

ABSL_FLAG(int64_t, endpoints, 1000000, "endpoints to track");

namespace stagger::bench {
namespace {

// Resident set size of this process, bytes.
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  statm >> size_pages >> resident_pages;
  return resident_pages * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

// Bytes malloc has handed out and not had back.
int64_t HeapInUseBytes() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

int Run() {
  const int64_t n = absl::GetFlag(FLAGS_endpoints);
  engine::EngineConfig config;
  config.limits.max_endpoints = std::max<int64_t>(n, 1);
  engine::Engine e(config, engine::RealClock::Instance(),
                   engine::PerThreadRandom::Instance());
  // Touch the decision path once (thread-local generator, first shard
  // allocation) so that only per-endpoint growth is measured.
  char buf[kKeyBufferBytes];
  {
    engine::AdmitInput in;
    in.endpoint = "warm-up";
    (void)e.Admit(in);
  }
  const int64_t rss_before = ResidentBytes();
  const int64_t heap_before = HeapInUseBytes();
  const absl::Time start = absl::Now();
  for (int64_t i = 0; i < n - 1; ++i) {
    engine::AdmitInput in;
    in.endpoint = FormatKey(static_cast<uint64_t>(i), buf);
    (void)e.Admit(in);
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const int64_t rss_after = ResidentBytes();
  const int64_t heap_after = HeapInUseBytes();
  const int64_t tracked = e.Stats().tracked;  // includes "warm-up"
  const double denom = static_cast<double>(std::max<int64_t>(tracked - 1, 1));
  std::printf(
      "endpoints=%lld tracked=%lld rss_before_bytes=%lld rss_after_bytes=%lld "
      "bytes_per_endpoint=%.1f heap_bytes_per_endpoint=%.1f seconds=%.2f\n",
      static_cast<long long>(n), static_cast<long long>(tracked),
      static_cast<long long>(rss_before), static_cast<long long>(rss_after),
      (rss_after - rss_before) / denom, (heap_after - heap_before) / denom,
      seconds);
  return tracked >= n ? 0 : 1;
}

}  // namespace
}  // namespace stagger::bench

int main(int argc, char** argv) {
  // --help lists this program's flags (bench/endpoint_memory.cc).
  stagger::cli::InstallUsage(
      "Tracks --endpoints endpoints in an engine on the embedded defaults "
      "and prints the resident memory each costs; see "
      "docs/PERFORMANCE.md.\n  stagger-endpoint-memory --endpoints=1000000",
      "bench");
  absl::ParseCommandLine(argc, argv);
  return stagger::bench::Run();
}
