// ServerMetrics: family construction and the lock-free recording paths. See
// server_metrics.h for the contract.
#include "server/metrics/server_metrics.h"

#include <algorithm>
#include <string_view>

#include "prometheus/family.h"
#include "core/metrics/metric_registration.h"

namespace stagger::metrics {
namespace {

static_assert(static_cast<int>(engine::Verdict::kDone) == 4,
              "kMaxVerdict must follow engine::Verdict");
static_assert(static_cast<int>(engine::BreakerState::kHalfOpen) ==
                  engine::kNumBreakerStates,
              "breaker states must be 1..kNumBreakerStates");
static_assert(kCallLabels.size() == ServerMetrics::kNumCalls,
              "kCallLabels follows ServerMetrics::Call");
static_assert(kMethodLabels.size() == ServerMetrics::kNumMethods,
              "kMethodLabels follows ServerMetrics::Method");
static_assert(std::string_view(kMethodLabels[2]) == kBatchMethodLabels[0] &&
                  std::string_view(kMethodLabels[3]) == kBatchMethodLabels[1],
              "kBatchMethodLabels are Method::kAdmitBatch, kReportBatch");
static_assert(std::string_view(kResultLabels[0]) == "success",
              "reloads_ and state_saves_ index success as 0, failure as 1");

const char* VerdictLabel(int v) {
  return engine::VerdictName(static_cast<engine::Verdict>(v));
}
const char* ReasonLabel(int r) {
  return engine::ReasonName(static_cast<engine::Reason>(r));
}
const char* StateLabel(int s) {
  return engine::BreakerStateName(static_cast<engine::BreakerState>(s));
}

}  // namespace

const std::vector<double>& ServerMetrics::RetryDelayBuckets() {
  static const auto* b = new std::vector<double>{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
      2,     3,      5,     7.5,  10,    15,   20,  30,   45,  60};
  return *b;
}

const std::vector<double>& ServerMetrics::RpcDurationBuckets() {
  static const auto* b = new std::vector<double>{
      0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
      0.005,   0.01,     0.025,   0.05,   0.1,     0.25,   0.5,   1};
  return *b;
}

const std::vector<double>& ServerMetrics::BatchSizeBuckets() {
  static const auto* b = new std::vector<double>{
      1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000};
  return *b;
}

int ServerMetrics::MaxAttemptLabelFor(const engine::EngineConfig& config) {
  int k = config.default_policy.backoff.max_attempts;
  for (const auto& o : config.overrides) {
    k = std::max(k, o.policy.backoff.max_attempts);
  }
  return std::clamp(k, kMinAttemptLabel, kMaxAttemptLabel);
}

ServerMetrics::ServerMetrics(prometheus::Registry& registry,
                             int max_attempt_label)
    : max_attempt_label_(
          std::clamp(max_attempt_label, kMinAttemptLabel, kMaxAttemptLabel)) {
  RegisterDecisionSeries(registry);
  RegisterRetrySeries(registry);
  RegisterEndpointSeries(registry);
  RegisterStateSeries(registry);
  RegisterServingSeries(registry);
}

// stagger_decisions_total: every (call, verdict, reason).
void ServerMetrics::RegisterDecisionSeries(prometheus::Registry& registry) {
  auto& decisions = RegisterFamily<MetricId::kDecisions>(registry);
  for (int c = 0; c < kNumCalls; ++c) {
    for (int v = 1; v <= kMaxVerdict; ++v) {
      for (int r = 1; r <= engine::kMaxReason; ++r) {
        decisions_[c][v][r] = &decisions.Add(CatalogLabels(
            MetricId::kDecisions,
            {kCallLabels[c], VerdictLabel(v), ReasonLabel(r)}));
      }
    }
  }
}

// The retry delay by attempt (2..K, overflow) and the per-decision
// counters without labels.
void ServerMetrics::RegisterRetrySeries(prometheus::Registry& registry) {
  auto& delay = RegisterFamily<MetricId::kRetryDelay>(registry);
  for (int a = kMinAttemptLabel; a <= max_attempt_label_; ++a) {
    attempt_labels_.push_back(kAttemptLabels[a - kMinAttemptLabel]);
  }
  attempt_labels_.push_back(kAttemptLabels.back());  // overflow
  for (const char* label : attempt_labels_) {
    retry_delay_.push_back(&delay.Add(
        CatalogLabels(MetricId::kRetryDelay, {label}), RetryDelayBuckets()));
  }
  retry_after_ = &RegisterFamily<MetricId::kRetryAfter>(registry).Add({});
  retry_after_clamped_ =
      &RegisterFamily<MetricId::kRetryAfterClamped>(registry).Add({});
  budget_refusals_ =
      &RegisterFamily<MetricId::kBudgetRefusals>(registry).Add({});
  untracked_ =
      &RegisterFamily<MetricId::kUntrackedDecisions>(registry).Add({});
  pace_cuts_ = &RegisterFamily<MetricId::kPaceCuts>(registry).Add({});
  misrouted_ =
      &RegisterFamily<MetricId::kMisroutedRequests>(registry).Add({});
  auto& sync = RegisterFamily<MetricId::kSyncMessages>(registry);
  for (size_t d = 0; d < kDirectionLabels.size(); ++d) {
    sync_messages_[d] = &sync.Add(
        CatalogLabels(MetricId::kSyncMessages, {kDirectionLabels[d]}));
  }
  lease_grants_ = &RegisterFamily<MetricId::kLeaseGrants>(registry).Add({});
  auto& reports = RegisterFamily<MetricId::kCountReports>(registry);
  for (size_t r = 0; r < kCountReportLabels.size(); ++r) {
    count_reports_[r] = &reports.Add(
        CatalogLabels(MetricId::kCountReports, {kCountReportLabels[r]}));
  }
  auto& counted = RegisterFamily<MetricId::kCounted>(registry);
  for (size_t k = 0; k < kCountKindLabels.size(); ++k) {
    counted_[k] =
        &counted.Add(CatalogLabels(MetricId::kCounted, {kCountKindLabels[k]}));
  }
  not_clear_entries_ =
      &RegisterFamily<MetricId::kNotClearEntries>(registry).Add({});
  leases_ = &RegisterFamily<MetricId::kLeases>(registry).Add({});
  waiting_ = &RegisterFamily<MetricId::kWaitingCalls>(registry).Add({});
  waiting_overflows_ =
      &RegisterFamily<MetricId::kWaitingOverflows>(registry).Add({});
  auto& dropped = RegisterFamily<MetricId::kSyncCountsDropped>(registry);
  for (size_t c = 0; c < kCountsDropCauseLabels.size(); ++c) {
    counts_dropped_[c] = &dropped.Add(CatalogLabels(
        MetricId::kSyncCountsDropped, {kCountsDropCauseLabels[c]}));
  }
}

// Breaker transitions (the 6 real ones) and the endpoint-table series the
// engine's Stats() feed.
void ServerMetrics::RegisterEndpointSeries(prometheus::Registry& registry) {
  auto& transitions = RegisterFamily<MetricId::kBreakerTransitions>(registry);
  for (int f = 1; f <= kNumStates; ++f) {
    for (int t = 1; t <= kNumStates; ++t) {
      if (f == t) continue;
      transitions_[f][t] = &transitions.Add(CatalogLabels(
          MetricId::kBreakerTransitions, {StateLabel(f), StateLabel(t)}));
    }
  }
  auto& by_state = RegisterFamily<MetricId::kEndpoints>(registry);
  for (int s = 1; s <= kNumStates; ++s) {
    endpoints_by_state_[s] =
        &by_state.Add(CatalogLabels(MetricId::kEndpoints, {StateLabel(s)}));
  }
  endpoints_tracked_ =
      &RegisterFamily<MetricId::kEndpointsTracked>(registry).Add({});
  endpoints_evicted_ =
      &RegisterFamily<MetricId::kEndpointsEvicted>(registry).Add({});
  endpoints_disabled_ =
      &RegisterFamily<MetricId::kEndpointsDisabled>(registry).Add({});
  const std::vector<prometheus::Counter*> disables =
      AddPerValue(RegisterFamily<MetricId::kEndpointDisables>(registry),
                  MetricId::kEndpointDisables);
  std::copy(disables.begin(), disables.end(), disables_.begin() + 1);
  watch_streams_ = &RegisterFamily<MetricId::kWatchStreams>(registry).Add({});
  watch_events_ = &RegisterFamily<MetricId::kWatchEvents>(registry).Add({});
  watch_resyncs_ = &RegisterFamily<MetricId::kWatchResyncs>(registry).Add({});
}

// The state file: load failures, endpoints restored, saves.
void ServerMetrics::RegisterStateSeries(prometheus::Registry& registry) {
  state_load_failures_ =
      AddPerValue(RegisterFamily<MetricId::kStateLoadFailures>(registry),
                  MetricId::kStateLoadFailures);
  state_restored_ =
      &RegisterFamily<MetricId::kStateEndpointsRestored>(registry).Add({});
  state_saves_ = AddPerValue(RegisterFamily<MetricId::kStateSaves>(registry),
                             MetricId::kStateSaves);
  state_last_save_ =
      &RegisterFamily<MetricId::kStateLastSaveTimestamp>(registry).Add({});
}

// Config reloads, RPC handling time by method, batch sizes.
void ServerMetrics::RegisterServingSeries(prometheus::Registry& registry) {
  reloads_ = AddPerValue(RegisterFamily<MetricId::kConfigReloads>(registry),
                         MetricId::kConfigReloads);
  const std::vector<prometheus::Histogram*> rpc =
      AddPerValue(RegisterFamily<MetricId::kRpcDuration>(registry),
                  MetricId::kRpcDuration, RpcDurationBuckets());
  std::copy(rpc.begin(), rpc.end(), rpc_duration_.begin());  // Method order
  const std::vector<prometheus::Histogram*> batch =
      AddPerValue(RegisterFamily<MetricId::kBatchSize>(registry),
                  MetricId::kBatchSize, BatchSizeBuckets());
  batch_size_[static_cast<int>(Method::kAdmitBatch)] = batch[0];
  batch_size_[static_cast<int>(Method::kReportBatch)] = batch[1];
}

const char* ServerMetrics::AttemptLabel(int attempt) const {
  if (attempt < kMinAttemptLabel) return "";
  if (attempt > max_attempt_label_) return kAttemptLabels.back();
  return kAttemptLabels[attempt - kMinAttemptLabel];
}

void ServerMetrics::RecordDecision(Call call, const engine::Decision& d) {
  const int c = static_cast<int>(call);
  const int v = static_cast<int>(d.verdict);
  const int r = static_cast<int>(d.reason);
  if (c < 0 || c >= kNumCalls) return;
  if (status::DecisionRing* ring = ring_.load(std::memory_order_acquire)) {
    ring->Record(d.verdict);
  }
  if (v >= 1 && v <= kMaxVerdict && r >= 1 && r <= engine::kMaxReason) {
    decisions_[c][v][r]->Increment();
  }

  if (call == Call::kReport && d.verdict == engine::Verdict::kProceed &&
      (d.reason == engine::Reason::kBackoff ||
       d.reason == engine::Reason::kRetryAfter) &&
      d.attempt >= kMinAttemptLabel) {
    const int i = std::min(d.attempt, max_attempt_label_ + 1) -
                  kMinAttemptLabel;  // K+1 and above -> overflow slot
    retry_delay_[i]->Observe(
        absl::ToDoubleSeconds(std::max(d.delay, absl::ZeroDuration())));
  }

  if (d.retry_after_seen) retry_after_->Increment();
  if (d.retry_after_clamped) retry_after_clamped_->Increment();
  if (d.reason == engine::Reason::kBudgetExhausted) {
    budget_refusals_->Increment();
  }
  if (d.untracked) untracked_->Increment();
  if (d.pace_cut) pace_cuts_->Increment();

  const int n = std::clamp(d.num_transitions, 0, 2);
  for (int i = 0; i < n; ++i) {
    const int f = static_cast<int>(d.transitions[i].from);
    const int t = static_cast<int>(d.transitions[i].to);
    if (f < 1 || f > kNumStates || t < 1 || t > kNumStates || f == t) continue;
    transitions_[f][t]->Increment();
  }
}

void ServerMetrics::RecordRpc(Method m, absl::Duration handling_time) {
  const int i = static_cast<int>(m);
  if (i < 0 || i >= kNumMethods) return;
  rpc_duration_[i]->Observe(
      absl::ToDoubleSeconds(std::max(handling_time, absl::ZeroDuration())));
}

void ServerMetrics::RecordBatchSize(Method m, int items) {
  const int i = static_cast<int>(m);
  if (i < 0 || i >= kNumMethods || batch_size_[i] == nullptr) return;
  batch_size_[i]->Observe(static_cast<double>(std::max(items, 0)));
}

void ServerMetrics::RecordSyncMessage(bool in) {
  sync_messages_[in ? 0 : 1]->Increment();
}

void ServerMetrics::SetLeaseRenewals(int64_t total) {
  const int64_t before = renewals_seen_.exchange(total);
  if (total > before) lease_grants_->Increment(static_cast<double>(total - before));
}

void ServerMetrics::SetCountReports(int64_t applied, int64_t lost,
                                    int64_t duplicate) {
  const std::array<int64_t, 3> totals = {applied, lost, duplicate};
  for (size_t r = 0; r < totals.size(); ++r) {
    const int64_t before = count_reports_seen_[r].exchange(totals[r]);
    if (totals[r] > before) {
      count_reports_[r]->Increment(static_cast<double>(totals[r] - before));
    }
  }
}

void ServerMetrics::RecordCounted(int64_t first_attempts, int64_t successes) {
  if (first_attempts > 0) {
    counted_[0]->Increment(static_cast<double>(first_attempts));
  }
  if (successes > 0) counted_[1]->Increment(static_cast<double>(successes));
}

void ServerMetrics::SetNotClearEntries(int64_t n) {
  not_clear_entries_->Set(static_cast<double>(n));
}

void ServerMetrics::SetLeases(int64_t n) { leases_->Set(static_cast<double>(n)); }

void ServerMetrics::SetWaitingCalls(int64_t n) {
  waiting_->Set(static_cast<double>(n));
}

void ServerMetrics::RecordWaitingOverflow() { waiting_overflows_->Increment(); }

void ServerMetrics::RecordCountsDropped(CountsDrop cause, int64_t entries) {
  if (entries > 0) {
    counts_dropped_[static_cast<size_t>(cause)]->Increment(
        static_cast<double>(entries));
  }
}

void ServerMetrics::AddWatchStreams(int delta) {
  watch_streams_->Increment(delta);
}

void ServerMetrics::RecordWatchEvents(int n) {
  if (n > 0) watch_events_->Increment(n);
}

void ServerMetrics::RecordWatchResync() { watch_resyncs_->Increment(); }

void ServerMetrics::RecordMisrouted(int requests) {
  if (requests > 0) misrouted_->Increment(requests);
}

void ServerMetrics::RecordConfigReload(bool ok) {
  reloads_[ok ? 0 : 1]->Increment();
}

void ServerMetrics::RecordStateLoadFailure(absl::string_view reason) {
  for (size_t i = 0; i < kStateLoadFailureReasons.size(); ++i) {
    if (reason == kStateLoadFailureReasons[i]) {
      state_load_failures_[i]->Increment();
    }
  }
}

void ServerMetrics::RecordStateRestored(int64_t endpoints) {
  state_restored_->Set(static_cast<double>(endpoints));
}

void ServerMetrics::RecordStateSave(bool ok, absl::Time at) {
  state_saves_[ok ? 0 : 1]->Increment();
  if (ok) state_last_save_->Set(absl::ToDoubleSeconds(at - absl::UnixEpoch()));
}

void ServerMetrics::AttachEngine(const engine::Engine* engine) {
  engine_.store(engine, std::memory_order_release);
}

void ServerMetrics::RefreshEngineStats() {
  const engine::Engine* engine = engine_.load(std::memory_order_acquire);
  if (engine == nullptr) return;
  const engine::EngineStats stats = engine->Stats();
  absl::MutexLock lock(&refresh_mu_);
  for (int s = 1; s <= kNumStates; ++s) {
    endpoints_by_state_[s]->Set(static_cast<double>(stats.by_breaker_state[s]));
  }
  endpoints_tracked_->Set(static_cast<double>(stats.tracked));
  // Counter semantics: add only the increase since the previous refresh.
  if (stats.evicted_total > evicted_seen_) {
    endpoints_evicted_->Increment(
        static_cast<double>(stats.evicted_total - evicted_seen_));
    evicted_seen_ = stats.evicted_total;
  }
  endpoints_disabled_->Set(static_cast<double>(stats.disabled));
  for (int t = 1; t <= engine::kMaxDisableTrigger; ++t) {
    if (stats.disables_total[t] > disables_seen_[t]) {
      disables_[t]->Increment(
          static_cast<double>(stats.disables_total[t] - disables_seen_[t]));
      disables_seen_[t] = stats.disables_total[t];
    }
  }
  if (stats.late_counts_dropped > late_counts_dropped_seen_) {
    RecordCountsDropped(CountsDrop::kEndpointShare,
                        stats.late_counts_dropped - late_counts_dropped_seen_);
    late_counts_dropped_seen_ = stats.late_counts_dropped;
  }
}

}  // namespace stagger::metrics
