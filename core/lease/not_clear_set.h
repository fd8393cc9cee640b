// NotClearSet: one replica's set of what is not clear (keys, prefixes and
// members), versioned, as it is pushed to agents (messages.h, SetSnapshot
// and SetDelta).
//
//   * Enter(key, reason, until, now): the key is not clear for `reason`.
//     A key not in the set enters at once with a new version (the version
//     a probe on it waits for every agent to acknowledge). A key already
//     in it keeps its version and its first `why`: changes within not
//     clear (OPEN to HALF_OPEN, a pause on a tripped key) are not pushed.
//   * Exit(key, reason, now): that reason ended. A key with no reason left
//     stays in the set for `hold` more (hysteresis: a key near a
//     threshold does not flap in and out), then leaves with a new version
//     at the next Sweep. Entering again meanwhile cancels the leaving.
//   * Forget(key): leaves at once with a new version (an evicted key).
//   * SetConfig(config): a new version that carries the configuration.
//   * Sweep(now): keys whose hold ran out leave; pauses and stand-ins whose
//     time is up end first (Exit).
//   * TakeDelta(): every change since the last delta as one delta (none:
//     nullopt). Snapshot(): the whole set at the current version.
// Versions start at 1 (the empty set) and only rise. Not thread-safe: the
// owner (ReplicaSync) locks.
#ifndef STAGGER_CORE_LEASE_NOT_CLEAR_SET_H_
#define STAGGER_CORE_LEASE_NOT_CLEAR_SET_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "core/lease/messages.h"

namespace stagger::lease {

class NotClearSet {
 public:
  // An entry's state on the replica.
  struct Entry {
    NotClearEntry entry;
    uint64_t version = 0;   // when it entered (this time)
    uint32_t reasons = 0;   // bit (1 << Why) per reason in force
    // No reason left since then: leaves at clear_since + hold.
    absl::Time clear_since = absl::InfiniteFuture();
    // kPaused: when the pause ends. kStandingIn: when it was last used.
    absl::Time pause_until = absl::InfinitePast();
    absl::Time stand_in_used = absl::InfinitePast();
    absl::Time stand_in_since = absl::InfinitePast();
    // The probe gate's cache (ReplicaSync): when probes on it became safe.
    absl::Time safe_at = absl::InfiniteFuture();
  };

  NotClearSet(uint64_t incarnation, absl::Duration hold,
              absl::Duration stand_in_idle);

  uint64_t Enter(const EntryKey& key, Why reason, absl::Time until,
                 absl::Time now);
  void Exit(const EntryKey& key, Why reason, absl::Time now);
  void Forget(const EntryKey& key);
  void SetConfig(SharedConfig config);
  // A stand-in ends once unused this long (at least the longest a probe
  // it admitted may be in flight).
  void set_stand_in_idle(absl::Duration d) { stand_in_idle_ = d; }
  void Sweep(absl::Time now);

  std::optional<SetDelta> TakeDelta();
  SetSnapshot Snapshot() const;

  Entry* Find(const EntryKey& key);
  const Entry* Find(const EntryKey& key) const;
  uint64_t version() const { return version_; }
  // The version the last delta went out at: every stream holds it (or a
  // later snapshot) once the delta reached it.
  uint64_t pushed_version() const { return pushed_version_; }
  uint64_t incarnation() const { return incarnation_; }
  size_t size() const { return entries_.size(); }
  const SharedConfig& config() const { return config_; }
  // The earliest instant Sweep has something to do (InfiniteFuture: none).
  absl::Time NextSweep() const;
  template <typename Fn>
  void ForEach(Fn fn) const {
    for (const auto& [k, e] : entries_) fn(e);
  }

 private:
  void Changed(const EntryKey& key);
  void ExitLocked(Entry& e, Why reason, absl::Time at);

  const uint64_t incarnation_;
  const absl::Duration hold_;
  absl::Duration stand_in_idle_;
  uint64_t version_ = 1;
  absl::flat_hash_map<EntryKey, Entry> entries_;
  SharedConfig config_;
  // Since the last TakeDelta: keys that entered or left, whether the
  // configuration changed, and the version the last delta ended at.
  absl::flat_hash_set<EntryKey> pending_;
  bool config_pending_ = false;
  uint64_t pushed_version_ = 1;
};

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_NOT_CLEAR_SET_H_
