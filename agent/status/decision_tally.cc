#include "agent/status/decision_tally.h"

namespace stagger::agent {

void DecisionTally::Record(const client::ClientDecision& d) {
  const int source = static_cast<int>(d.source);
  const int verdict = static_cast<int>(d.verdict);
  if (source < 1 || source > kSources || verdict < 1 || verdict > kVerdicts) {
    return;
  }
  counts_[source - 1][verdict - 1].fetch_add(1, std::memory_order_relaxed);
  ring_.Record(d.verdict);
}

DecisionTally::Counts DecisionTally::Read() const {
  Counts out{};
  for (int s = 0; s < kSources; ++s) {
    for (int v = 0; v < kVerdicts; ++v) {
      out[s][v] = counts_[s][v].load(std::memory_order_relaxed);
    }
  }
  return out;
}

}  // namespace stagger::agent
