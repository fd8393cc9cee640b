// LeaseNetwork: the coordinated fleet's agents and their lease streams,
// lease protocol 2 (core/lease/messages.h; proto/stagger/v1/sync.proto),
// with the real code on both sides: one lease::ReplicaSync beside the
// row's engine (one replica, owning every key), one lease::AgentLink per
// agent. What runs where and when (LeaseModel's knobs in sim.h):
//   * Replica side (staggerd's sync service): ReplicaSync is the engine's
//     condition sink (through this object, which also schedules its tick)
//     and its probe hold. A message up goes to Open (the hello) or
//     Receive; the answer goes down if it says anything (a renewal, an
//     applied seq, a snapshot). Counts with successes, once applied, wake
//     the wait room's line of their endpoint, as staggerd does. The
//     replica ticks at ReplicaSync::NextTick; a tick's delta goes down
//     every stream.
//   * Agent side (stagger-agent): a first attempt and a success are
//     answered through MayAnswerLocally and AgentLink::Admit/Report
//     (nullopt: the call goes to the coordinator). The agent sends what
//     AgentLink::Poll has at AgentLink::NextPoll: a flush every
//     flush_interval (counts and a renewal), and an acknowledgement
//     kNudge after a delta that added entries. Before a failure report,
//     FlushFor sends that endpoint's counts, and the Report waits until
//     the replica has applied them (the answer's applied_seq), or at most
//     kFlushWait (the client's call deadline).
//   * Every message takes push_latency one way, FIFO per agent; each
//     counts as one coordinator message when sent (PolicyResult::sync_up,
//     sync_down).
//   * A deaf agent's stream goes quiet at the first set change that takes
//     keys out of clear: from then on nothing passes either way (the delta
//     and every later message are sent and lost), and the agent does not
//     notice (its stream is not broken, so it does not reconnect). It answers
//     locally until its lease runs out (at most one ttl after its last
//     renewal), and the replica holds the changed keys' probes until the
//     lease it granted has ended. (An agent that hears renewals but misses
//     set changes stops answering on its own: AgentLink takes no renewal
//     for a set newer than its copy. docs/SIMULATOR.md, "What the
//     simulator found about leases", says how it held probes.)
// The replica has been up for kUpBefore at t=0 (past its learning period:
// one ttl and the longest probe_timeout). The agents start with the
// scenario: each opens its stream at t=0, and holds its lease once its
// hello's answer is back (2 x push_latency); until then its calls go to
// the coordinator, as in the old design's model. Their flushes are spread:
// agent a's first at (a + 1) / agents of a flush interval (its lease is
// counted from (agents - 1 - a) / agents of one before t=0, a little
// shorter). Internal to bench/sim; single-threaded.
#ifndef STAGGER_BENCH_SIM_LEASE_MODEL_H_
#define STAGGER_BENCH_SIM_LEASE_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "bench/sim/fleet.h"
#include "core/engine/endpoint_condition.h"
#include "core/engine/engine.h"
#include "core/lease/agent_link.h"
#include "core/lease/messages.h"
#include "core/lease/replica_sync.h"

namespace stagger::sim {

class LeaseNetwork final : public engine::ConditionSink {
 public:
  // How long the replica has been up at t=0: more than any learning period
  // (ttl and probe_timeout are at most 10 min each).
  static constexpr absl::Duration kUpBefore = absl::Hours(1);
  // The longest a failure report waits for its counts to be applied (the
  // client's call deadline, ClientOptions::call_deadline).
  static constexpr absl::Duration kFlushWait = absl::Milliseconds(50);

  struct Hooks {
    // Schedule event (t_ns, id, type) of type kPoll, kTick, kMessage or
    // kReport (delivery `id`'s failure report: ask ReportDue).
    std::function<void(int64_t t_ns, int id, EventType type)> push;
    // Counts with successes for `endpoint` were applied.
    std::function<void(absl::string_view endpoint)> wake;
    // Every delivery has ended (the agents stop polling, the replica
    // ticking).
    std::function<bool()> done;
  };
  // `seed` seeds the agents' draws. `engine`, `clock` and `counters` must
  // outlive the network. Makes itself the engine's condition sink, and the
  // replica its probe hold.
  LeaseNetwork(const LeaseModel& m, uint64_t seed, engine::Engine* engine,
               const VirtualClock* clock, Hooks hooks,
               PolicyResult* counters);
  ~LeaseNetwork();

  // Opens every agent's stream and schedules the polls and the replica's
  // tick.
  void Start();
  // Agent `agent`'s local answers (nullopt: ask the coordinator), through
  // lease::MayAnswerLocally and its AgentLink.
  std::optional<engine::Decision> Admit(int agent,
                                        const engine::AdmitInput& in);
  std::optional<engine::Decision> Report(int agent,
                                         const engine::ReportInput& in);
  // Before delivery `delivery`'s failure report on `endpoint`: sends the
  // agent's counts for it, if any. True: the Report waits; kReport events
  // for `delivery` follow, and ReportDue says when it goes.
  bool FlushFor(int agent, int delivery, absl::string_view endpoint);
  // At a kReport event: whether `delivery`'s failure report goes now (its
  // counts were applied, or kFlushWait passed). True once per FlushFor.
  bool ReportDue(int delivery);
  // kPoll, kTick, kMessage.
  absl::Status OnEvent(const Event& e);

  // engine::ConditionSink: to the replica, then a tick is scheduled.
  void OnConditionChange(const engine::ConditionChange& c) override;

 private:
  // The replica's monotonic clock: the fleet's virtual clock, except while
  // ReplicaSync is built, when it reads kUpBefore earlier.
  class ReplicaClock final : public engine::Clock {
   public:
    explicit ReplicaClock(const VirtualClock* c) : c_(c) {}
    absl::Time Now() const override { return c_->Now() - back_; }
    void set_back(absl::Duration d) { back_ = d; }

   private:
    const VirtualClock* c_;
    absl::Duration back_ = absl::ZeroDuration();
  };
  struct Agent {
    std::unique_ptr<lease::AgentLink> link;
    // Its own draws (a local first attempt's delay): the engine's are the
    // coordinator's, and do not move with the agents' answers.
    std::mt19937_64 rng;
    uint64_t stream = 0;  // the replica's id for it
    bool deaf = false;
    bool quiet = false;   // deaf, and its stream went quiet
    int64_t poll_at_ns = INT64_MAX;  // the poll scheduled (INT64_MAX: none)
    std::vector<int> waiting;  // deliveries whose report waits for counts
  };
  struct Waiter {
    int agent = 0;
    uint64_t seq = 0;
    int64_t until_ns = 0;
    bool applied = false;
  };
  struct Message {
    int agent = 0;
    bool up = true;
    lease::Up up_message;
    std::shared_ptr<const lease::Down> down;
  };

  // Whether the agent may answer `key` itself now (lease::MayAnswerLocally
  // over its one link), as stagger-agent asks.
  bool MayAnswer(int agent, absl::string_view key) const;
  void SendUp(int agent, lease::Up up);
  void SendDown(int agent, std::shared_ptr<const lease::Down> down);
  void Send(Message m);
  // The replica takes an agent's message; the agent takes the replica's.
  absl::Status ArriveUp(int agent, const lease::Up& up);
  void ArriveDown(int agent, const lease::Down& down);
  void Tick();
  void Poll(int agent);
  void ScheduleTick();
  void SchedulePoll(int agent);
  absl::Time Now() const { return clock_->Now(); }
  int64_t NowNs() const { return clock_->now_ns(); }

  const LeaseModel m_;
  engine::Engine* const engine_;
  const VirtualClock* const clock_;
  const Hooks hooks_;
  PolicyResult* const counters_;
  const int64_t latency_ns_;
  ReplicaClock replica_clock_;
  std::unique_ptr<lease::ReplicaSync> replica_;
  std::vector<std::string> members_;  // one replica: {"stagger-0"}
  std::vector<Agent> agents_;
  absl::flat_hash_map<int, Waiter> waiters_;  // by delivery
  // Endpoints whose applied counts carried successes (the counts
  // observer), woken once Receive has returned.
  std::vector<std::string> to_wake_;
  int64_t tick_at_ns_ = INT64_MAX;  // the tick scheduled (INT64_MAX: none)
  bool ticking_ = false;
  std::vector<Message> messages_;  // in flight, by event id
  std::vector<int> free_messages_;
};

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_LEASE_MODEL_H_
