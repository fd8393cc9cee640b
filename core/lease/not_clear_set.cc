#include "core/lease/not_clear_set.h"

#include <algorithm>
#include <utility>

namespace stagger::lease {
namespace {

uint32_t Bit(Why w) { return uint32_t{1} << static_cast<int>(w); }

bool KeyLess(const EntryKey& a, const EntryKey& b) {
  return a.scope != b.scope ? a.scope < b.scope : a.target < b.target;
}

}  // namespace

NotClearSet::NotClearSet(uint64_t incarnation, absl::Duration hold,
                         absl::Duration stand_in_idle)
    : incarnation_(incarnation), hold_(hold), stand_in_idle_(stand_in_idle) {}

void NotClearSet::Changed(const EntryKey& key) { pending_.insert(key); }

uint64_t NotClearSet::Enter(const EntryKey& key, Why reason, absl::Time until,
                            absl::Time now) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    Entry e;
    e.entry.key = key;
    e.entry.why = reason;
    e.entry.until = until;
    e.version = ++version_;
    if (reason == Why::kStandingIn) e.stand_in_since = now;
    it = entries_.emplace(key, std::move(e)).first;
    Changed(key);
  }
  Entry& e = it->second;
  e.reasons |= Bit(reason);
  e.clear_since = absl::InfiniteFuture();
  if (reason == Why::kPaused) e.pause_until = until;
  if (reason == Why::kStandingIn) e.stand_in_used = now;
  // Kept up to date for a later snapshot; not pushed on its own.
  if (e.entry.why == reason) e.entry.until = until;
  return e.version;
}

void NotClearSet::ExitLocked(Entry& e, Why reason, absl::Time at) {
  if ((e.reasons & Bit(reason)) == 0) return;
  e.reasons &= ~Bit(reason);
  if (e.reasons == 0) e.clear_since = at;
}

void NotClearSet::Exit(const EntryKey& key, Why reason, absl::Time now) {
  auto it = entries_.find(key);
  if (it != entries_.end()) ExitLocked(it->second, reason, now);
}

void NotClearSet::Forget(const EntryKey& key) {
  if (entries_.erase(key) == 0) return;
  ++version_;
  Changed(key);
}

void NotClearSet::SetConfig(SharedConfig config) {
  config_ = std::move(config);
  ++version_;
  config_pending_ = true;
}

void NotClearSet::Sweep(absl::Time now) {
  std::vector<EntryKey> leaving;
  for (auto& [key, e] : entries_) {
    if ((e.reasons & Bit(Why::kPaused)) != 0 && e.pause_until <= now) {
      ExitLocked(e, Why::kPaused, e.pause_until);
    }
    if ((e.reasons & Bit(Why::kStandingIn)) != 0 &&
        e.stand_in_used + stand_in_idle_ <= now) {
      ExitLocked(e, Why::kStandingIn, e.stand_in_used + stand_in_idle_);
    }
    if (e.reasons == 0 && e.clear_since + hold_ <= now) leaving.push_back(key);
  }
  // In key order: versions come out the same whatever the table's order.
  std::sort(leaving.begin(), leaving.end(), KeyLess);
  for (const EntryKey& key : leaving) Forget(key);
}

absl::Time NotClearSet::NextSweep() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [key, e] : entries_) {
    if ((e.reasons & Bit(Why::kPaused)) != 0) next = std::min(next, e.pause_until);
    if ((e.reasons & Bit(Why::kStandingIn)) != 0) {
      next = std::min(next, e.stand_in_used + stand_in_idle_);
    }
    if (e.reasons == 0) next = std::min(next, e.clear_since + hold_);
  }
  return next;
}

std::optional<SetDelta> NotClearSet::TakeDelta() {
  if (pending_.empty() && !config_pending_) return std::nullopt;
  SetDelta d;
  d.incarnation = incarnation_;
  d.from_version = pushed_version_;
  d.to_version = version_;
  for (const EntryKey& key : pending_) {
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      d.added.push_back(it->second.entry);
    } else {
      d.removed.push_back(key);
    }
  }
  std::sort(d.added.begin(), d.added.end(),
            [](const NotClearEntry& a, const NotClearEntry& b) {
              return KeyLess(a.key, b.key);
            });
  std::sort(d.removed.begin(), d.removed.end(), KeyLess);
  if (config_pending_) d.config = config_;
  pending_.clear();
  config_pending_ = false;
  pushed_version_ = version_;
  return d;
}

SetSnapshot NotClearSet::Snapshot() const {
  SetSnapshot s;
  s.incarnation = incarnation_;
  s.version = version_;
  s.entries.reserve(entries_.size());
  for (const auto& [key, e] : entries_) s.entries.push_back(e.entry);
  s.config = config_;
  return s;
}

NotClearSet::Entry* NotClearSet::Find(const EntryKey& key) {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

const NotClearSet::Entry* NotClearSet::Find(const EntryKey& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace stagger::lease
