// Checks: the protocol simulator's invariants, told every relevant event in
// simulated true time and holding the first violation.
//
//   I1. No overlap. No attempt admitted locally under a lease is sent while
//       a probe on the same endpoint is in flight. A local PROCEED counts at
//       its send time (after its delay). Attempts the fallback admitted
//       while the coordinator was away are exempt, and counted apart.
//   I2. Versions only move forward. An agent's copy of a replica
//       incarnation's set never goes back to an older version, and no
//       acknowledgement names a version the agent was never sent.
//   I3. Counts once, in their own time. Each count report is applied at
//       most once per replica incarnation, none is missing when the run
//       settles (unless its agent said it was lost), and a replica never
//       finds a gap. Late successes never end a run of failures whose last
//       failure came after them (true times).
//   I4. Exactly once. Every held call (a waiting Admit an agent holds over
//       its stream) is answered exactly once by its agent's book, by its
//       give-up time: min(start + wait + kHeldGrace, the worker's
//       deadline), on the agent's clock. CANCELLED only if its worker
//       cancelled. A replica answers each id of a stream at most once.
//       Calls lost with a crashed agent are counted apart.
//   I5. No leaked probe. A probe released to a held call whose answer
//       the stream never wrote (it ended first) is free again within
//       kProbeReturnBound: its slot is not held until probe_timeout.
//   Progress. Every delivery ends (delivered, given up, cancelled, or lost
//       with its agent) by the end of the quiet period.
// Not thread-safe (one simulated world).
#ifndef STAGGER_BENCH_PROTOCOL_SIM_CHECKS_H_
#define STAGGER_BENCH_PROTOCOL_SIM_CHECKS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "absl/time/time.h"

namespace stagger::protocol_sim {

struct Violation {
  std::string invariant;  // "I1", "I2", "I3", "progress"
  std::string what;
  absl::Duration at;      // simulated true time
};

class Checks {
 public:
  // --- I1
  void ProbeSent(int key, uint64_t probe, absl::Duration at);
  void ProbeAnswered(uint64_t probe);
  void LocalSent(int key, int agent, absl::Duration at);
  void FallbackSent() { ++fallback_sends_; }
  // --- I2
  void CopyAt(int agent, int replica, uint64_t incarnation, uint64_t version,
              absl::Duration at);
  void Acked(int agent, int replica, uint64_t incarnation, uint64_t version,
             uint64_t sent_max, absl::Duration at);
  // --- I3 (an agent incarnation is "a<agent>/<incarnation>")
  void ReportSent(const std::string& agent, int member, uint64_t seq,
                  uint64_t lost);
  void ReportApplied(const std::string& agent, int member,
                     uint64_t replica_incarnation, uint64_t seq,
                     uint64_t lost, absl::Duration at);
  void CountGap(const std::string& what, absl::Duration at);
  void RunUndone(int key, absl::Duration last_success,
                 absl::Duration last_failure, absl::Duration at);
  // At the end: every report of the agents still alive reached a replica.
  void SettleCounts(const std::set<std::string>& alive_agents);
  // --- I4 (`call`: the simulator's number for one held call)
  static constexpr absl::Duration kProbeReturnBound = absl::Milliseconds(100);
  void HeldBegun(uint64_t call, absl::Duration due) { held_due_[call] = due; }
  void HeldAnswered(uint64_t call, absl::Duration at, bool cancelled,
                    bool worker_cancelled);
  void HeldLost(uint64_t call) {
    held_due_.erase(call);
    ++held_lost_;
  }
  void ReplicaAnswered(uint64_t stream, uint64_t id, absl::Duration at);
  // At the end: every held call was answered.
  void SettleHeld(absl::Duration at);
  // --- I5: a probe answer the stream never wrote, and whether its slot is
  // still held `kProbeReturnBound` later (by nobody else since).
  void ProbeUnsent() { ++probes_unsent_; }
  void ProbeKept(int replica, int key, absl::Duration dropped_at,
                 absl::Duration at);
  // --- progress
  void Stuck(int delivery, const std::string& state, absl::Duration at);

  const std::optional<Violation>& violation() const { return violation_; }
  int64_t overlaps_checked() const { return local_sends_; }
  int64_t fallback_sends() const { return fallback_sends_; }
  int64_t probes() const { return probes_; }
  int64_t held_calls() const { return held_calls_; }
  int64_t held_lost() const { return held_lost_; }
  int64_t probes_unsent() const { return probes_unsent_; }

 private:
  void Fail(const char* invariant, std::string what, absl::Duration at);

  std::optional<Violation> violation_;
  // I1: probes in flight per key: probe token -> sent at.
  std::map<int, std::map<uint64_t, absl::Duration>> probes_in_flight_;
  std::map<uint64_t, int> probe_key_;
  int64_t local_sends_ = 0;
  int64_t fallback_sends_ = 0;
  int64_t probes_ = 0;
  // I2: per (agent, replica): incarnation and version of the copy.
  std::map<std::pair<int, int>, std::pair<uint64_t, uint64_t>> copies_;
  // I3: per (agent incarnation, member): seqs sent (max), lost declared,
  // applied per replica incarnation.
  struct Reports {
    uint64_t max_sent = 0;
    std::set<uint64_t> lost;     // declared lost
    std::set<uint64_t> applied;  // by any incarnation
    std::set<std::pair<uint64_t, uint64_t>> applied_by;  // (inc, seq)
  };
  std::map<std::pair<std::string, int>, Reports> reports_;
  // I4: held calls not yet answered -> by when; ids a stream answered.
  std::map<uint64_t, absl::Duration> held_due_;
  std::set<std::pair<uint64_t, uint64_t>> replica_answered_;
  int64_t held_calls_ = 0;
  int64_t held_lost_ = 0;
  // I5
  int64_t probes_unsent_ = 0;
};

}  // namespace stagger::protocol_sim

#endif  // STAGGER_BENCH_PROTOCOL_SIM_CHECKS_H_
