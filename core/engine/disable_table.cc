#include "core/engine/disable_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stagger::engine {
namespace {

void Truncate(std::string* s) {
  if (s->size() > DisableTable::kMaxTextBytes) {
    s->resize(DisableTable::kMaxTextBytes);
  }
}

}  // namespace

absl::Status DisableTable::Put(Disable d) {
  Truncate(&d.reason);
  Truncate(&d.by);
  Truncate(&d.operation_id);
  absl::MutexLock l(&mu_);
  auto it = disabled_.find(d.endpoint);
  if (it != disabled_.end()) {
    it->second = std::move(d);
    return absl::OkStatus();
  }
  if (disabled_.size() >= static_cast<size_t>(kMaxDisabled)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "endpoint: at most ", kMaxDisabled, " endpoints may be disabled"));
  }
  std::string key = d.endpoint;
  disabled_.emplace(std::move(key), std::move(d));
  count_.store(static_cast<int>(disabled_.size()), std::memory_order_relaxed);
  return absl::OkStatus();
}

std::optional<Disable> DisableTable::Remove(absl::string_view endpoint) {
  absl::MutexLock l(&mu_);
  auto it = disabled_.find(endpoint);
  if (it == disabled_.end()) return std::nullopt;
  Disable d = std::move(it->second);
  disabled_.erase(it);
  count_.store(static_cast<int>(disabled_.size()), std::memory_order_relaxed);
  return d;
}

std::optional<Disable> DisableTable::Find(absl::string_view endpoint) const {
  if (size() == 0) return std::nullopt;
  absl::ReaderMutexLock l(&mu_);
  auto it = disabled_.find(endpoint);
  if (it == disabled_.end()) return std::nullopt;
  return it->second;
}

std::vector<Disable> DisableTable::List() const {
  std::vector<Disable> out;
  {
    absl::ReaderMutexLock l(&mu_);
    out.reserve(disabled_.size());
    for (const auto& [key, d] : disabled_) out.push_back(d);
  }
  std::sort(out.begin(), out.end(), [](const Disable& a, const Disable& b) {
    return a.endpoint < b.endpoint;
  });
  return out;
}

bool DisableTable::CountStrike(absl::string_view endpoint, absl::Time now,
                               int n, absl::Duration window) {
  absl::MutexLock l(&mu_);
  auto it = strikes_.find(endpoint);
  if (it == strikes_.end()) {
    if (strikes_.size() >= static_cast<size_t>(kMaxCounting)) {
      SweepStrikesLocked(now);
      if (strikes_.size() >= static_cast<size_t>(kMaxCounting)) return false;
    }
    it = strikes_.emplace(std::string(endpoint), Strikes{}).first;
  }
  Strikes& s = it->second;
  if (s.count == 0 || now > s.expires) {  // a new run
    s.count = 0;
    s.first = now;
    s.expires = now + window;
  }
  if (++s.count < n) return false;
  strikes_.erase(it);
  return true;
}

void DisableTable::ForgetStrikes(absl::string_view endpoint) {
  absl::MutexLock l(&mu_);
  strikes_.erase(endpoint);
}

int DisableTable::counting() const {
  absl::ReaderMutexLock l(&mu_);
  return static_cast<int>(strikes_.size());
}

void DisableTable::SweepStrikesLocked(absl::Time now) {
  absl::erase_if(strikes_,
                 [now](const auto& kv) { return now > kv.second.expires; });
}

}  // namespace stagger::engine
