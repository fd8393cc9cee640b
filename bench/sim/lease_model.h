// LeaseNetwork: the coordinated fleet's agents and their lease streams
// (proto/stagger/v1/sync.proto), with the real code on both sides: each
// agent a lease::LeaseBook, the coordinator a lease::LeaseLedger beside the
// engine. What runs where and when (LeaseModel's knobs in sim.h):
//   * Agent side (the client's SyncSession and CoordinatorClient): a first
//     attempt is answered by the agent's book if it holds a live lease;
//     else the agent asks for one soon (a nudge: at once, then coalesced
//     over kNudge while nothing is due) and the call goes to the
//     coordinator. A success is answered by the book under a live lease.
//     Before a failure report, the agent sends that endpoint's counts and
//     the Report goes once the coordinator has applied them (2 x
//     push_latency later). Every flush_interval, the book's counts, asks
//     and acknowledgements go up; a revoke is applied and acknowledged at
//     once (a nudge), except by the deaf agents, which neither apply nor
//     acknowledge one.
//   * Coordinator side (staggerd's LeaseHub): an up message is applied in
//     order (acknowledgements, counts learned by the engine at their times
//     (Engine::ApplyLateCounts) once per seq, waking the wait room's line
//     of an endpoint whose counts carried successes, asks granted through
//     Engine::LeaseTermsFor and the ledger); the answer (applied_seq,
//     grants) goes down if it says anything. After every failure Report
//     (OnFailureReported): an endpoint with holders that is no longer clear
//     gets a new epoch and a revoke to each holder. The engine holds a
//     half-open probe while a holder of an older epoch may still admit
//     (ProbeHeld, set as the engine's probe hold).
//   * Every message takes push_latency one way; each counts as one
//     coordinator message (PolicyResult::sync_up / sync_down).
// The coordinator has been up longer than one ttl (the ledger's learning
// period is over at t=0). Internal to bench/sim; single-threaded.
#ifndef STAGGER_BENCH_SIM_LEASE_MODEL_H_
#define STAGGER_BENCH_SIM_LEASE_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/sim/fleet.h"
#include "core/engine/engine.h"
#include "core/lease/lease_book.h"
#include "core/lease/lease_ledger.h"

namespace stagger::sim {

class LeaseNetwork {
 public:
  // The agent's nudges are coalesced over this long when one found nothing
  // to send (the client's SyncSession::kNudge).
  static constexpr absl::Duration kNudge = absl::Milliseconds(5);

  struct Hooks {
    // Schedule event (t_ns, id, type) of type kFlush, kNudge or kMessage.
    std::function<void(int64_t t_ns, int id, EventType type)> push;
    // Counts with successes for `endpoint` were applied.
    std::function<void(absl::string_view endpoint)> wake;
    // Every delivery has ended (the agents stop flushing).
    std::function<bool()> done;
  };
  // `engine`, `clock` and `counters` must outlive the network; sets the
  // engine's probe hold.
  LeaseNetwork(const LeaseModel& m, engine::Engine* engine,
               const engine::Clock* clock, Hooks hooks,
               PolicyResult* counters);
  ~LeaseNetwork();

  // Schedules every agent's first flush.
  void Start();
  // Agent `agent`'s local answers (nullopt: ask the coordinator).
  std::optional<engine::Decision> Admit(int agent, const engine::AdmitInput& in,
                                        absl::BitGenRef rng);
  std::optional<engine::Decision> Report(int agent,
                                         const engine::ReportInput& in);
  // Before a failure report: sends the agent's counts for `endpoint`, if
  // any. True: the Report waits until they are applied (2 x push_latency).
  bool FlushFor(int agent, absl::string_view endpoint);
  // After the coordinator decided a failure report on `endpoint`.
  void OnFailureReported(absl::string_view endpoint);
  // kFlush, kNudge, kMessage.
  absl::Status OnEvent(const Event& e);

  int64_t push_latency_ns() const { return latency_ns_; }

 private:
  struct Agent {
    lease::LeaseBook book;
    lease::AgentKey key;
    bool deaf = false;
    bool nudge_pending = false;
    absl::Time quiet_until = absl::InfinitePast();
  };
  struct Message {
    int agent = 0;
    bool up = true;
    lease::LeaseBook::Outgoing outgoing;     // up
    uint64_t applied_seq = 0;                // down
    std::vector<lease::LeaseGrant> grants;   // down
    std::vector<lease::LeaseRevoke> revokes; // down
  };

  void Nudge(int agent);
  void Send(Message m);
  // The coordinator applies an agent's message (LeaseHub::Handle).
  void ArriveUp(const Message& m);
  // The agent applies the coordinator's.
  void ArriveDown(const Message& m);
  void ApplyCounts(const lease::AgentKey& key, const lease::CountReport& r);
  absl::Time Now() const { return clock_->Now(); }

  const LeaseModel m_;
  engine::Engine* const engine_;
  const engine::Clock* const clock_;
  const Hooks hooks_;
  PolicyResult* const counters_;
  const int64_t latency_ns_;
  lease::LeaseLedger ledger_;
  std::vector<std::unique_ptr<Agent>> agents_;
  absl::flat_hash_map<lease::AgentKey, int> agent_index_;
  std::vector<Message> messages_;  // in flight, by event id
  std::vector<int> free_messages_;
};

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_LEASE_MODEL_H_
