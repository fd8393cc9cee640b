#include "server/service/count_guard.h"

#include <algorithm>
#include <utility>

namespace stagger::service {

CountGuard::CountGuard(const engine::Clock* clock, Record record)
    : clock_(clock), record_(std::move(record)) {}

CountGuard::Allowance& CountGuard::AllowanceOf(const std::string& agent,
                                               absl::Time now) {
  auto [it, fresh] = agents_.try_emplace(agent);
  Allowance& a = it->second;
  if (fresh) {
    a.at = now;
    return a;
  }
  const double refill =
      std::max(0.0, absl::ToDoubleSeconds(now - a.at)) * kAgentBucketsPerSecond;
  a.tokens = std::min(kAgentBucketBurst, a.tokens + refill);
  a.at = now;
  return a;
}

void CountGuard::Forget(absl::Time now) {
  if (now - last_forget_ < kForgetAfter) return;
  last_forget_ = now;
  for (auto it = agents_.begin(); it != agents_.end();) {
    if (now - it->second.at > kForgetAfter) {
      agents_.erase(it++);
    } else {
      ++it;
    }
  }
}

void CountGuard::Trim(const lease::AgentKey& agent,
                      lease::CountReport* report) {
  size_t kept = 0;
  {
    const absl::Time now = clock_->Now();
    absl::MutexLock l(&mu_);
    Forget(now);
    Allowance& a = AllowanceOf(agent.id, now);
    for (; kept < report->endpoints.size(); ++kept) {
      const double n =
          static_cast<double>(report->endpoints[kept].buckets.size());
      if (n > a.tokens) break;
      a.tokens -= n;
    }
  }
  const int64_t dropped =
      static_cast<int64_t>(report->endpoints.size() - kept);
  report->endpoints.resize(kept);
  int64_t cut = 0;
  for (lease::EndpointCounts& e : report->endpoints) {
    bool over = false;
    for (lease::CountBucket& b : e.buckets) {
      over = over || b.first_attempts > kMaxAnswersPerBucket ||
             b.successes > kMaxAnswersPerBucket;
      b.first_attempts = std::min(b.first_attempts, kMaxAnswersPerBucket);
      b.successes = std::min(b.successes, kMaxAnswersPerBucket);
    }
    cut += over ? 1 : 0;
  }
  if (record_ && cut > 0) record_(Cause::kBucketCap, cut);
  if (record_ && dropped > 0) record_(Cause::kAgentRate, dropped);
}

}  // namespace stagger::service
