#include "core/engine/pause_table.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stagger::engine {

namespace {

// The checks Set() and Restore() share; the error names the field.
absl::Status CheckTargetAndReason(const Pause& p) {
  const char* field = p.prefix ? "target.prefix" : "target.endpoint";
  if (p.target.empty() || p.target.size() > PauseTable::kMaxTargetBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be 1..", PauseTable::kMaxTargetBytes,
                     " bytes, got ", p.target.size()));
  }
  if (p.reason.empty() || p.reason.size() > PauseTable::kMaxReasonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("reason: must be 1..", PauseTable::kMaxReasonBytes,
                     " bytes, got ", p.reason.size()));
  }
  return absl::OkStatus();
}

absl::Status CheckDuration(absl::Duration duration) {
  if (duration <= absl::ZeroDuration() ||
      duration > PauseTable::kMaxPauseDuration) {
    return absl::InvalidArgumentError(absl::StrCat(
        "duration: must be > 0 and <= ",
        absl::FormatDuration(PauseTable::kMaxPauseDuration), ", got ",
        absl::FormatDuration(duration)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Pause> PauseTable::Set(std::string target, bool prefix,
                                      absl::Duration duration,
                                      std::string reason,
                                      std::string paused_by, absl::Time now,
                                      std::string id) {
  Pause p{std::move(target),    prefix, now, now + duration, std::move(reason),
          std::move(paused_by), std::move(id), ""};
  if (absl::Status s = CheckTargetAndReason(p); !s.ok()) return s;
  if (absl::Status s = CheckDuration(duration); !s.ok()) return s;
  if (absl::Status s = Insert(p, now); !s.ok()) return s;
  if (listener_) listener_(p, /*removed=*/false);
  return p;
}

absl::Status PauseTable::Restore(Pause pause, absl::Time now) {
  if (absl::Status s = CheckTargetAndReason(pause); !s.ok()) return s;
  if (absl::Status s = CheckDuration(pause.until - pause.since); !s.ok()) {
    return s;
  }
  if (pause.until <= now) {
    return absl::FailedPreconditionError(
        absl::StrCat("ended at ", absl::FormatTime(pause.until)));
  }
  if (absl::Status s = Insert(pause, now); !s.ok()) return s;
  if (listener_) listener_(pause, /*removed=*/false);
  return absl::OkStatus();
}

absl::Status PauseTable::Insert(Pause p, absl::Time now) {
  absl::MutexLock l(&mu_);
  SweepLocked(now);
  auto& table = p.prefix ? prefixes_ : keys_;
  if (!table.contains(p.target) && count_.load() >= kMaxPauses) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "at most ", kMaxPauses, " pauses may be in force; resume some first"));
  }
  table[p.target] = std::move(p);
  Recount();
  return absl::OkStatus();
}

absl::StatusOr<Pause> PauseTable::Remove(absl::string_view target, bool prefix,
                                         absl::Time now, std::string by) {
  absl::StatusOr<Pause> removed = RemoveLocked(target, prefix, now);
  if (removed.ok()) removed->ended_by = std::move(by);
  if (removed.ok() && listener_) listener_(*removed, /*removed=*/true);
  return removed;
}

absl::StatusOr<Pause> PauseTable::RemoveLocked(absl::string_view target,
                                               bool prefix, absl::Time now) {
  absl::MutexLock l(&mu_);
  SweepLocked(now);
  auto& table = prefix ? prefixes_ : keys_;
  auto it = table.find(target);
  if (it == table.end()) {
    return absl::NotFoundError(absl::StrCat(
        prefix ? "target.prefix" : "target.endpoint", ": no pause in force"));
  }
  Pause p = std::move(it->second);
  table.erase(it);
  Recount();
  return p;
}

absl::Time PauseTable::PausedUntil(absl::string_view key,
                                   absl::Time now) const {
  if (count_.load(std::memory_order_acquire) == 0) return absl::InfinitePast();
  absl::ReaderMutexLock l(&mu_);
  const Pause* p = FindLocked(key, now);
  return p == nullptr ? absl::InfinitePast() : p->until;
}

std::optional<Pause> PauseTable::Find(absl::string_view key,
                                      absl::Time now) const {
  if (count_.load(std::memory_order_acquire) == 0) return std::nullopt;
  absl::ReaderMutexLock l(&mu_);
  const Pause* p = FindLocked(key, now);
  if (p == nullptr) return std::nullopt;
  return *p;
}

std::vector<Pause> PauseTable::List(absl::Time now) const {
  std::vector<Pause> out;
  absl::ReaderMutexLock l(&mu_);
  for (const auto* table : {&keys_, &prefixes_}) {
    for (const auto& [unused, p] : *table) {
      if (p.until > now) out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end(), [](const Pause& a, const Pause& b) {
    return std::tie(a.prefix, a.target) < std::tie(b.prefix, b.target);
  });
  return out;
}

const Pause* PauseTable::FindLocked(absl::string_view key,
                                    absl::Time now) const {
  const Pause* best = nullptr;
  if (auto it = keys_.find(key); it != keys_.end() && it->second.until > now) {
    best = &it->second;
  }
  for (const auto& [prefix, p] : prefixes_) {
    if (p.until > now && absl::StartsWith(key, prefix) &&
        (best == nullptr || p.until > best->until)) {
      best = &p;
    }
  }
  return best;
}

void PauseTable::SweepLocked(absl::Time now) {
  for (auto* table : {&keys_, &prefixes_}) {
    absl::erase_if(*table, [now](const auto& kv) { return kv.second.until <= now; });
  }
  Recount();
}

void PauseTable::Recount() {
  count_.store(static_cast<int>(keys_.size() + prefixes_.size()),
               std::memory_order_release);
}

}  // namespace stagger::engine
