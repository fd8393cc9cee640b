// DecisionTally: every decision stagger-agent answers, counted by where it
// came from (under a lease, the coordinator, the client's fallback) and by
// verdict since the agent started, and into a DecisionRing (decisions per
// second, the last 10 minutes) for its status page (agent_status_api.h).
//
// Record never blocks and never allocates: one relaxed atomic increment
// and DecisionRing::Record (one compare-and-swap). A source or verdict
// outside the known values is not counted. Calls that end in an error
// carry no decision and are not recorded.
//
// Thread-safe. `clock` must outlive it.
#ifndef STAGGER_AGENT_STATUS_DECISION_TALLY_H_
#define STAGGER_AGENT_STATUS_DECISION_TALLY_H_

#include <array>
#include <atomic>
#include <cstdint>

#include "client/coordinator_client.h"
#include "core/engine/clock.h"
#include "core/status/decision_ring.h"

namespace stagger::agent {

class DecisionTally {
 public:
  static constexpr int kSources = 3;  // client::DecisionSource 1..3
  static constexpr int kVerdicts = status::DecisionRing::kVerdicts;

  explicit DecisionTally(const engine::Clock* clock) : ring_(clock) {}
  DecisionTally(const DecisionTally&) = delete;
  DecisionTally& operator=(const DecisionTally&) = delete;

  void Record(const client::ClientDecision& d);

  // [source - 1][verdict - 1]: decisions since start.
  using Counts = std::array<std::array<int64_t, kVerdicts>, kSources>;
  Counts Read() const;
  const status::DecisionRing& ring() const { return ring_; }

 private:
  status::DecisionRing ring_;
  std::array<std::array<std::atomic<int64_t>, kVerdicts>, kSources> counts_{};
};

}  // namespace stagger::agent

#endif  // STAGGER_AGENT_STATUS_DECISION_TALLY_H_
