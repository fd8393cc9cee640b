#include "core/lease/count_book.h"

#include <algorithm>
#include <utility>

#include "core/lease/planted.h"

namespace stagger::lease {

void CountBook::Count(absl::string_view key, bool first_attempt,
                      absl::Time at, uint64_t clock) {
  if (pending_.empty()) {
    pending_clock_ = clock;
  } else if (pending_clock_ != clock) {
    pending_clock_ = 0;  // two clocks in one report: order unknown
  }
  const absl::Time start =
      absl::UnixEpoch() + absl::Floor(at - absl::UnixEpoch(), kBucket);
  std::vector<CountBucket>& buckets = pending_[key];
  if (buckets.empty() || buckets.back().start < start) {
    buckets.push_back(CountBucket{start, 0, 0});
  }
  CountBucket& b = buckets.back();
  b.start = std::min(b.start, start);  // a lower bound of all it holds
  if (first_attempt) {
    ++b.first_attempts;
  } else {
    ++b.successes;
    b.last_success = std::max(b.last_success, std::max(at, b.start));
  }
  if (buckets.size() > kMaxBucketsPerEndpoint) {
    // Fold the oldest two: never more than a message may carry.
    CountBucket& keep = buckets[1];
    keep.start = buckets[0].start;
    keep.first_attempts += buckets[0].first_attempts;
    keep.successes += buckets[0].successes;
    buckets.erase(buckets.begin());
  }
}

CountReport CountBook::Number(std::vector<EndpointCounts> endpoints) {
  CountReport r;
  r.seq = next_seq_++;
  r.clock_incarnation = pending_clock_;
  r.endpoints = std::move(endpoints);
  return r;
}

void CountBook::Keep(const CountReport& r) {
  unacked_.push_back(r);
  if (Planted().drop_count_report && r.seq % 7 == 3) {
    unacked_.pop_back();  // the hole: gone, and nobody is told
    return;
  }
  if (unacked_.size() > kMaxUnacked) {
    const uint64_t lost = unacked_.front().lost + 1;
    unacked_.pop_front();
    unacked_.front().lost += lost;
    ++dropped_;
  }
}

std::optional<CountReport> CountBook::TakeReport() {
  if (pending_.empty()) return std::nullopt;
  std::vector<EndpointCounts> endpoints;
  endpoints.reserve(pending_.size());
  for (auto& [key, buckets] : pending_) {
    endpoints.push_back({key, std::move(buckets)});
    if (endpoints.size() == kMaxItemsPerMessage) break;
  }
  for (const EndpointCounts& e : endpoints) pending_.erase(e.endpoint);
  CountReport r = Number(std::move(endpoints));
  Keep(r);
  if (Planted().drop_count_report && r.seq % 7 == 3) {
    return std::nullopt;  // never sent either
  }
  return r;
}

std::optional<CountReport> CountBook::TakeFor(absl::string_view key) {
  auto it = pending_.find(key);
  if (it == pending_.end()) return std::nullopt;
  std::vector<EndpointCounts> one;
  one.push_back({std::string(key), std::move(it->second)});
  pending_.erase(it);
  CountReport r = Number(std::move(one));
  Keep(r);
  return r;
}

void CountBook::OnApplied(uint64_t seq) {
  applied_ = std::max(applied_, seq);
  while (!unacked_.empty() && unacked_.front().seq <= seq) {
    unacked_.pop_front();
  }
}

std::vector<CountReport> CountBook::Unacked() const {
  return {unacked_.begin(), unacked_.end()};
}

}  // namespace stagger::lease
