// NowNs: the steady clock in nanoseconds, the one clock every time the
// agent benchmarks record is on (stagger-agent-load's workers,
// stagger-push-bench's streams), so their times compare.
#ifndef STAGGER_BENCH_AGENT_STEADY_NOW_H_
#define STAGGER_BENCH_AGENT_STEADY_NOW_H_

#include <chrono>
#include <cstdint>

namespace stagger::bench {

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_STEADY_NOW_H_
