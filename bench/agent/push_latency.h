// stagger-push-bench's arithmetic, on plain numbers (steady-clock ns):
//   * PushLatencies: how long after a key's failure Report was answered it
//     reached each stream. An arrival before the answer (the push can
//     overtake the answer's way back) counts as 0 ms and is counted apart;
//     a stream it never reached is counted as missing.
//   * TrafficBetween: the messages down a stream took, and their bytes, in
//     a window of time.
//
//   PushLatencies l;
//   l.Add(answered_ns, {stream0_arrival, std::nullopt});  // one missing
//   double p99 = Quantile(l.ms, 0.99);
#ifndef STAGGER_BENCH_AGENT_PUSH_LATENCY_H_
#define STAGGER_BENCH_AGENT_PUSH_LATENCY_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace stagger::bench {

struct PushLatencies {
  std::vector<double> ms;      // one per (key, stream) that arrived
  int64_t before_answer = 0;   // of those, arrived before the answer
  int64_t missing = 0;         // (key, stream) pairs that never arrived

  void Add(int64_t answered_ns,
           const std::vector<std::optional<int64_t>>& arrivals) {
    for (const std::optional<int64_t>& at : arrivals) {
      if (!at.has_value()) {
        ++missing;
        continue;
      }
      if (*at < answered_ns) ++before_answer;
      const int64_t ns = *at > answered_ns ? *at - answered_ns : 0;
      ms.push_back(static_cast<double>(ns) / 1e6);
    }
  }
};

struct Traffic {
  int64_t messages = 0;
  int64_t bytes = 0;
};

// `messages` are (arrival ns, bytes) pairs, as SyncWatcher::Message.
template <typename Message>
Traffic TrafficBetween(const std::vector<Message>& messages, int64_t from_ns,
                       int64_t to_ns) {
  Traffic t;
  for (const Message& m : messages) {
    if (m.at_ns < from_ns || m.at_ns > to_ns) continue;
    ++t.messages;
    t.bytes += m.bytes;
  }
  return t;
}

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_PUSH_LATENCY_H_
