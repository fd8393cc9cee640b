// PauseTable: the operators' pauses (stagger.v1.Admin/Pause), one per
// target: an endpoint key, or a key prefix covering every endpoint that
// starts with it. While a pause is in force, every decision for an
// endpoint it covers is DEFER(PAUSED) until the pause ends (the engine's
// first gate). Pauses are not endpoint state: they survive config reloads,
// eviction and ResetEndpoint, and cover endpoints not tracked yet.
//
// Contract:
//  - Set() replaces the target's pause if it has one; Restore() puts back
//    one a state file kept (absolute since/until), under the same checks. Refused with
//    InvalidArgument naming the field: an empty target, a target over
//    kMaxTargetBytes, a duration <= 0 or over kMaxPauseDuration, an empty
//    reason or one over kMaxReasonBytes; ResourceExhausted when kMaxPauses
//    are in force (expired pauses are swept first).
//  - A pause ends at `until` (exclusive): from then on it is as if it did
//    not exist. Remove() ends one now (NotFound if none in force).
//  - PausedUntil(key, now): the latest `until` among the pauses covering
//    `key` that are in force at `now`; InfinitePast if none. With no pause
//    in force anywhere it costs one atomic load (the decision path calls it
//    for every decision); otherwise a reader lock, one hash lookup and a
//    scan of the prefix pauses (few: operators set them by hand).
//  - Find(key, now): the covering pause ending last, for inspection.
//
// Thread-safe. Time only from the caller (`now`), so tests use FakeClock.
#ifndef STAGGER_CORE_ENGINE_PAUSE_TABLE_H_
#define STAGGER_CORE_ENGINE_PAUSE_TABLE_H_

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace stagger::engine {

struct Pause {
  std::string target;  // endpoint key, or key prefix if `prefix`
  bool prefix = false;
  absl::Time since = absl::InfinitePast();
  absl::Time until = absl::InfinitePast();
  std::string reason;
  std::string paused_by;  // caller identity
  // Names the pause to watchers (stagger.v1.Pause.pause_id): the Admin
  // request's operation id, the same on every replica an operator's
  // command reached. Empty: none given.
  std::string id;
  // Remove(): who ended it (its `by`); empty otherwise.
  std::string ended_by;
};

class PauseTable {
 public:
  static constexpr int kMaxPauses = 10000;
  static constexpr size_t kMaxTargetBytes = 4096;
  static constexpr size_t kMaxReasonBytes = 256;
  static constexpr absl::Duration kMaxPauseDuration = absl::Hours(24 * 30);

  // The pause as stored (since = now, until = now + duration).
  absl::StatusOr<Pause> Set(std::string target, bool prefix,
                            absl::Duration duration, std::string reason,
                            std::string paused_by, absl::Time now,
                            std::string id = "");
  // A pause as saved by another process (server/state/): its own `since`
  // and `until`. Refused as Set() refuses (target, reason, a span over
  // kMaxPauseDuration, kMaxPauses); FailedPrecondition if it has ended by
  // `now` (then it is not kept).
  absl::Status Restore(Pause pause, absl::Time now);
  // The pause that was ended (its ended_by = `by`, the caller).
  absl::StatusOr<Pause> Remove(absl::string_view target, bool prefix,
                               absl::Time now, std::string by = "");

  // Told of every pause stored (Set, Restore) and removed (Remove), after
  // the table changed and outside its lock. A pause that runs out is not
  // told: it ends at its `until`. Set before use; must not call back into
  // the table's writers.
  using Listener = std::function<void(const Pause& pause, bool removed)>;
  void set_listener(Listener l) { listener_ = std::move(l); }

  absl::Time PausedUntil(absl::string_view key, absl::Time now) const;
  std::optional<Pause> Find(absl::string_view key, absl::Time now) const;
  // Every pause in force, ordered by (prefix, target).
  std::vector<Pause> List(absl::Time now) const;

 private:
  // Stores `p` (replacing the target's pause), unless the table is full.
  absl::Status Insert(Pause p, absl::Time now);
  absl::StatusOr<Pause> RemoveLocked(absl::string_view target, bool prefix,
                                     absl::Time now);
  void SweepLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Pause* FindLocked(absl::string_view key, absl::Time now) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Recount() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Listener listener_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pause> keys_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Pause> prefixes_ ABSL_GUARDED_BY(mu_);
  // keys_.size() + prefixes_.size(), readable without the lock.
  std::atomic<int> count_{0};
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_PAUSE_TABLE_H_
