// EndpointTable: every tracked endpoint's state, sharded by key hash.
//
//  - 64 shards, one absl::Mutex each, no global lock: a decision holds only
//    its endpoint's shard lock, from lookup to the end of the decision, and
//    sees that shard's configuration (old or new during SetConfig, never a
//    mix). A lookup of a known endpoint allocates nothing.
//  - At limits.max_endpoints a new endpoint first sweeps its shard for idle
//    endpoints (at most once per second per shard); if the table is still
//    full it is decided from a fresh scratch state that is not stored
//    ("untracked").
//  - EvictIdle() drops endpoints idle longer than limits.idle_eviction
//    (never a disabled one: EndpointState::disabled);
//    Erase() drops one on an operator's request (Admin/ResetEndpoint).
//  - Counters (tracked, evicted, endpoints per breaker state) are atomics,
//    read without locks (Stats()); decisions report breaker transitions of
//    tracked endpoints through CountTransition().
//  - Visit() and KeysAfter() iterate shard by shard (for listing);
//    VisitByShard() and InsertRestored() serve the state file (export one
//    shard at a time; import a state restored from a record).
// Thread-safe.
#ifndef STAGGER_CORE_ENGINE_ENDPOINT_TABLE_H_
#define STAGGER_CORE_ENGINE_ENDPOINT_TABLE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/compiled_config.h"
#include "core/engine/decision.h"
#include "core/engine/endpoint_condition.h"
#include "core/engine/endpoint_state.h"
#include "core/engine/inspection.h"

namespace stagger::engine {

class EndpointTable {
 public:
  static constexpr int kNumShards = 64;  // power of two
  // A full table sweeps a shard for idle endpoints at most this often.
  static constexpr absl::Duration kFullTableSweepInterval = absl::Seconds(1);

  explicit EndpointTable(std::shared_ptr<const CompiledConfig> config);
  ~EndpointTable();
  EndpointTable(const EndpointTable&) = delete;
  EndpointTable& operator=(const EndpointTable&) = delete;

  // The configuration in force (the last one SetConfig installed).
  std::shared_ptr<const CompiledConfig> config() const;
  // Installs `config` shard by shard, each under its own lock. Callers
  // serialise SetConfig (two interleaved walks would mix configurations).
  void SetConfig(std::shared_ptr<const CompiledConfig> config);

  // Runs `fn(EndpointState&, const PolicyParams&, bool untracked)` on the
  // state of `key` (found, created, or scratch when the table is full),
  // bound to the shard's configuration and last seen at `now`, under the
  // shard's lock; returns what `fn` returns.
  template <typename Fn>
  auto WithState(absl::string_view key, absl::Time now, Fn fn);

  // Runs `fn(const EndpointState&, const CompiledConfig&)` under the
  // shard's lock if `key` is tracked; false if it is not. Changes nothing.
  template <typename Fn>
  bool WithTracked(absl::string_view key, Fn fn) const;

  // Runs `fn(EndpointState&, const PolicyParams&)` under the shard's lock
  // if `key` is tracked (its state bound to the shard's configuration, its
  // last-seen time untouched); false if it is not.
  template <typename Fn>
  bool WithTrackedMutable(absl::string_view key, Fn fn);

  // Forgets `key`'s state, as eviction does (not counted as evicted);
  // false if it is not tracked. A disabled endpoint stays tracked: a fresh
  // state that keeps only the disable takes its place, under the same lock
  // (so no decision sees it enabled).
  bool Erase(absl::string_view key, absl::Time now);

  // Told (ReportForgotten) about every state Erase or eviction drops whose
  // last reported condition was not clear. Set before use; null: none.
  void set_condition_sink(ConditionSink* sink) { condition_sink_ = sink; }

  // Calls `fn` on every tracked state, one shard at a time under its lock.
  void Visit(absl::FunctionRef<void(const EndpointState&)> fn) const;
  // The state file: calls `fn(state, policy)` on every tracked state of a
  // shard under its lock, then `shard_done()` without the lock; shard by
  // shard. `policy` is the one the state has under the configuration in
  // force.
  void VisitByShard(
      absl::FunctionRef<void(const EndpointState&, const PolicyParams&)> fn,
      absl::FunctionRef<void()> shard_done) const;
  enum class InsertResult { kInserted, kTracked, kFull };
  // The state file: tracks `key` with a new state bound to the
  // configuration in force and filled by `restore(state, policy)`, unless
  // `key` is tracked already or the table is at limits.max_endpoints.
  InsertResult InsertRestored(
      absl::string_view key,
      absl::FunctionRef<void(EndpointState&, const PolicyParams&)> restore);

  // The up to `limit` smallest keys > `after` whose state `keep` accepts,
  // in key order (copies only about `limit` keys).
  std::vector<std::string> KeysAfter(
      absl::string_view after, size_t limit,
      absl::FunctionRef<bool(const EndpointState&)> keep) const;

  // Evicts endpoints idle longer than limits.idle_eviction at `now`;
  // returns how many.
  int64_t EvictIdle(absl::Time now);

  // A tracked endpoint's breaker changed state.
  void CountTransition(const BreakerTransition& t) {
    by_state_[static_cast<int>(t.from)].fetch_sub(1, std::memory_order_relaxed);
    by_state_[static_cast<int>(t.to)].fetch_add(1, std::memory_order_relaxed);
  }
  int64_t tracked() const { return tracked_.load(std::memory_order_relaxed); }
  EngineStats Stats() const;

 private:
  // The table is a set of EndpointState pointers, hashed and compared by
  // key (a lookup allocates nothing). The hash is ShardFor's, so find()
  // reuses it.
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(absl::string_view k) const {
      return absl::Hash<absl::string_view>{}(k);
    }
    size_t operator()(const EndpointState* st) const {
      return (*this)(st->key());
    }
  };
  struct KeyEq {
    using is_transparent = void;
    static absl::string_view K(absl::string_view k) { return k; }
    static absl::string_view K(const EndpointState* st) { return st->key(); }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return K(a) == K(b);
    }
  };
  struct alignas(64) Shard {
    mutable absl::Mutex mu;
    // Owns the states (EndpointState::New).
    absl::flat_hash_set<EndpointState*, KeyHash, KeyEq> map
        ABSL_GUARDED_BY(mu);
    std::shared_ptr<const CompiledConfig> config ABSL_GUARDED_BY(mu);
    int64_t last_full_sweep_ns ABSL_GUARDED_BY(mu) = 0;
  };

  Shard& ShardFor(absl::string_view key, size_t* hash) const {
    *hash = absl::Hash<absl::string_view>{}(key);
    // High bits pick the shard; the map uses its own (low) bits.
    return shards_[(*hash >> 48) & (kNumShards - 1)];
  }
  // Finds or creates the state of `key`; `scratch` holds it when the table
  // is full (then *untracked is set).
  EndpointState& Acquire(Shard& s, absl::string_view key, size_t hash,
                         absl::Time now,
                         std::optional<EndpointState>* scratch,
                         bool* untracked) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Takes one of the table's `max` places, atomically across shards: two
  // shards inserting at once cannot both take the last place. False: full.
  bool TryReservePlace(int64_t max);
  // Sweeps a full table's shard, at most once per kFullTableSweepInterval.
  void SweepFullShard(Shard& s, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  int64_t SweepShardLocked(Shard& s, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  std::unique_ptr<Shard[]> shards_;
  std::atomic<int64_t> tracked_{0};
  std::atomic<int64_t> evicted_total_{0};
  ConditionSink* condition_sink_ = nullptr;
  std::array<std::atomic<int64_t>, kNumBreakerStates + 1> by_state_{};
};

template <typename Fn>
auto EndpointTable::WithState(absl::string_view key, absl::Time now, Fn fn) {
  size_t hash;
  Shard& shard = ShardFor(key, &hash);
  absl::MutexLock l(&shard.mu);
  std::optional<EndpointState> scratch;
  bool untracked = false;
  EndpointState& st = Acquire(shard, key, hash, now, &scratch, &untracked);
  const PolicyParams& policy = shard.config->Bind(st, key);
  st.last_seen_ns = absl::ToUnixNanos(now);
  return fn(st, policy, untracked);
}

template <typename Fn>
bool EndpointTable::WithTracked(absl::string_view key, Fn fn) const {
  size_t hash;
  Shard& shard = ShardFor(key, &hash);
  absl::MutexLock l(&shard.mu);
  auto it = shard.map.find(key, hash);
  if (it == shard.map.end()) return false;
  fn(static_cast<const EndpointState&>(**it),
     static_cast<const CompiledConfig&>(*shard.config));
  return true;
}

template <typename Fn>
bool EndpointTable::WithTrackedMutable(absl::string_view key, Fn fn) {
  size_t hash;
  Shard& shard = ShardFor(key, &hash);
  absl::MutexLock l(&shard.mu);
  auto it = shard.map.find(key, hash);
  if (it == shard.map.end()) return false;
  EndpointState& st = **it;
  fn(st, shard.config->Bind(st, key));
  return true;
}

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_ENDPOINT_TABLE_H_
