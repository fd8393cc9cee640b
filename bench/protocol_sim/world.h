// World: one seed of the protocol simulator, run. Real code on both sides
// of the lease stream (lease::ReplicaSync beside a real engine::Engine per
// replica; lease::AgentLink per agent and replica; each agent's fallback a
// real Engine too) on simulated clocks, joined by a simulated network, with
// workers delivering to endpoints that fail when the plan says.
//
// What is simulated, and how (docs/TESTING.md, "The protocol simulator"):
//   * Time: one event queue in true time (ns); ties go in scheduling order.
//   * Clocks: every node has a monotonic clock (its own drift, within
//     lease::kMaxDrift) and a wall clock on top (which may step). The
//     lease code reads the monotonic clock. Agents' engines read the wall
//     clock. A replica's engine reads lease::ReplicaEngineClock, as
//     staggerd's does: the wall clock read at each start, then advanced
//     by the monotonic one, so a step shows only across a restart.
//   * Streams: one per (agent, replica), FIFO both ways with a latency per
//     message. A partition holds messages until it heals, or breaks the
//     stream after its detection time (messages in flight are lost). A slow
//     link adds latency. A duplicated message comes again later, after
//     newer ones. The agent reconnects with a jittered backoff.
//   * Calls: an Admit or Report the agent cannot answer goes to the key's
//     owner (rendezvous over the members), or the next member with a
//     stream up; its answer comes back after the link's latency, or the
//     call times out and the agent's fallback answers.
//   * Replicas crash (-9: state lost but the last state file) and come back
//     as a new incarnation; agents crash and come back as a new
//     incarnation (their deliveries are lost with them).
//   * Held calls: some deliveries' Admits wait (World::WaitFor). The agent
//     holds them over the key's stream (client::HeldBook, as SyncSession
//     does); the replica enters them in a real WaitRoom, driven on its
//     engine's clock, through a real service::AgentHeldCalls per stream.
//     While a partition stalls a stream, the replica's answers wait in its
//     write queue; a stream that ends first gives them back (Unsent).
//     A member that leaves an agent's list ends its stream there.
//   * Workers: each delivery Admits, waits the delay, sends, Reports, and
//     follows the answer (PROCEED, DEFER, GIVE_UP, DONE), until its end or
//     its cancellation. A send to a key in an outage fails after a long
//     answer (100..800 ms); else it succeeds after 10..100 ms.
// Not thread-safe; a World runs once.
#ifndef STAGGER_BENCH_PROTOCOL_SIM_WORLD_H_
#define STAGGER_BENCH_PROTOCOL_SIM_WORLD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/protocol_sim/checks.h"
#include "bench/protocol_sim/plan.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "core/lease/agent_link.h"
#include "core/lease/replica_sync.h"
#include "core/wire/rendezvous.h"
#include "stagger/v1/sync.pb.h"

namespace stagger::protocol_sim {

struct RunStats {
  int64_t events = 0;
  int64_t delivered = 0;
  int64_t gave_up = 0;
  int64_t cancelled = 0;
  int64_t lost_with_agent = 0;
  int64_t local_admits = 0;     // answered under a lease
  int64_t local_reports = 0;
  int64_t central_calls = 0;    // Admit and Report calls to a replica
  int64_t fallback = 0;         // decided by an agent's fallback
  int64_t probes = 0;
  int64_t messages_up = 0;
  int64_t held_calls = 0;     // answered (I4)
  int64_t held_lost = 0;      // lost with their agent
  int64_t probes_unsent = 0;  // answers never written, with a probe (I5)
};

class World {
 public:
  // `trace`, if set, gets one line per worker step (for a replayed seed).
  explicit World(const Plan& plan,
                 std::function<void(const std::string&)> trace = nullptr);
  ~World();
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  // Runs the plan through its quiet end; stops early at a violation.
  void Run();
  const Checks& checks() const { return checks_; }
  const RunStats& stats() const { return stats_; }

 private:
  struct Clock;
  struct Replica;
  struct Agent;
  struct Link;
  struct Delivery;
  struct Event {
    int64_t t;
    uint64_t seq;
    std::function<void()> fn;
    bool operator>(const Event& o) const {
      return t != o.t ? t > o.t : seq > o.seq;
    }
  };

  // Time and events.
  absl::Duration Now() const { return absl::Nanoseconds(now_ns_); }
  void At(absl::Duration at, std::function<void()> fn);
  void After(absl::Duration d, std::function<void()> fn) { At(Now() + d, fn); }
  // A true-time span for `d` measured on `clock`.
  absl::Duration TrueSpan(const Clock& clock, absl::Duration d) const;

  // Setup and the plan's items.
  void Schedule(const Item& item);
  void ScheduleFleetWide(const Item& item);
  void StartReplica(int r);
  void StartAgent(int a);
  engine::EngineConfig Config(int version) const;

  // The network.
  Link& link(int a, int r);
  bool Partitioned(const Link& l, absl::Duration at) const;
  absl::Duration Latency(Link& l, bool up);
  // When a message sent now on `l` arrives (nullopt: lost).
  std::optional<absl::Duration> Arrival(Link& l, bool up);
  void Connect(int a, int r);
  void Reconnect(int a, int r);
  // `left`: the agent's members dropped r (its held calls go on elsewhere).
  void Break(int a, int r, bool left = false);
  void SendUp(int a, int r, lease::Up up);
  void SendDown(int a, int r, const lease::Down& down);
  void ArriveUp(int a, int r, uint64_t gen, const lease::Up& up);
  void ArriveDown(int a, int r, uint64_t gen, const lease::Down& down);
  void ScheduleTick(int r);
  void SchedulePoll(int a, int r);

  // Workers.
  void Begin(const Item& item);
  void Admit(int id);
  void Follow(int id, const engine::Decision& d, absl::Duration defer_for,
              int source);
  void Send(int id);
  void Answered(int id, bool ok, uint64_t attempt_id);
  void ReportOutcome(int id, bool ok);
  void CallCentral(int id, bool report, bool ok);
  void DecideFallback(int id, bool report, bool ok);
  void End(int id, int how);
  engine::AdmitInput AdmitIn(const Delivery& d) const;
  engine::ReportInput ReportIn(const Delivery& d, bool ok) const;
  // The link that may answer `key` locally for agent `a` now, or null.
  lease::AgentLink* LocalLink(int a, int key);
  int RouteFor(int a, int key) const;  // -1: no replica reachable

  // Held calls: the agent's book (per link), the replica's room.
  absl::Duration WaitFor(const Item& item) const;
  bool HoldOnStream(int id, int r);
  void HeldDone(int id, uint64_t call, uint64_t op,
                absl::StatusOr<v1::AdmitResponse> result);
  // Runs the book's ended calls, sends what is due, times the give-up.
  void FinishHeld(int a, int r);
  void ScheduleGiveUp(int a, int r);
  void ArriveHeldUp(int a, int r, uint64_t gen, const v1::SyncUp& up);
  void ReplicaAnswer(int a, int r, uint64_t gen, v1::HeldAnswer answer,
                     absl::string_view endpoint);
  void WriteAnswers(int a, int r);
  void ArriveAnswers(int a, int r, uint64_t gen,
                     const std::vector<v1::HeldAnswer>& answers);
  // The stream ended: answers never written give their probes back.
  void GiveBackUnwritten(int a, int r);
  void ScheduleRoom(int r);
  void WakeRoom(int r);
  void NoteProbe(int r, int key, uint64_t admission);
  int KeyOf(absl::string_view endpoint) const;

  // Crashes and the state file.
  void CrashReplica(int r, absl::Duration down);
  void CrashAgent(int a, absl::Duration down);
  void SaveState(int r);

  // Checks on messages.
  void OnCountsApplied(int r, const lease::AgentKey& agent,
                       const lease::CountReport& report);
  void NoteSent(int a, int r, const lease::Up& up);
  std::string AgentName(int a) const;

  void Trace(int id, const std::string& what);

  const Plan plan_;
  const std::function<void(const std::string&)> trace_;
  std::vector<std::string> keys_;
  std::vector<std::string> members_;
  std::unique_ptr<wire::Rendezvous> rendezvous_;
  int64_t now_ns_ = 0;
  uint64_t event_seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<std::unique_ptr<Delivery>> deliveries_;
  std::vector<absl::Duration> outage_until_;  // per key, and from when
  std::vector<absl::Duration> outage_from_;
  int config_version_ = 0;
  uint64_t held_seq_ = 0;  // the simulator's number for each held call
  Checks checks_;
  RunStats stats_;
};

}  // namespace stagger::protocol_sim

#endif  // STAGGER_BENCH_PROTOCOL_SIM_WORLD_H_
