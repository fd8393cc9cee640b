// VictimSchedule: the revoke benchmark's victim endpoints and their health
// over time (bench/agent/README.md has the whole method). Victim v
// (0 <= v < count) is driven from start + v * spacing, through three phases:
//   healthy [s, s + warm)         deliveries succeed; the agents take leases
//   down    [s + warm, + down)    every attempt fails: the first failure
//                                 report opens its breaker
//   up      [.., + up)            attempts succeed again: half-open probes
//                                 close the breaker
// and then retires. Its focus, around the start of the down phase, is
// where the revoke is measured. count 0: no victims (the healthy benchmarks).
// Pure functions of time (steady-clock nanoseconds), so every worker
// thread reads the same schedule without a lock.
#ifndef STAGGER_BENCH_AGENT_VICTIM_SCHEDULE_H_
#define STAGGER_BENCH_AGENT_VICTIM_SCHEDULE_H_

#include <algorithm>
#include <cstdint>

#include "bench/bench_keys.h"

namespace stagger::bench {

struct VictimSchedule {
  // Victim keys are bench keys from this id on; background keys (ids
  // 0 .. endpoints-1) stay below it.
  static constexpr uint64_t kFirstVictimId = 9000000;

  int64_t start_ns = 0;
  int64_t warm_ns = 0;
  int64_t down_ns = 0;
  int64_t up_ns = 0;
  int64_t spacing_ns = 1;  // > 0
  int count = 0;

  int64_t StartOf(int v) const { return start_ns + v * spacing_ns; }
  int64_t DownFrom(int v) const { return StartOf(v) + warm_ns; }
  int64_t UpFrom(int v) const { return DownFrom(v) + down_ns; }
  int64_t EndOf(int v) const { return UpFrom(v) + up_ns; }
  bool IsDown(int v, int64_t t) const {
    return t >= DownFrom(v) && t < UpFrom(v);
  }

  // The victims driven at `t`: [*first, *last), possibly empty.
  void ActiveAt(int64_t t, int* first, int* last) const {
    Within(t, 0, warm_ns + down_ns + up_ns, first, last);
  }
  // The victims near their failure at `t`, from kFocusBeforeNs before
  // their down phase to kFocusAfterNs into it: the moments the revoke
  // benchmark measures, which get most of the victims' traffic.
  static constexpr int64_t kFocusBeforeNs = 150 * 1000 * 1000;
  static constexpr int64_t kFocusAfterNs = 50 * 1000 * 1000;
  void FocusAt(int64_t t, int* first, int* last) const {
    Within(t, warm_ns - kFocusBeforeNs, kFocusBeforeNs + kFocusAfterNs, first,
           last);
  }

  // The victims v with StartOf(v) + offset <= t < StartOf(v) + offset +
  // length: [*first, *last), possibly empty.
  void Within(int64_t t, int64_t offset, int64_t length, int* first,
              int* last) const {
    const int64_t from = start_ns + offset;
    if (count == 0 || t < from) {
      *first = *last = 0;
      return;
    }
    // v qualifies iff (t - from - length) / spacing < v <= (t - from) /
    // spacing (integer division is floor here: both are >= 0 when used).
    const int64_t newest = (t - from) / spacing_ns;
    const int64_t lo =
        t - from >= length ? (t - from - length) / spacing_ns + 1 : 0;
    *first = static_cast<int>(std::min<int64_t>(lo, count));
    *last = static_cast<int>(std::min<int64_t>(newest + 1, count));
  }

  // How many victims fit a window of `window_ns` from start_ns, each run
  // to its end inside it.
  static int CountFor(int64_t window_ns, int64_t life_ns, int64_t spacing) {
    if (window_ns < life_ns) return 0;
    return static_cast<int>((window_ns - life_ns) / spacing) + 1;
  }
};

// The endpoint key of victim `v` into `buf`.
inline absl::string_view VictimKey(int v, char (&buf)[kKeyBufferBytes]) {
  return FormatKey(VictimSchedule::kFirstVictimId + static_cast<uint64_t>(v),
                   buf);
}

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_VICTIM_SCHEDULE_H_
