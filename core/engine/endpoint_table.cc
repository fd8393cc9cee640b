#include "core/engine/endpoint_table.h"

#include <algorithm>
#include <queue>
#include <utility>

namespace stagger::engine {

EndpointTable::EndpointTable(std::shared_ptr<const CompiledConfig> config)
    : shards_(new Shard[kNumShards]) {
  for (auto& c : by_state_) c.store(0, std::memory_order_relaxed);
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    shards_[i].config = config;
  }
}

EndpointTable::~EndpointTable() {
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    for (EndpointState* st : shards_[i].map) EndpointState::Delete(st);
    shards_[i].map.clear();
  }
}

std::shared_ptr<const CompiledConfig> EndpointTable::config() const {
  absl::MutexLock l(&shards_[0].mu);
  return shards_[0].config;
}

void EndpointTable::SetConfig(std::shared_ptr<const CompiledConfig> config) {
  // Each shard switches under its own lock; a decision holds its shard's
  // lock from start to end, so it sees one configuration, old or new.
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    shards_[i].config = config;
  }
}

EndpointState& EndpointTable::Acquire(Shard& s, absl::string_view key,
                                      size_t hash, absl::Time now,
                                      std::optional<EndpointState>* scratch,
                                      bool* untracked) {
  auto it = s.map.find(key, hash);
  if (it != s.map.end()) return **it;
  const int64_t max = s.config->config.limits.max_endpoints;
  if (!TryReservePlace(max)) {
    SweepFullShard(s, now);
    if (!TryReservePlace(max)) {
      *untracked = true;
      return scratch->emplace();  // config_generation 0: bound from fresh
    }
  }
  EndpointState* st = EndpointState::New(key);
  s.map.insert(st);
  by_state_[static_cast<int>(BreakerState::kClosed)].fetch_add(
      1, std::memory_order_relaxed);
  return *st;
}

bool EndpointTable::TryReservePlace(int64_t max) {
  int64_t n = tracked_.load(std::memory_order_relaxed);
  do {
    if (n >= max) return false;
  } while (!tracked_.compare_exchange_weak(n, n + 1,
                                           std::memory_order_relaxed));
  return true;
}

void EndpointTable::SweepFullShard(Shard& s, absl::Time now) {
  const int64_t t = absl::ToUnixNanos(now);
  if (t - s.last_full_sweep_ns <
      absl::ToInt64Nanoseconds(kFullTableSweepInterval)) {
    return;
  }
  s.last_full_sweep_ns = t;
  SweepShardLocked(s, now);
}

int64_t EndpointTable::SweepShardLocked(Shard& s, absl::Time now) {
  const int64_t idle =
      absl::ToInt64Nanoseconds(s.config->config.limits.idle_eviction);
  const int64_t cutoff = absl::ToUnixNanos(now) - idle;
  int64_t evicted = 0;
  for (auto it = s.map.begin(); it != s.map.end();) {
    EndpointState* st = *it;
    if (st->last_seen_ns < cutoff && !st->disabled) {
      by_state_[static_cast<int>(st->breaker.state())].fetch_sub(
          1, std::memory_order_relaxed);
      ReportForgotten(*st, now, condition_sink_);
      s.map.erase(it++);
      EndpointState::Delete(st);
      ++evicted;
    } else {
      ++it;
    }
  }
  tracked_.fetch_sub(evicted, std::memory_order_relaxed);
  evicted_total_.fetch_add(evicted, std::memory_order_relaxed);
  return evicted;
}

bool EndpointTable::Erase(absl::string_view key, absl::Time now) {
  size_t hash;
  Shard& shard = ShardFor(key, &hash);
  absl::MutexLock l(&shard.mu);
  auto it = shard.map.find(key, hash);
  if (it == shard.map.end()) return false;
  EndpointState* st = *it;
  by_state_[static_cast<int>(st->breaker.state())].fetch_sub(
      1, std::memory_order_relaxed);
  ReportForgotten(*st, now, condition_sink_);
  shard.map.erase(it);
  if (st->disabled) {  // the disable outlives the state
    EndpointState* fresh = EndpointState::New(key);
    fresh->disabled = 1;
    EndpointCondition reported;
    reported.disabled = true;
    fresh->reported_condition = reported.Pack();
    fresh->last_seen_ns = absl::ToUnixNanos(now);
    shard.config->Bind(*fresh, key);
    shard.map.insert(fresh);
    by_state_[static_cast<int>(BreakerState::kClosed)].fetch_add(
        1, std::memory_order_relaxed);
    EndpointState::Delete(st);
    return true;
  }
  EndpointState::Delete(st);
  tracked_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

int64_t EndpointTable::EvictIdle(absl::Time now) {
  int64_t evicted = 0;
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    evicted += SweepShardLocked(shards_[i], now);
  }
  return evicted;
}

void EndpointTable::Visit(
    absl::FunctionRef<void(const EndpointState&)> fn) const {
  for (int i = 0; i < kNumShards; ++i) {
    absl::MutexLock l(&shards_[i].mu);
    for (const EndpointState* st : shards_[i].map) fn(*st);
  }
}

void EndpointTable::VisitByShard(
    absl::FunctionRef<void(const EndpointState&, const PolicyParams&)> fn,
    absl::FunctionRef<void()> shard_done) const {
  for (int i = 0; i < kNumShards; ++i) {
    {
      absl::MutexLock l(&shards_[i].mu);
      const CompiledConfig& cfg = *shards_[i].config;
      for (const EndpointState* st : shards_[i].map) {
        fn(*st, cfg.Policy(cfg.IndexFor(*st, st->key())));
      }
    }
    shard_done();
  }
}

EndpointTable::InsertResult EndpointTable::InsertRestored(
    absl::string_view key,
    absl::FunctionRef<void(EndpointState&, const PolicyParams&)> restore) {
  size_t hash;
  Shard& s = ShardFor(key, &hash);
  absl::MutexLock l(&s.mu);
  if (s.map.find(key, hash) != s.map.end()) return InsertResult::kTracked;
  if (!TryReservePlace(s.config->config.limits.max_endpoints)) {
    return InsertResult::kFull;
  }
  EndpointState* st = EndpointState::New(key);
  restore(*st, s.config->Bind(*st, key));
  s.map.insert(st);
  by_state_[static_cast<int>(st->breaker.state())].fetch_add(
      1, std::memory_order_relaxed);
  return InsertResult::kInserted;
}

std::vector<std::string> EndpointTable::KeysAfter(
    absl::string_view after, size_t limit,
    absl::FunctionRef<bool(const EndpointState&)> keep) const {
  // The `limit` smallest matching keys above `after`, across shards: a
  // max-heap, so each shard is scanned once and only about `limit` keys
  // are copied.
  std::priority_queue<std::string> best;
  Visit([&](const EndpointState& st) {
    const absl::string_view key = st.key();
    if (key <= after || !keep(st)) return;
    if (best.size() >= limit) {
      if (limit == 0 || key >= best.top()) return;
      best.pop();
    }
    best.push(std::string(key));
  });
  std::vector<std::string> keys;
  keys.reserve(best.size());
  while (!best.empty()) {
    keys.push_back(best.top());
    best.pop();
  }
  std::reverse(keys.begin(), keys.end());
  return keys;
}

EngineStats EndpointTable::Stats() const {
  EngineStats s;
  s.tracked = tracked();
  s.evicted_total = evicted_total_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < by_state_.size(); ++i) {
    s.by_breaker_state[i] = by_state_[i].load(std::memory_order_relaxed);
  }
  return s;
}

}  // namespace stagger::engine
