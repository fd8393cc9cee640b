// Plan: everything one seed of the protocol simulator decides before the
// run starts: the world's size, the protocol's knobs, and a numbered list
// of items (deliveries, outages, faults) in time order.
//
// MakePlan(seed) is a pure function of the seed. A run may keep only some
// items (Plan::Without): that is how a failing plan is shrunk. Randomness
// during the run (latencies, jitter, engines' draws) is keyed by the seed
// and by what it is for, not drawn from one stream, so that dropping one
// item leaves the others' draws as they were.
//
// Sizes (the "seed's size", docs/TESTING.md): 1..4 agents, 1..3 replicas,
// 2..8 endpoints, 20 s of traffic plus a quiet end, ~150 deliveries,
// ~12 faults. Held calls in two seeds of five (Plan::held_calls).
#ifndef STAGGER_BENCH_PROTOCOL_SIM_PLAN_H_
#define STAGGER_BENCH_PROTOCOL_SIM_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace stagger::protocol_sim {

enum class ItemKind : uint8_t {
  kDelivery,       // a worker on `agent` delivers to `key`
  kOutage,         // `key` answers 503 for `length`
  kPartition,      // the link agent <-> replica carries nothing for
                   // `length`; the stream breaks after `detect` (if
                   // shorter), else it stalls and resumes
  kSlowLink,       // the link's messages take `extra` more for `length`
  kReplicaCrash,   // replica killed (-9); back after `length` from its
                   // last saved state
  kAgentCrash,     // agent killed; back after `length` (new incarnation)
  kClockStep,      // a node's wall clock jumps by `extra` (may be < 0)
  kPause,          // an operator pauses `key` (or a prefix of all keys)
                   // on every replica for `length`
  kReload,         // a configuration reload on every replica
  kDuplicate,      // the next message down on a link arrives twice
  kMemberLeaves,   // `agent`'s members drop `replica` for `length` (a
                   // membership change): its stream ends, its held calls
                   // go on to their keys' next owner
};
const char* ItemKindName(ItemKind k);

struct Item {
  int id = 0;             // its place in the plan
  ItemKind kind = ItemKind::kDelivery;
  absl::Duration at;      // from the start of the run
  int agent = 0;          // kDelivery, kPartition, kSlowLink, kAgentCrash,
                          // kClockStep (agent < 0: replica -agent-1),
                          // kDuplicate
  int replica = 0;        // kPartition, kSlowLink, kReplicaCrash,
                          // kDuplicate
  int key = 0;            // kDelivery, kOutage, kPause (-1: prefix)
  absl::Duration length;  // how long it lasts
  absl::Duration extra;   // kSlowLink, kClockStep
  absl::Duration detect;  // kPartition: when the stream breaks
  absl::Duration deadline;  // kDelivery: from its start
  absl::Duration cancel_after;  // kDelivery: InfiniteDuration: never
  // kDelivery: > 0: its Admits wait this long (held over the stream);
  // 0: the simulator decides (World::WaitFor).
  absl::Duration wait;
};

struct Plan {
  uint64_t seed = 0;
  int agents = 1;
  int replicas = 1;
  int keys = 2;
  int workers_per_agent = 8;
  absl::Duration traffic;     // items happen in [0, traffic)
  absl::Duration quiet;       // then every fault heals; counts settle
  absl::Duration ttl;         // the stream lease
  absl::Duration flush;       // the agents' flush interval
  absl::Duration latency;     // one way, on a healthy link
  absl::Duration save_every;  // the replicas' state file
  double drift[8] = {};       // per node: agents, then replicas
  // Held calls: the cut-off cluster's deliveries wait, and one in eight
  // of the others (World::WaitFor). Off: no delivery waits.
  bool held_calls = false;
  std::vector<Item> items;

  // This plan without the items whose ids are in `drop`.
  Plan Without(const std::vector<int>& drop) const;
  // Its size, for a log line ("3 agents, 2 replicas, 6 keys, 20 s, ...").
  std::string Size() const;
};

Plan MakePlan(uint64_t seed);
// The names the world gives endpoint `k` and replica `r`.
std::string KeyName(int k);
std::string MemberName(int r);
std::string Describe(const Item& item);

// A deterministic 64-bit mix of the seed and a purpose: the simulator's
// draws that are not the plan's.
uint64_t Mix(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0);

}  // namespace stagger::protocol_sim

#endif  // STAGGER_BENCH_PROTOCOL_SIM_PLAN_H_
