// DisableTable: the details of every disabled endpoint, and the counts of
// permanent failures behind the policy's disable.permanent_failures
// trigger. Whether an endpoint is disabled is a bit of its EndpointState
// (the decision path reads it, no lookup); this table holds what the bit
// cannot: since when, by what trigger, who and why. A disabled endpoint
// stays tracked until it is enabled (the engine keeps it out of eviction),
// so this table and the bits always name the same endpoints.
//
// Contract:
//  - Put() stores a disable (replacing the endpoint's, if any); refused
//    with ResourceExhausted when kMaxDisabled others are stored. Reasons
//    and identities over kMaxTextBytes are refused (InvalidArgument naming
//    the field) by whoever takes them from outside (the Admin service);
//    here they are truncated.
//  - Remove() ends one (nullopt if none); Find() and List() read.
//  - CountStrike(key, now, n, window): one permanent failure. True when it
//    is the n-th within `window` of the first counted (the count then
//    starts over). Counts of kMaxCounting endpoints at most: a new
//    endpoint beyond them sweeps the counts whose window has passed, and
//    is not counted if none has (a documented limit). ForgetStrikes(key):
//    a success ends the run.
//
//   DisableTable t;
//   t.CountStrike("https://a/", now, 3, absl::Hours(1));  // false
//   ...                                                    // 3rd: true
//
// Thread-safe; a leaf lock (never held while calling out). Time only from
// the caller.
#ifndef STAGGER_CORE_ENGINE_DISABLE_TABLE_H_
#define STAGGER_CORE_ENGINE_DISABLE_TABLE_H_

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/decision.h"

namespace stagger::engine {

struct Disable {
  std::string endpoint;
  DisableTrigger trigger = DisableTrigger::kOperator;
  absl::Time since = absl::InfinitePast();
  // The operator's reason, or what the trigger saw ("breaker away from
  // CLOSED for 72h", "5 permanent failures in 1h").
  std::string reason;
  // The operator's identity; empty for a trigger.
  std::string by;
  // The Admin request's operation id (the same on every replica it was
  // fanned out to); empty for a trigger.
  std::string operation_id;
};

// Who ended a disable (Engine::Enable).
struct Enable {
  std::string by;
  std::string reason;
  std::string operation_id;
};

class DisableTable {
 public:
  static constexpr int kMaxDisabled = 100000;
  static constexpr int kMaxCounting = 100000;
  static constexpr size_t kMaxTextBytes = 256;

  absl::Status Put(Disable d);
  std::optional<Disable> Remove(absl::string_view endpoint);
  std::optional<Disable> Find(absl::string_view endpoint) const;
  // Every disable, ordered by endpoint.
  std::vector<Disable> List() const;
  int size() const { return count_.load(std::memory_order_relaxed); }

  bool CountStrike(absl::string_view endpoint, absl::Time now, int n,
                   absl::Duration window);
  void ForgetStrikes(absl::string_view endpoint);
  int counting() const;

 private:
  struct Strikes {
    int count = 0;
    absl::Time first;
    absl::Time expires;  // first + window
  };
  void SweepStrikesLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Disable> disabled_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Strikes> strikes_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> count_{0};
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_DISABLE_TABLE_H_
