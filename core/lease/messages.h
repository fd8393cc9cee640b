// The lease stream's messages as plain values: protocol 2 of
// proto/stagger/v1/sync.proto, which states the contract of each field.
// core/wire/sync_wire.h converts them; the protocol simulator passes them
// as they are. Shared by the agent side (AgentLink) and the replica side
// (ReplicaSync).
//
// In one paragraph: each agent keeps one stream to each coordinator
// replica. The replica pushes the set of its keys that are not clear
// (a snapshot, then versioned deltas); the agent acknowledges versions
// cumulatively. Every message up renews the agent's one stream lease, and
// while it lives and the agent's copy of the set is current, the agent
// answers first attempts and successes itself for every key of that
// replica that the set does not cover.
#ifndef STAGGER_CORE_LEASE_MESSAGES_H_
#define STAGGER_CORE_LEASE_MESSAGES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"
#include "core/engine/engine_config.h"
#include "core/engine/lease_terms.h"

namespace stagger::lease {

// The protocol version this code speaks (AgentHello.protocol). A replica
// refuses any other with FAILED_PRECONDITION naming both versions.
inline constexpr uint32_t kProtocolVersion = 2;

// Limits of one message (sync.proto), checked on receipt.
inline constexpr size_t kMaxItemsPerMessage = 10000;
inline constexpr size_t kMaxBucketsPerEndpoint = 64;
inline constexpr size_t kMaxAgentIdBytes = 256;
inline constexpr size_t kMaxMembers = 1000;
// Entries of one snapshot or delta: every endpoint a replica may track,
// plus the pauses and members.
inline constexpr size_t kMaxSetEntries = 10000000;

// Why a key (or a prefix, or a member's keys) is not clear.
enum class Why : uint8_t {
  kNearTrip = 1,      // CLOSED, failing toward a trip
  kBreaker = 2,       // OPEN or HALF_OPEN
  kRetryAfter = 3,    // a Retry-After window is in force
  kReleasing = 4,     // parked deliveries are being released
  kPaused = 5,        // an operator's pause
  kStandingIn = 6,    // this replica decides another member's keys
  kDisabled = 7,      // disabled (a dead endpoint: every Admit gives up)
};
const char* WhyName(Why w);  // "NEAR_TRIP", ...

// What an entry covers.
enum class Scope : uint8_t {
  kEndpoint = 1,  // one key
  kPrefix = 2,    // every key starting with `target` (a prefix pause)
  kMember = 3,    // every key owned by the member named `target`
};

struct EntryKey {
  std::string target;
  Scope scope = Scope::kEndpoint;
  bool operator==(const EntryKey& o) const {
    return scope == o.scope && target == o.target;
  }
  template <typename H>
  friend H AbslHashValue(H h, const EntryKey& k) {
    return H::combine(std::move(h), k.target, k.scope);
  }
};

struct NotClearEntry {
  EntryKey key;
  Why why = Why::kNearTrip;
  // kPaused, kRetryAfter: when it ends (a fallback keeps to it); else
  // InfinitePast.
  absl::Time until = absl::InfinitePast();
};

// The replica's configuration as agents need it: each key's policy (the
// initial jitter of a first attempt answered locally). Shared, immutable.
using SharedConfig = std::shared_ptr<const engine::EngineConfig>;

struct SetSnapshot {
  uint64_t incarnation = 0;  // the replica's
  uint64_t version = 0;
  std::vector<NotClearEntry> entries;
  SharedConfig config;
};

struct SetDelta {
  uint64_t incarnation = 0;
  uint64_t from_version = 0;  // applies to a copy at exactly this version
  uint64_t to_version = 0;
  std::vector<NotClearEntry> added;  // new, or replacing the same key
  std::vector<EntryKey> removed;
  SharedConfig config;  // set: the configuration changed
};

// Counts of one time bucket, on the replica's clock (a lower bound of when
// the bucket began: the agent converts through the replica's time on the
// latest message down).
struct CountBucket {
  absl::Time start;
  uint32_t first_attempts = 0;
  uint32_t successes = 0;
  // When the bucket's last success happened (same clock and bound): a run
  // of failures ends only on a success after its last failure.
  absl::Time last_success = absl::InfinitePast();
};
struct EndpointCounts {
  std::string endpoint;
  std::vector<CountBucket> buckets;  // oldest first
};
struct CountReport {
  uint64_t seq = 0;  // 1, 2, ... per agent incarnation and replica
  // Reports the agent dropped unsent just before this one (its bound on
  // reports not yet acknowledged): seq - lost - 1 is the last one sent.
  uint64_t lost = 0;
  std::vector<EndpointCounts> endpoints;
  // The replica incarnation whose clock the times are on; 0: unknown or
  // mixed (their successes then end no run of failures).
  uint64_t clock_incarnation = 0;
};

// A waiting Admit the agent holds, handed to the replica (sync.proto,
// "Held calls").
struct HeldAdmit {
  uint64_t id = 0;
  std::string endpoint;
  engine::AdmitInput input;  // input.endpoint points into `endpoint`
};
struct HeldAnswer {
  uint64_t id = 0;
  std::optional<engine::Decision> decision;  // set: the answer
  int code = 0;  // else the status the worker gets (google.rpc.Code)
  std::string message;
};
struct ReturnedRelease {
  std::string endpoint;
  uint64_t admission = 0;
};

struct Hello {
  std::string agent_id;      // 1..kMaxAgentIdBytes
  uint64_t incarnation = 0;  // != 0, new at every start of the agent
  uint32_t protocol = kProtocolVersion;
  // The members the agent routes over, by name: a lease is granted only
  // when the replica's members are the same.
  std::vector<std::string> members;
  // The first count report this stream will carry; lower ones were
  // acknowledged on an earlier stream.
  uint64_t next_count_seq = 1;
};

struct Up {
  std::optional<Hello> hello;  // first message only
  uint64_t number = 0;         // 1, 2, ... per stream: what a renewal names
  // The set as the agent holds it: everything through `acked_version` of
  // replica incarnation `acked_incarnation` (0: nothing).
  uint64_t acked_incarnation = 0;
  uint64_t acked_version = 0;
  bool resync = false;  // the agent's copy went wrong: send a snapshot
  std::optional<CountReport> counts;
  std::vector<HeldAdmit> holds;
  std::vector<uint64_t> drops;
  std::vector<ReturnedRelease> returns;
};

struct Down {
  uint64_t applied_seq = 0;  // counts applied through this seq
  // The stream lease, renewed for `ttl` from when the agent sent message
  // `renewed` up (0: no renewal in this message).
  uint64_t renewed = 0;
  absl::Duration ttl = absl::ZeroDuration();
  // The replica's set version when it renewed: an agent whose copy is
  // older takes no renewal.
  uint64_t version = 0;
  // The replica's (engine's) clock when this message was made.
  absl::Time replica_time = absl::InfinitePast();
  std::optional<SetSnapshot> snapshot;
  std::optional<SetDelta> delta;
  std::vector<HeldAnswer> answers;
  // Set once, with the first message, when this stream will never get a
  // lease (the members differ): why, for the agent's status page.
  std::string refusal;
};

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_MESSAGES_H_
