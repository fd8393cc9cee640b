// CountGuard: staggerd's caps on the counts agents report over their lease
// streams (proto/stagger/v1/sync.proto, CountReport), so that one agent,
// or a stolen agent certificate, cannot flood the engine with them.
// ReplicaSync calls Trim on every report it is about to apply
// (ReplicaSync::set_counts_filter: once per seq).
//
// The caps (docs/SECURITY.md, "Agents"; docs/OPERATING.md, "Limits"):
//   * Per message, on the wire (core/wire/sync_wire.h): at most 10,000
//     endpoints, each with at most 64 buckets (INVALID_ARGUMENT beyond).
//   * Per bucket: at most kMaxAnswersPerBucket first attempts and as many
//     successes (a 100 ms bucket: 1,000,000 answers a second to one
//     endpoint from one agent). Larger numbers are cut to it.
//   * Per agent (its bound id, agent_identity.h; all its incarnations and
//     streams): at most kAgentBucketsPerSecond buckets a second, with a
//     burst of kAgentBucketBurst (one full message and half another).
//     Endpoints beyond are dropped whole.
//   * Per table (the engine): counts for keys it does not track create
//     them only below Engine::kLateCountsEndpointShare of
//     limits.max_endpoints; beyond, they are dropped (EngineStats::
//     late_counts_dropped).
// Every cut or dropped endpoint entry is counted once by `record(cause,
// n)` (stagger_sync_counts_dropped_total{cause}; may be null). An agent
// silent for kForgetAfter is forgotten (its allowance starts full again).
// Thread-safe; `clock` (monotonic) must outlive it.
#ifndef STAGGER_SERVER_SERVICE_COUNT_GUARD_H_
#define STAGGER_SERVER_SERVICE_COUNT_GUARD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/engine/clock.h"
#include "core/lease/messages.h"
#include "core/lease/replica_sync.h"

namespace stagger::service {

class CountGuard {
 public:
  static constexpr uint32_t kMaxAnswersPerBucket = 100000;
  static constexpr double kAgentBucketsPerSecond = 200000;
  static constexpr double kAgentBucketBurst = 1000000;
  static constexpr absl::Duration kForgetAfter = absl::Minutes(10);

  enum class Cause { kBucketCap = 0, kAgentRate = 1 };
  using Record = std::function<void(Cause cause, int64_t entries)>;

  CountGuard(const engine::Clock* clock, Record record);

  // Cuts `report` to the caps for `agent`, counting what it cut.
  void Trim(const lease::AgentKey& agent, lease::CountReport* report);

 private:
  struct Allowance {
    double tokens = kAgentBucketBurst;
    absl::Time at;
  };
  // The buckets `agent` may apply now (its allowance refilled).
  Allowance& AllowanceOf(const std::string& agent, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const engine::Clock* const clock_;
  const Record record_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Allowance> agents_ ABSL_GUARDED_BY(mu_);
  absl::Time last_forget_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_COUNT_GUARD_H_
