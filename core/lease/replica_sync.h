// ReplicaSync: a coordinator replica's side of the lease stream
// (messages.h; proto/stagger/v1/sync.proto), as plain code on injected
// clocks. staggerd drives it from gRPC (server/service/sync_service.h);
// the protocol simulator drives the same object from its simulated
// network (bench/protocol_sim).
//
// What it keeps:
//   * The not-clear set (not_clear_set.h), fed by the engine's condition
//     changes (OnConditionChange: it is the engine's ConditionSink), the
//     operators' pauses (OnPause), the configuration (OnConfig) and the
//     keys it decides for another member (OnStandIn).
//   * One record per stream: its agent, its lease's end on this replica's
//     monotonic clock, and when each of its acknowledgements arrived.
//   * Per agent incarnation: the count reports applied (each seq once, in
//     order; a gap not declared lost ends the stream).
//
// The rules:
//   * Open(hello): a snapshot goes down first. A stream gets a lease only
//     if its agent names the same members as this replica.
//   * Receive(up): every message up asks for a renewal of its stream's
//     lease: ttl from when the agent sent it. It is granted unless the
//     replica is in its learning period after start (one ttl, and at least
//     the longest probe_timeout: a probe the previous incarnation admitted
//     after its last state save may still be in flight), or the agent's
//     copy of the set lacks a version that every other lease already
//     holds (safe_floor).
//   * ProbeHeld(key): a half-open probe on `key` waits until every lease
//     that could still admit locally on it has stopped: acknowledged the
//     entry that took `key` out of clear, or ended; then SendBound of the
//     largest initial jitter more, for local admissions still in their
//     delay. Also held: the first ttl after start, and a key this replica
//     decides for another member until one ttl after it announced that.
//   * Tick(): time-driven condition changes are looked for (at most every
//     kRefreshInterval), entries whose hold ran out leave, and the changes
//     since the last tick go out as one delta for every stream. Call it by
//     NextTick(); changes wait at most kCoalesce for it.
// Thread-safe. Lock order: the engine's shard lock, then this object's;
// it never calls the engine while holding its own lock.
#ifndef STAGGER_CORE_LEASE_REPLICA_SYNC_H_
#define STAGGER_CORE_LEASE_REPLICA_SYNC_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/clock.h"
#include "core/engine/endpoint_condition.h"
#include "core/engine/engine.h"
#include "core/engine/pause_table.h"
#include "core/lease/ack_history.h"
#include "core/lease/messages.h"
#include "core/lease/not_clear_set.h"

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

class ReplicaSync : public engine::ConditionSink {
 public:
  static constexpr absl::Duration kCoalesce = absl::Milliseconds(5);
  static constexpr absl::Duration kRefreshInterval = absl::Milliseconds(250);
  // An agent incarnation silent this long is forgotten (its count seq).
  static constexpr absl::Duration kForgetAgent = absl::Minutes(10);

  struct Options {
    absl::Duration ttl = absl::Seconds(2);       // > 0
    bool grant = true;  // false: no lease ever (every agent asks centrally)
    absl::Duration clear_hold = absl::Seconds(5);
    absl::Duration stand_in_idle = absl::Seconds(30);
    uint64_t incarnation = 0;  // != 0, new at every start
    // The members by name; empty: one replica that owns every key.
    std::vector<std::string> members;
    std::string self;  // one of `members` (if any)
    // The member (index into `members`) that owns a key. Required with
    // members.
    std::function<size_t(absl::string_view key)> owner_of;
  };
  struct Stats {
    int64_t streams = 0;      // open now
    int64_t leases = 0;       // live now
    int64_t entries = 0;      // in the set
    uint64_t version = 0;
    int64_t counts_applied = 0;  // reports, since start
    int64_t counts_lost = 0;     // reports agents declared lost
    int64_t counts_duplicate = 0;  // re-sent after applied: not applied
    int64_t renewals = 0;        // stream leases renewed, since start
  };

  // `engine` must outlive this object; `mono` is this replica's monotonic
  // clock (the engine keeps its own clock for endpoint state and
  // Down::replica_time). Starts in learning mode: see the rules above.
  ReplicaSync(Options options, engine::Engine* engine,
              const engine::Clock* mono);

  // Installs this object as the engine's probe hold and reads the engine's
  // configuration; with `feeds`, also as its condition sink and pause
  // listener. A daemon that fans the engine's feeds out to several readers
  // passes false and adds this object to its fan-outs (OnConditionChange,
  // OnPause) before the engine's first change.
  void AttachToEngine(bool feeds = true);

  struct Opened {
    uint64_t stream = 0;
    Down first;  // the snapshot, and a renewal if one is due
  };
  // `first` carries the hello (and may carry an acknowledgement and counts,
  // as any message up). InvalidArgument naming the bad field of the hello,
  // or FailedPrecondition for another protocol version.
  // `bound_id`: the name the replica knows the agent by, when the caller
  // bound the hello's agent_id to the peer's identity
  // (server/service/agent_identity.h); it keys the agent's count seqs and
  // its streams' records. nullopt: the hello's agent_id as sent.
  absl::StatusOr<Opened> Open(
      const Up& first, std::optional<std::string> bound_id = std::nullopt);
  // InvalidArgument for a bad message, FailedPrecondition for a count gap
  // (the stream must then end); the answer otherwise (it may be empty).
  absl::StatusOr<Down> Receive(uint64_t stream, const Up& up);
  // The stream ended; its lease record stays until the lease has ended.
  void Close(uint64_t stream);
  // A snapshot for `stream` (its pushes were dropped: it fell behind).
  Down Resync(uint64_t stream);

  std::optional<Down> Tick();
  absl::Time NextTick() const;

  void OnConditionChange(const engine::ConditionChange& c) override;
  void OnPause(const engine::Pause& p, bool removed);
  void OnConfig(engine::EngineConfig config);
  // This replica is deciding a key that `owner` owns (the agent could not
  // reach it). Call before the decision.
  void OnStandIn(absl::string_view owner);
  bool ProbeHeld(absl::string_view key);

  // Told when a change is first pending since the last Tick (a pusher
  // sleeping toward a later NextTick should wake). Runs under this
  // object's lock: only set a flag or signal a leaf lock. Set before use.
  void set_on_pending(std::function<void()> fn) { on_pending_ = std::move(fn); }

  // Told of every count report applied (before the engine learns it),
  // outside this object's lock: metrics, and the simulator's checks. Set
  // before streams open.
  using CountsObserver = std::function<void(
      const AgentKey& agent, const CountReport& report)>;
  void set_counts_observer(CountsObserver o) { counts_observer_ = std::move(o); }
  // Trims a count report before it is applied (once per seq, outside this
  // object's lock, before the observer): the caller's caps on an agent's
  // counts (server/service/count_guard.h). Set before streams open; null:
  // every count is applied.
  using CountsFilter =
      std::function<void(const AgentKey& agent, CountReport* report)>;
  void set_counts_filter(CountsFilter f) { counts_filter_ = std::move(f); }

  Stats stats() const;
  absl::Duration ttl() const { return options_.ttl; }
  uint64_t incarnation() const { return options_.incarnation; }

 private:
  struct Stream {
    AgentKey agent;
    bool open = true;
    bool members_match = false;
    absl::Time expires = absl::InfinitePast();  // never granted
    // Its renewals: (the set's version they carried, their end), oldest
    // first, one per version. An agent takes a renewal only with a copy at
    // least that new, so a renewal at v or later never lets it admit on an
    // entry of version v (LeasedBefore).
    std::deque<std::pair<uint64_t, absl::Time>> renewals;
    AckHistory acks;
    uint64_t snapshot_version = 0;  // the last snapshot sent on it
    // The end of the last renewal at a version below `version`
    // (InfinitePast: none).
    absl::Time LeasedBefore(uint64_t version) const;
  };
  // Renewals kept exactly per stream; older ones fold into one, which may
  // only move an answer later.
  static constexpr size_t kRecentRenewals = 16;
  struct Agent {
    uint64_t applied_seq = 0;
    absl::Time last_seen;
  };
  // What Receive must apply to the engine once it let go of its lock.
  struct Apply {
    AgentKey agent;
    std::optional<CountReport> report;
  };

  absl::Status CheckHello(const Hello& h) const;
  bool MembersMatch(const std::vector<std::string>& theirs) const;
  // Counts: whether to apply `r` (Apply gets them), or the gap's error.
  absl::Status TakeCounts(Stream& s, const CountReport& r, Down* down,
                          Apply* apply) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Receive's work under the lock: acknowledgement, counts, resync,
  // renewal.
  absl::Status ReceiveLocked(Stream& s, const Up& up, absl::Time now,
                             Down* down, Apply* apply)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Renew(Stream& s, uint64_t number, absl::Time now, Down* down)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyCounts(Apply& apply);
  // When probes on an entry of `version` are safe: InfiniteFuture if some
  // lease could still be admitting on it (it has neither acknowledged
  // the version nor ended). `own`: an entry of keys this replica's leases
  // answer for (an endpoint or a prefix), so only renewals at an older
  // version count; else (a member's keys, answered under their owner's
  // leases, or no entry) every renewal counts.
  absl::Time SafeAt(uint64_t version, bool own, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HeldOn(NotClearSet::Entry* e, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnterLocked(const EntryKey& key, Why why, absl::Time until,
                   absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SweepStreams(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time Now() const { return mono_->Now(); }

  const Options options_;
  engine::Engine* const engine_;
  const engine::Clock* const mono_;
  const absl::Time start_;
  CountsObserver counts_observer_;
  CountsFilter counts_filter_;
  std::function<void()> on_pending_;
  // A change is pending since `at` (wakes the pusher on the first one).
  void Pending(absl::Time at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  NotClearSet set_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<AgentKey, Agent> agents_ ABSL_GUARDED_BY(mu_);
  uint64_t next_stream_ ABSL_GUARDED_BY(mu_) = 1;
  // The largest version some probe found every lease holding: a lease is
  // renewed only for a copy that holds it too.
  uint64_t safe_floor_ ABSL_GUARDED_BY(mu_) = 0;
  // SendBound of the largest initial jitter any configuration had.
  absl::Duration send_bound_ ABSL_GUARDED_BY(mu_);
  // No lease before: one ttl after start, and past the longest probe
  // timeout (a probe the last incarnation admitted may be in flight).
  absl::Time grant_from_ ABSL_GUARDED_BY(mu_);
  absl::Time last_refresh_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time last_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time first_pending_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // Planted "check then act": entries waiting for the next scan.
  static constexpr absl::Duration kLateEntryScan = absl::Seconds(2);
  struct LateEntry {
    EntryKey key;
    Why why;
    absl::Time at;
  };
  std::vector<LateEntry> late_entries_ ABSL_GUARDED_BY(mu_);
  int64_t counts_applied_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t counts_lost_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t counts_duplicate_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t renewals_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_REPLICA_SYNC_H_
