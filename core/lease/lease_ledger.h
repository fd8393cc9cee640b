// LeaseLedger: a coordinator replica's record of the leases it granted, and
// its rules for granting them (proto/stagger/v1/sync.proto, "Leases").
//
//   * Grant(agent, endpoint, terms, owned, now) -> a grant or nullopt. None
//     while the endpoint is not clear (terms.clear, the engine's), in
//     learning mode (the first ttl after this replica started: leases an
//     earlier incarnation granted may still be live), or, for a key this
//     replica does not own (it took it over by failover), until one ttl
//     after its first ask for that key. The allowance covers
//     kAllowancePeriod of the endpoint's served rate, at least
//     kMinAllowance. An agent holds at most kMaxLeasesPerAgent.
//   * Revoke(endpoint, now): raises the endpoint's epoch and returns the
//     holders to push a revoke to. Holders stay recorded (as revoking)
//     until they acknowledge or their lease has run out.
//   * ProbeBlocked(endpoint, now): some holder of an older epoch has not
//     acknowledged and its lease may still be live; a half-open probe must
//     wait (it never overlaps a live lease from an older epoch).
//   * ShouldApply(agent, seq): true once per count report seq of an agent
//     incarnation (reports re-sent after a reconnect are not doubled).
// Epochs come from one counter per replica started at its start time in
// milliseconds << 20, so they never go backwards across evictions or
// restarts (unless the clock steps back by more than the uptime).
// Thread-safe; time comes from the caller.
#ifndef STAGGER_CORE_LEASE_LEASE_LEDGER_H_
#define STAGGER_CORE_LEASE_LEASE_LEDGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/lease_terms.h"
#include "core/lease/sync_messages.h"

namespace stagger::lease {

// One agent incarnation: (agent_id, incarnation) of its hello.
struct AgentKey {
  std::string id;
  uint64_t incarnation = 0;
  bool operator==(const AgentKey& o) const {
    return id == o.id && incarnation == o.incarnation;
  }
  template <typename H>
  friend H AbslHashValue(H h, const AgentKey& k) {
    return H::combine(std::move(h), k.id, k.incarnation);
  }
};

class LeaseLedger {
 public:
  static constexpr uint32_t kMinAllowance = 100;
  static constexpr absl::Duration kAllowancePeriod = absl::Seconds(2);
  static constexpr uint32_t kMaxAllowance = 1000000;
  static constexpr size_t kMaxLeasesPerAgent = 100000;
  // A holder's lease is taken to be live this long past ttl after the grant
  // (the agent's ttl starts when the grant arrives).
  static constexpr absl::Duration kExpiryGrace = absl::Seconds(1);

  struct Options {
    absl::Duration ttl = absl::Seconds(5);
  };
  LeaseLedger(Options options, absl::Time start);

  absl::Duration ttl() const { return options_.ttl; }

  std::optional<LeaseGrant> Grant(const AgentKey& agent,
                                  absl::string_view endpoint,
                                  const engine::LeaseTerms& terms, bool owned,
                                  absl::Time now);
  struct Notice {
    AgentKey agent;
    LeaseRevoke revoke;
  };
  std::vector<Notice> Revoke(absl::string_view endpoint, absl::Time now);
  // Revoke() for every endpoint with holders that `match` accepts.
  std::vector<Notice> RevokeIf(
      const std::function<bool(absl::string_view)>& match, absl::Time now);
  void Ack(const AgentKey& agent, const LeaseAck& ack);
  // Revokes `agent` has not acknowledged (re-sent when it reconnects: it
  // may still use those leases until they run out).
  std::vector<LeaseRevoke> PendingRevokes(const AgentKey& agent);
  bool ProbeBlocked(absl::string_view endpoint, absl::Time now);
  // False when no endpoint has a revoke outstanding: ProbeBlocked would
  // say false for every endpoint (read without the lock, for the decision
  // path).
  bool AnyRevoking() const {
    return revoking_.load(std::memory_order_relaxed) > 0;
  }
  // Whether some agent may hold a live lease on `endpoint`.
  bool HasHolders(absl::string_view endpoint);

  bool ShouldApply(const AgentKey& agent, uint64_t seq);

  // Forgets run-out holders and agents silent for long; returns the number
  // of leases still recorded.
  size_t Sweep(absl::Time now);

 private:
  struct Holder {
    AgentKey agent;
    uint64_t epoch = 0;
    absl::Time expires;  // grant + ttl + kExpiryGrace
    bool revoking = false;
  };
  struct Endpoint {
    uint64_t epoch = 0;
    absl::Time first_ask = absl::InfinitePast();
    std::vector<Holder> holders;
  };
  struct Agent {
    uint64_t applied_seq = 0;
    size_t leases = 0;
    absl::Time last_seen;
  };
  uint64_t NextEpoch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<Notice> RevokeLocked(Endpoint& e, absl::string_view endpoint,
                                   absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropHolder(const Holder& h) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const absl::Time learning_until_;
  std::atomic<int64_t> revoking_{0};  // holders marked revoking
  absl::Mutex mu_;
  uint64_t epoch_counter_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Endpoint> endpoints_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<AgentKey, Agent> agents_ ABSL_GUARDED_BY(mu_);
};

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_LEASE_LEDGER_H_
