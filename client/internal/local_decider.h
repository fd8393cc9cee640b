// LocalDecider: how CoordinatorClient answers when no replica can take a
// call (coordinator_client.h, "Any other failure"):
//   FAIL_OPEN    an in-process engine::Engine on ClientOptions::local_policy
//                decides, with this process's view of the endpoint only.
//   FAIL_CLOSED  nothing is sent without the coordinator: DEFER
//                (CIRCUIT_OPEN) spread over [recheck, 1.5 recheck); a
//                SUCCESS report is DONE and a NOT_RETRYABLE one GIVE_UP,
//                since they send nothing.
// Either way bad input is an error with the server's message (the engine's
// own checks), and every answer is counted (ClientMetrics::CountFallback)
// and says kLocalFallback with its cause.
// With leases, FAIL_OPEN keeps to the last not-clear set the client holds
// (set_covering): a key under a pause or a Retry-After window is deferred
// until it ends, as the coordinator would; a key with a breaker open, near
// a trip, being released or stood in for gets the local engine's breaker
// forced open once (its own probes then find when the endpoint is back). Batches are validated whole
// first, with the server's batch checks, so a bad item changes nothing.
// Thread-safe.
#ifndef STAGGER_CLIENT_INTERNAL_LOCAL_DECIDER_H_
#define STAGGER_CLIENT_INTERNAL_LOCAL_DECIDER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "client/coordinator_client.h"
#include "client/internal/client_metrics.h"
#include "core/engine/engine.h"
#include "core/lease/messages.h"

namespace stagger::client {

class LocalDecider {
 public:
  // `clock`, `random` and `metrics` must outlive the decider.
  LocalDecider(const ClientOptions& options, const engine::Clock* clock,
               engine::RandomSource* random, ClientMetrics* metrics);

  absl::StatusOr<ClientDecision> Admit(const AdmitRequest& in,
                                       absl::Status cause);
  absl::StatusOr<ClientDecision> Report(const ReportRequest& in,
                                        absl::Status cause);
  absl::StatusOr<std::vector<ClientDecision>> AdmitBatch(
      absl::Span<const AdmitRequest> items, const absl::Status& cause);
  absl::StatusOr<std::vector<ClientDecision>> ReportBatch(
      absl::Span<const ReportRequest> items, const absl::Status& cause);

  // The server's checks of one request.
  absl::Status ValidateAdmit(const AdmitRequest& in) const {
    return engine_.ValidateAdmit(in);
  }
  absl::Status ValidateReport(const ReportRequest& in) const {
    return engine_.ValidateReport(in);
  }
  // The server's batch checks (size, then every item, "items[i]." first).
  absl::Status ValidateBatch(absl::Span<const AdmitRequest> items) const;
  absl::Status ValidateBatch(absl::Span<const ReportRequest> items) const;

  // The not-clear entry of the client's last set covering a key, if any
  // (the owner's lease stream: sync_session.h). Set before use.
  using Covering =
      std::function<std::optional<lease::NotClearEntry>(absl::string_view)>;
  void set_covering(Covering c) { covering_ = std::move(c); }

  // Drops the local engine's idle endpoints (memory stays bounded as in
  // staggerd: local_policy.limits).
  void EvictIdle() { engine_.EvictIdle(); }

 private:
  ClientDecision ClosedDefer(int attempt, absl::Status cause);
  // FAIL_OPEN's answer from the last set, if it has one (a pause or a
  // window in force); seeds the local breaker for the other reasons.
  std::optional<engine::Decision> KeepToSet(absl::string_view key,
                                            int attempt);
  template <typename In, typename Decide>
  absl::StatusOr<std::vector<ClientDecision>> Batch(absl::Span<const In> items,
                                                    const absl::Status& cause,
                                                    Decide decide);

  const FallbackMode mode_;
  const absl::Duration recheck_interval_;
  const engine::Clock* const clock_;
  engine::RandomSource* const random_;
  ClientMetrics* const metrics_;
  engine::Engine engine_;
  Covering covering_;
  absl::Mutex mu_;
  // Keys whose local breaker this fallback forced open for the set's sake
  // (once each while the set covers them; at most kMaxSeeded).
  absl::flat_hash_set<std::string> seeded_ ABSL_GUARDED_BY(mu_);
  static constexpr size_t kMaxSeeded = 100000;
};

// The client's view of an engine decision received at `now` (a DEFER's
// defer_for is measured from it).
ClientDecision ToClientDecision(const engine::Decision& d, absl::Time now,
                                DecisionSource source, absl::Status cause);

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_INTERNAL_LOCAL_DECIDER_H_
