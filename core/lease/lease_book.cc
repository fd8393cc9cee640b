#include "core/lease/lease_book.h"

#include <algorithm>
#include <utility>

#include "core/engine/admission.h"
#include "core/engine/backoff.h"

namespace stagger::lease {

bool LeaseBook::Live(const Entry& e, absl::Time now) {
  return e.lease.has_value() && now < e.lease->expires;
}

bool LeaseBook::AskDue(const Entry& e, absl::Time now) {
  if (!e.wants) return false;
  const absl::Duration every = Live(e, now) ? kRenewInterval : kAskInterval;
  return now - e.last_ask >= every;
}

void LeaseBook::Count(Entry& e, absl::Time now, bool first_attempt) {
  const absl::Time start =
      absl::UnixEpoch() + absl::Floor(now - absl::UnixEpoch(), kBucket);
  if (e.pending.empty() || e.pending.back().at != start) {
    e.pending.push_back(engine::LateCounts{start, 0, 0});
  }
  engine::LateCounts& b = e.pending.back();
  if (first_attempt) {
    ++b.first_attempts;
  } else {
    ++b.successes;
    b.last_success = now;
  }
}

void LeaseBook::MaybeRenew(Entry& e, absl::Time now) {
  const Lease& l = *e.lease;
  if (now - l.granted >= (l.expires - l.granted) / 2 ||
      l.left <= l.allowance / 2) {
    e.wants = true;
  }
}

std::optional<engine::Decision> LeaseBook::Admit(const engine::AdmitInput& in,
                                                 absl::Time now,
                                                 absl::BitGenRef rng) {
  if (in.attempt != 1) return std::nullopt;
  absl::MutexLock l(&mu_);
  Entry& e = entries_[in.endpoint];
  if (!Live(e, now) || e.lease->left == 0 || now > in.deadline) {
    e.wants = true;
    return std::nullopt;
  }
  --e.lease->left;
  MaybeRenew(e, now);
  Count(e, now, /*first_attempt=*/true);
  engine::Decision d;
  d.verdict = engine::Verdict::kProceed;
  d.reason = engine::Reason::kInitialJitter;
  d.delay = engine::UniformDuration(rng, e.lease->initial_jitter);
  d.attempt = 1;
  d.admission = engine::kLocalAdmission;
  return d;
}

std::optional<engine::Decision> LeaseBook::Report(
    const engine::ReportInput& in, absl::Time now) {
  if (in.outcome != engine::Outcome::kSuccess ||
      (in.admission & engine::kProbeAdmissionBit) != 0) {
    return std::nullopt;
  }
  absl::MutexLock l(&mu_);
  auto it = entries_.find(in.endpoint);
  if (it == entries_.end() || !Live(it->second, now)) return std::nullopt;
  Count(it->second, now, /*first_attempt=*/false);
  engine::Decision d;
  d.verdict = engine::Verdict::kDone;
  d.reason = engine::Reason::kSucceeded;
  d.attempt = in.attempt;
  return d;
}

CountReport LeaseBook::NewReport() {
  CountReport r;
  r.seq = next_seq_++;
  return r;
}

void LeaseBook::Keep(CountReport r) {
  unacked_.push_back(std::move(r));
  while (unacked_.size() > kMaxUnacked) unacked_.pop_front();
}

LeaseBook::Outgoing LeaseBook::TakeOutgoing(absl::Time now, bool flush) {
  absl::MutexLock l(&mu_);
  Outgoing out;
  out.acks.swap(acks_);
  CountReport report = NewReport();
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    if (AskDue(e, now) && out.asks.size() < kMaxItemsPerMessage) {
      out.asks.push_back(it->first);
      e.last_ask = now;
      e.wants = false;
    }
    if (flush && !e.pending.empty() &&
        report.endpoints.size() < kMaxItemsPerMessage) {
      report.endpoints.push_back({it->first, std::move(e.pending)});
      e.pending.clear();
    }
    const bool idle = !Live(e, now) && e.pending.empty() && !e.wants &&
                      now - e.last_ask >= kAskInterval;
    if (idle) {
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
  if (report.endpoints.empty()) {
    --next_seq_;  // nothing to number
  } else {
    out.counts = report;
    Keep(std::move(report));
  }
  return out;
}

std::optional<CountReport> LeaseBook::TakeCountsFor(
    absl::string_view endpoint) {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(endpoint);
  if (it == entries_.end() || it->second.pending.empty()) return std::nullopt;
  CountReport r = NewReport();
  r.endpoints.push_back({it->first, std::move(it->second.pending)});
  it->second.pending.clear();
  Keep(r);
  return r;
}

std::vector<CountReport> LeaseBook::Unacked() const {
  absl::MutexLock l(&mu_);
  return {unacked_.begin(), unacked_.end()};
}

void LeaseBook::OnApplied(uint64_t seq) {
  absl::MutexLock l(&mu_);
  while (!unacked_.empty() && unacked_.front().seq <= seq) {
    unacked_.pop_front();
  }
}

void LeaseBook::OnGrant(const LeaseGrant& g, absl::Time now) {
  absl::MutexLock l(&mu_);
  Entry& e = entries_[g.endpoint];
  if (e.lease.has_value() && g.epoch < e.lease->epoch) return;  // stale
  e.lease = Lease{g.epoch, now, now + g.ttl, g.allowance, g.allowance,
                  g.initial_jitter};
  e.wants = false;
}

void LeaseBook::OnRevoke(const LeaseRevoke& r) {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(r.endpoint);
  if (it != entries_.end() && it->second.lease.has_value() &&
      it->second.lease->epoch <= r.epoch) {
    it->second.lease.reset();
  }
  // Acknowledged even if no lease was held: the grant may still be on its
  // way, and the replica waits for the ack (or the ttl) before a probe.
  acks_.push_back({r.endpoint, r.epoch});
}

void LeaseBook::DropAll() {
  absl::MutexLock l(&mu_);
  for (auto& [key, e] : entries_) e.lease.reset();
}

int LeaseBook::LeasesHeld(absl::Time now) const {
  absl::MutexLock l(&mu_);
  int n = 0;
  for (const auto& [key, e] : entries_) n += Live(e, now) ? 1 : 0;
  return n;
}

LeaseBook::LeasePage LeaseBook::ListLeases(absl::string_view after,
                                           size_t max, absl::Time now) const {
  // The `max` smallest keys after `after`, in a max-heap (at most max + 1
  // entries: the page's cost does not grow with the book beyond the pass).
  using Item = std::pair<absl::string_view, const Lease*>;
  const auto by_key = [](const Item& a, const Item& b) {
    return a.first < b.first;
  };
  std::vector<Item> heap;
  heap.reserve(std::min<size_t>(max, 1024) + 1);
  LeasePage page;
  absl::MutexLock l(&mu_);
  for (const auto& [key, e] : entries_) {
    if (!Live(e, now) || absl::string_view(key) <= after) continue;
    ++page.matched;
    if (max == 0) continue;
    if (heap.size() == max && !(absl::string_view(key) < heap.front().first)) {
      continue;
    }
    heap.emplace_back(key, &*e.lease);
    std::push_heap(heap.begin(), heap.end(), by_key);
    if (heap.size() > max) {
      std::pop_heap(heap.begin(), heap.end(), by_key);
      heap.pop_back();
    }
  }
  std::sort_heap(heap.begin(), heap.end(), by_key);
  page.leases.reserve(heap.size());
  for (const auto& [key, lease] : heap) {
    page.leases.push_back(
        {std::string(key), lease->epoch, lease->expires, lease->allowance,
         lease->left});
  }
  return page;
}

bool LeaseBook::HasLease(absl::string_view endpoint, absl::Time now) const {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(endpoint);
  return it != entries_.end() && Live(it->second, now);
}

}  // namespace stagger::lease
