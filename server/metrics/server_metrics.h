// ServerMetrics: staggerd's Prometheus metrics. Every family and every series
// is built once, in the constructor, for fixed label sets (enum values, an
// attempt number capped at a small bound); the Record* functions on the hot
// path only index pre-resolved arrays and bump a counter or a histogram: no
// family or label lookup, no allocation, no new series, ever. Label values
// come only from those fixed sets; an endpoint key is never a label.
//
// The engine does not know about this file: the gRPC layer passes each
// engine::Decision it returns to RecordDecision(). Gauges that describe the
// endpoint table (breaker states, tracked, evicted) are read from
// engine::Engine::Stats() when refreshed, i.e. just before each scrape (see
// MetricsExposer, which calls RefreshEngineStats()).
//
// Which families exist (names, types, labels with their fixed value sets,
// help text) is the metric catalog's to say (metric_catalog.h, the
// Registrar::kServerMetrics entries); this class builds them from it, every
// series of every label value up front (so rate() sees the first increment
// of a rare one), and counts. Two exceptions, both fixed at construction:
// stagger_retry_delay_seconds has attempts 2..K and "overflow" only (K from
// the constructor), and stagger_breaker_transitions_total only the 6 real
// transitions. docs/OBSERVABILITY.md explains each metric.
//
// Thread-safety: every method may be called concurrently from any thread once
// the object is constructed. The registry must outlive this object.
#ifndef STAGGER_SERVER_METRICS_SERVER_METRICS_H_
#define STAGGER_SERVER_METRICS_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/engine_config.h"
#include "core/metrics/metric_catalog.h"
#include "core/status/decision_ring.h"

namespace stagger::metrics {

class ServerMetrics {
 public:
  enum class Call : uint8_t { kAdmit = 0, kReport = 1 };
  static constexpr int kNumCalls = 2;
  enum class Method : uint8_t {
    kAdmit = 0,
    kReport = 1,
    kAdmitBatch = 2,
    kReportBatch = 3,
    kGetEndpoint = 4,
    kListEndpoints = 5,
  };
  static constexpr int kNumMethods = 6;

  // Bounds of the attempt label of stagger_retry_delay_seconds. A retry
  // delay is always for attempt >= 2 (attempt 1 is the first send).
  static constexpr int kMinAttemptLabel = metrics::kMinAttemptLabel;
  static constexpr int kMaxAttemptLabel = metrics::kMaxAttemptLabel;

  // Bucket upper bounds, seconds / items. Exposed for tests and dashboards.
  // Retry delay: 1 ms .. 60 s, dense enough above 1 s that full jitter's
  // flat shape and a pile-up at the default cap (30 s, a boundary) show.
  static const std::vector<double>& RetryDelayBuckets();
  // RPC handling time: 10 us .. 1 s.
  static const std::vector<double>& RpcDurationBuckets();
  // Batch items: 1 .. 100000 (the largest allowed max_batch_size).
  static const std::vector<double>& BatchSizeBuckets();

  // Builds and registers every family and series in `registry`, which must
  // outlive this object and must not already hold stagger_* families.
  // `max_attempt_label` (K) is clamped to [kMinAttemptLabel,
  // kMaxAttemptLabel]: retries for attempts 2..K get their own label value,
  // later ones share "overflow". Use MaxAttemptLabelFor(config) at start-up;
  // a reload that raises max_attempts sends the new attempts to "overflow"
  // (series are never added after construction).
  ServerMetrics(prometheus::Registry& registry, int max_attempt_label);
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // The largest max_attempts of the default policy and every override,
  // clamped to [kMinAttemptLabel, kMaxAttemptLabel].
  static int MaxAttemptLabelFor(const engine::EngineConfig& config);

  // The label value for a retry delay of attempt `attempt` ("2".."K" or
  // "overflow"); "" for attempt < 2, which is never recorded.
  const char* AttemptLabel(int attempt) const;
  int max_attempt_label() const { return max_attempt_label_; }

  // Records one decision the engine returned for an Admit or a Report
  // (batch items: once per item). Counts:
  //   stagger_decisions_total{call, verdict, reason};
  //   for a Report answered PROCEED with reason BACKOFF or RETRY_AFTER:
  //     stagger_retry_delay_seconds{attempt = d.attempt} observes d.delay;
  //   d.retry_after_seen / d.retry_after_clamped: the Retry-After counters;
  //   reason BUDGET_EXHAUSTED: stagger_budget_refusals_total (every refusal,
  //     so one retry deferred twice counts twice);
  //   d.transitions[0 .. num_transitions): stagger_breaker_transitions_total;
  //   d.untracked: stagger_untracked_decisions_total;
  //   d.pace_cut: stagger_pace_cuts_total.
  // Out-of-range enum values (never produced by the engine) are not counted
  // under any label. Lock-free apart from the histogram's own mutex.
  // Also counts d.verdict in the status page's ring, if one is set.
  void RecordDecision(Call call, const engine::Decision& d);

  // The status page's chart (core/status/decision_ring.h): while set, every
  // recorded decision's verdict is counted there too. Null: none. The ring
  // must outlive this object, or be unset while no decision is recorded.
  void set_decision_ring(status::DecisionRing* ring) {
    ring_.store(ring, std::memory_order_release);
  }

  // stagger_rpc_duration_seconds{method}: time from the handler's entry to
  // its Finish(), including validation and every batch item.
  void RecordRpc(Method m, absl::Duration handling_time);

  // stagger_batch_size{method}: the number of items in one batch request.
  // Only kAdmitBatch and kReportBatch have this series; other methods are
  // ignored.
  void RecordBatchSize(Method m, int items);

  // stagger_config_reloads_total{result="success"|"failure"}.
  void RecordConfigReload(bool ok);

  // The state file (--state_file, server/state/). The reasons a load fails
  // (state::LoadOutcomeName of every outcome but "loaded"): the catalog's.
  static constexpr const auto& kStateLoadFailureReasons =
      kStateLoadFailureLabels;
  // stagger_state_load_failures_total{reason}; a reason outside
  // kStateLoadFailureReasons is not counted.
  void RecordStateLoadFailure(absl::string_view reason);
  // stagger_state_endpoints_restored: endpoints restored at start.
  void RecordStateRestored(int64_t endpoints);
  // stagger_state_saves_total{result}; a success also sets
  // stagger_state_last_save_timestamp_seconds to `at`.
  void RecordStateSave(bool ok, absl::Time at);
  // stagger_misrouted_requests_total: a decision request (a batch counts
  // each item) for a key this replica does not own under its view of the
  // replicas (server/service/ownership.h). It is still answered.
  void RecordMisrouted(int requests);
  // stagger_sync_messages_total{direction}: one message on an agent's lease
  // stream, received (`in`) or sent.
  void RecordSyncMessage(bool in);
  // stagger_lease_grants_total, from the renewals granted since start.
  void SetLeaseRenewals(int64_t total);
  // stagger_count_reports_total{result}, from the totals since start.
  void SetCountReports(int64_t applied, int64_t lost, int64_t duplicate);
  // stagger_counted_total{kind}: one count report applied.
  void RecordCounted(int64_t first_attempts, int64_t successes);
  // stagger_not_clear_entries: the not-clear set's size now.
  void SetNotClearEntries(int64_t n);
  // stagger_leases: agent streams with a live lease now.
  void SetLeases(int64_t n);
  // stagger_waiting_calls; stagger_waiting_overflows_total.
  void SetWaitingCalls(int64_t n);
  void RecordWaitingOverflow();
  // stagger_sync_counts_dropped_total{cause}: `entries` endpoint entries of
  // agents' count reports cut or dropped (server/service/count_guard.h).
  // kEndpointShare is the engine's count (EngineStats::late_counts_dropped),
  // taken by RefreshEngineStats.
  enum class CountsDrop : uint8_t {
    kBucketCap = 0,
    kAgentRate = 1,
    kEndpointShare = 2
  };
  void RecordCountsDropped(CountsDrop cause, int64_t entries);
  // The watch (stagger.v1.EndpointWatch): streams opened (+1) and closed
  // (-1), events written to the change log, watchers told they missed
  // events.
  void AddWatchStreams(int delta);
  void RecordWatchEvents(int n);
  void RecordWatchResync();

  // The engine whose Stats() feed stagger_endpoints{breaker_state},
  // stagger_endpoints_tracked, stagger_endpoints_evicted_total,
  // stagger_endpoints_disabled and stagger_endpoint_disables_total. It must
  // outlive this object (or be detached with nullptr first). Until one is
  // attached those series stay at 0.
  void AttachEngine(const engine::Engine* engine);

  // Copies engine->Stats() into the gauges (and the eviction counter, by
  // the increase since the last refresh). MetricsExposer calls it before
  // every scrape; cheap (a handful of atomic loads), safe to call anytime.
  void RefreshEngineStats();

 private:
  // The constructor's steps: every family and series, from the catalog.
  void RegisterDecisionSeries(prometheus::Registry& registry);
  void RegisterRetrySeries(prometheus::Registry& registry);
  void RegisterEndpointSeries(prometheus::Registry& registry);
  void RegisterStateSeries(prometheus::Registry& registry);
  void RegisterServingSeries(prometheus::Registry& registry);

  static constexpr int kMaxVerdict = 4;  // engine::Verdict::kDone
  static constexpr int kNumStates = engine::kNumBreakerStates;

  const int max_attempt_label_;
  std::atomic<status::DecisionRing*> ring_{nullptr};

  // [call][verdict 1..4][reason 1..kMaxReason]; index 0 unused (nullptr).
  std::array<std::array<std::array<prometheus::Counter*, engine::kMaxReason + 1>,
                        kMaxVerdict + 1>,
             kNumCalls>
      decisions_{};
  // [0] = attempt 2 ... [K-2] = attempt K, [K-1] = overflow.
  std::vector<prometheus::Histogram*> retry_delay_;
  std::vector<const char*> attempt_labels_;  // parallel to retry_delay_
  prometheus::Counter* retry_after_ = nullptr;
  prometheus::Counter* retry_after_clamped_ = nullptr;
  prometheus::Counter* budget_refusals_ = nullptr;
  prometheus::Counter* untracked_ = nullptr;
  prometheus::Counter* pace_cuts_ = nullptr;
  prometheus::Counter* misrouted_ = nullptr;
  std::array<prometheus::Counter*, 2> sync_messages_{};  // [in, out]
  prometheus::Counter* lease_grants_ = nullptr;
  prometheus::Gauge* not_clear_entries_ = nullptr;
  std::atomic<int64_t> renewals_seen_{0};
  std::array<prometheus::Counter*, 3> count_reports_{};  // kCountReportLabels
  std::array<std::atomic<int64_t>, 3> count_reports_seen_{};
  std::array<prometheus::Counter*, 2> counted_{};  // kCountKindLabels
  prometheus::Gauge* leases_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Counter* waiting_overflows_ = nullptr;
  std::array<prometheus::Counter*, 3> counts_dropped_{};  // [CountsDrop]
  // [from 1..3][to 1..3]; nullptr on the diagonal and at index 0.
  std::array<std::array<prometheus::Counter*, kNumStates + 1>, kNumStates + 1>
      transitions_{};
  std::array<prometheus::Gauge*, kNumStates + 1> endpoints_by_state_{};
  prometheus::Gauge* endpoints_tracked_ = nullptr;
  prometheus::Counter* endpoints_evicted_ = nullptr;
  prometheus::Gauge* endpoints_disabled_ = nullptr;
  // [trigger 1..3]; index 0 unused.
  std::array<prometheus::Counter*, engine::kMaxDisableTrigger + 1> disables_{};
  prometheus::Gauge* watch_streams_ = nullptr;
  prometheus::Counter* watch_events_ = nullptr;
  prometheus::Counter* watch_resyncs_ = nullptr;
  // [0] success, [1] failure (kResultLabels).
  std::vector<prometheus::Counter*> reloads_;
  // Parallel to kStateLoadFailureReasons.
  std::vector<prometheus::Counter*> state_load_failures_;
  prometheus::Gauge* state_restored_ = nullptr;
  std::vector<prometheus::Counter*> state_saves_;  // [0] success, [1] failure
  prometheus::Gauge* state_last_save_ = nullptr;
  std::array<prometheus::Histogram*, kNumMethods> rpc_duration_{};
  std::array<prometheus::Histogram*, kNumMethods> batch_size_{};  // 2 set

  std::atomic<const engine::Engine*> engine_{nullptr};
  absl::Mutex refresh_mu_;
  int64_t evicted_seen_ ABSL_GUARDED_BY(refresh_mu_) = 0;
  int64_t late_counts_dropped_seen_ ABSL_GUARDED_BY(refresh_mu_) = 0;
  std::array<int64_t, engine::kMaxDisableTrigger + 1> disables_seen_
      ABSL_GUARDED_BY(refresh_mu_){};
};

// Times one RPC handler: records stagger_rpc_duration_seconds{method} when
// Finish() is first called or, failing that, when destroyed. Monotonic clock
// (std::chrono::steady_clock). `metrics` may be null (records nothing).
// Not thread-safe: one handler, one timer.
class ScopedRpcTimer {
 public:
  ScopedRpcTimer(ServerMetrics* metrics, ServerMetrics::Method method)
      : metrics_(metrics),
        method_(method),
        start_(std::chrono::steady_clock::now()) {}
  ~ScopedRpcTimer() { Finish(); }
  ScopedRpcTimer(const ScopedRpcTimer&) = delete;
  ScopedRpcTimer& operator=(const ScopedRpcTimer&) = delete;

  void Finish() {
    if (metrics_ == nullptr) return;
    metrics_->RecordRpc(method_, absl::FromChrono(
                                     std::chrono::steady_clock::now() - start_));
    metrics_ = nullptr;
  }
  // Records nothing: the call was handed on (a waiting Admit held).
  void Drop() { metrics_ = nullptr; }

 private:
  ServerMetrics* metrics_;
  ServerMetrics::Method method_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace stagger::metrics

#endif  // STAGGER_SERVER_METRICS_SERVER_METRICS_H_
