// ServerMetrics: family construction and the lock-free recording paths. See
// server_metrics.h for the contract.
#include "server/metrics/server_metrics.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "prometheus/family.h"

namespace stagger::metrics {
namespace {

static_assert(static_cast<int>(engine::Verdict::kDone) == 4,
              "kMaxVerdict must follow engine::Verdict");
static_assert(static_cast<int>(engine::BreakerState::kHalfOpen) ==
                  engine::kNumBreakerStates,
              "breaker states must be 1..kNumBreakerStates");

constexpr const char* kCallNames[ServerMetrics::kNumCalls] = {"admit",
                                                              "report"};
constexpr const char* kMethodNames[ServerMetrics::kNumMethods] = {
    "Admit", "Report", "AdmitBatch", "ReportBatch", "GetEndpoint",
    "ListEndpoints"};

// "2".."20" and "overflow": static strings, so AttemptLabel() never
// allocates and the pointers stay valid forever.
constexpr const char* kAttemptNames[ServerMetrics::kMaxAttemptLabel + 1] = {
    "",   "",   "2",  "3",  "4",  "5",  "6",  "7",  "8",  "9",  "10",
    "11", "12", "13", "14", "15", "16", "17", "18", "19", "20"};
constexpr const char* kOverflow = "overflow";

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
  // stagger_decisions_total: every combination, so that rate() sees the
  // first increment of a rare (verdict, reason) instead of a series that
  // appears from nothing. 2 x 4 x 13 = 104 series, fixed.
  auto& decisions =
      prometheus::BuildCounter()
          .Name("stagger_decisions_total")
          .Help("Decisions returned, by call (admit|report), verdict and "
                "reason. Batch items count one each.")
          .Register(registry);
  for (int c = 0; c < kNumCalls; ++c) {
    for (int v = 1; v <= kMaxVerdict; ++v) {
      for (int r = 1; r <= engine::kMaxReason; ++r) {
        decisions_[c][v][r] = &decisions.Add(
            {{"call", kCallNames[c]},
             {"verdict", engine::VerdictName(static_cast<engine::Verdict>(v))},
             {"reason", engine::ReasonName(static_cast<engine::Reason>(r))}});
      }
    }
  }

  auto& delay =
      prometheus::BuildHistogram()
          .Name("stagger_retry_delay_seconds")
          .Help("Realised delay before each retry (a Report answered PROCEED "
                "with reason BACKOFF or RETRY_AFTER), in seconds, by the "
                "retry's attempt number (2..K, then overflow).")
          .Register(registry);
  for (int a = kMinAttemptLabel; a <= max_attempt_label_; ++a) {
    attempt_labels_.push_back(kAttemptNames[a]);
  }
  attempt_labels_.push_back(kOverflow);
  for (const char* label : attempt_labels_) {
    retry_delay_.push_back(
        &delay.Add({{"attempt", label}}, RetryDelayBuckets()));
  }

  retry_after_ =
      &prometheus::BuildCounter()
           .Name("stagger_retry_after_total")
           .Help("Failure reports that carried the endpoint's Retry-After.")
           .Register(registry)
           .Add({});
  retry_after_clamped_ =
      &prometheus::BuildCounter()
           .Name("stagger_retry_after_clamped_total")
           .Help("Retry-After values above the policy's retry_after_max, "
                 "clamped to it.")
           .Register(registry)
           .Add({});
  budget_refusals_ =
      &prometheus::BuildCounter()
           .Name("stagger_budget_refusals_total")
           .Help("Retries deferred because the endpoint's fleet-wide retry "
                 "budget was empty (decisions with reason BUDGET_EXHAUSTED).")
           .Register(registry)
           .Add({});

  pace_cuts_ =
      &prometheus::BuildCounter()
           .Name("stagger_pace_cuts_total")
           .Help("Cuts of an endpoint's learned release pace: released "
                 "attempts failed while it was serving (overload), so its "
                 "pace went down to the goodput measured.")
           .Register(registry)
           .Add({});

  misrouted_ =
      &prometheus::BuildCounter()
           .Name("stagger_misrouted_requests_total")
           .Help("Decision requests (batch items count one each) for "
                 "endpoint keys this replica does not own under its view of "
                 "the replicas (--replicas); answered all the same.")
           .Register(registry)
           .Add({});

  untracked_ =
      &prometheus::BuildCounter()
           .Name("stagger_untracked_decisions_total")
           .Help("Decisions made from fresh, unstored state because the "
                 "endpoint table was full (limits.max_endpoints): no "
                 "fleet-wide backoff, budget or breaker for those calls.")
           .Register(registry)
           .Add({});

  auto& transitions =
      prometheus::BuildCounter()
          .Name("stagger_breaker_transitions_total")
          .Help("Circuit-breaker state changes of any endpoint, by from and "
                "to state (CLOSED, OPEN, HALF_OPEN).")
          .Register(registry);
  for (int f = 1; f <= kNumStates; ++f) {
    for (int t = 1; t <= kNumStates; ++t) {
      if (f == t) continue;
      transitions_[f][t] = &transitions.Add(
          {{"from",
            engine::BreakerStateName(static_cast<engine::BreakerState>(f))},
           {"to",
            engine::BreakerStateName(static_cast<engine::BreakerState>(t))}});
    }
  }

  auto& by_state =
      prometheus::BuildGauge()
          .Name("stagger_endpoints")
          .Help("Tracked endpoints by circuit-breaker state, at scrape time.")
          .Register(registry);
  for (int s = 1; s <= kNumStates; ++s) {
    endpoints_by_state_[s] = &by_state.Add(
        {{"breaker_state",
          engine::BreakerStateName(static_cast<engine::BreakerState>(s))}});
  }
  endpoints_tracked_ =
      &prometheus::BuildGauge()
           .Name("stagger_endpoints_tracked")
           .Help("Endpoints whose state the server holds, at scrape time.")
           .Register(registry)
           .Add({});
  endpoints_evicted_ =
      &prometheus::BuildCounter()
           .Name("stagger_endpoints_evicted_total")
           .Help("Endpoints dropped from the table (idle eviction or a full "
                 "table), since the server started.")
           .Register(registry)
           .Add({});

  auto& reloads = prometheus::BuildCounter()
                      .Name("stagger_config_reloads_total")
                      .Help("Configuration reloads by result (success|failure);"
                            " a failed reload keeps the old configuration.")
                      .Register(registry);
  reload_success_ = &reloads.Add({{"result", "success"}});
  reload_failure_ = &reloads.Add({{"result", "failure"}});
  BuildStateFamilies(registry);

  auto& rpc = prometheus::BuildHistogram()
                  .Name("stagger_rpc_duration_seconds")
                  .Help("Server-side handling time of each RPC, in seconds, "
                        "by method.")
                  .Register(registry);
  for (int m = 0; m < kNumMethods; ++m) {
    rpc_duration_[m] =
        &rpc.Add({{"method", kMethodNames[m]}}, RpcDurationBuckets());
  }

  auto& batch = prometheus::BuildHistogram()
                    .Name("stagger_batch_size")
                    .Help("Items per batch request (AdmitBatch, ReportBatch), "
                          "in items.")
                    .Register(registry);
  for (Method m : {Method::kAdmitBatch, Method::kReportBatch}) {
    const int i = static_cast<int>(m);
    batch_size_[i] =
        &batch.Add({{"method", kMethodNames[i]}}, BatchSizeBuckets());
  }
}

const char* ServerMetrics::AttemptLabel(int attempt) const {
  if (attempt < kMinAttemptLabel) return "";
  if (attempt > max_attempt_label_) return kOverflow;
  return kAttemptNames[attempt];
}

void ServerMetrics::RecordDecision(Call call, const engine::Decision& d) {
  const int c = static_cast<int>(call);
  const int v = static_cast<int>(d.verdict);
  const int r = static_cast<int>(d.reason);
  if (c < 0 || c >= kNumCalls) return;
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

void ServerMetrics::RecordMisrouted(int requests) {
  if (requests > 0) misrouted_->Increment(requests);
}

void ServerMetrics::RecordConfigReload(bool ok) {
  (ok ? reload_success_ : reload_failure_)->Increment();
}

void ServerMetrics::BuildStateFamilies(prometheus::Registry& registry) {
  auto& failures =
      prometheus::BuildCounter()
          .Name("stagger_state_load_failures_total")
          .Help("State file (--state_file) not loaded at start, by reason; "
                "the server started with fresh state.")
          .Register(registry);
  for (size_t i = 0; i < kStateLoadFailureReasons.size(); ++i) {
    state_load_failures_[i] =
        &failures.Add({{"reason", kStateLoadFailureReasons[i]}});
  }
  state_restored_ =
      &prometheus::BuildGauge()
           .Name("stagger_state_endpoints_restored")
           .Help("Endpoints restored from the state file at start.")
           .Register(registry)
           .Add({});
  auto& saves = prometheus::BuildCounter()
                    .Name("stagger_state_saves_total")
                    .Help("State file snapshots written, by result "
                          "(success|failure).")
                    .Register(registry);
  state_save_success_ = &saves.Add({{"result", "success"}});
  state_save_failure_ = &saves.Add({{"result", "failure"}});
  state_last_save_ =
      &prometheus::BuildGauge()
           .Name("stagger_state_last_save_timestamp_seconds")
           .Help("Unix time of the last state file snapshot written; 0 if "
                 "none yet.")
           .Register(registry)
           .Add({});
}

void ServerMetrics::RecordStateLoadFailure(absl::string_view reason) {
  for (size_t i = 0; i < kStateLoadFailureReasons.size(); ++i) {
    if (reason == kStateLoadFailureReasons[i]) state_load_failures_[i]->Increment();
  }
}

void ServerMetrics::RecordStateRestored(int64_t endpoints) {
  state_restored_->Set(static_cast<double>(endpoints));
}

void ServerMetrics::RecordStateSave(bool ok, absl::Time at) {
  (ok ? state_save_success_ : state_save_failure_)->Increment();
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
}

}  // namespace stagger::metrics
