// MetricCatalog: every Prometheus metric Stagger exports, declared once:
// name, type, the unit that registers it (and so the process that exports
// it), its labels (each with its fixed set of values) and its help text.
//
// Registration reads it: ServerMetrics and security::SecurityMetrics for
// staggerd, client::ClientMetrics for the client library (RegisterFamily<id>
// and CatalogLabels in metric_registration.h; no metric or label name is
// spelled anywhere else). So do the checks of everything that refers to
// metrics: tests/metrics/metric_catalog_test.cc holds the registrations and
// docs/OBSERVABILITY.md's metric table to it (each histogram's row names the
// first and last of ServerMetrics' bucket bounds); the deploy checks
// (tests/deploy) hold the Prometheus rules, their unit tests and the Grafana
// dashboard to it, and the live scrape test holds staggerd's /metrics page to
// it, both through the JSON that `stagger-metric-catalog` prints
// (CatalogJson()).
//
// Rules the catalog keeps (checked at compile time): entries in MetricId
// order, names prefixed stagger_ (stagger_client_ for the client's),
// counters and only counters end in _total, help text present, at most
// kMaxLabels labels. Label values come from the fixed sets below only
// (never an endpoint key, a principal or a path).
//
// Pure data plus pure functions; thread-safe.
#ifndef STAGGER_CORE_METRICS_METRIC_CATALOG_H_
#define STAGGER_CORE_METRICS_METRIC_CATALOG_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stagger::metrics {

enum class MetricType : uint8_t { kCounter, kGauge, kHistogram };
// "counter" | "gauge" | "histogram" (Prometheus' TYPE names).
const char* MetricTypeName(MetricType type);

// The unit that registers the metric. ServerMetrics and SecurityMetrics
// live in staggerd; ClientMetrics in the worker that embeds the client.
enum class Registrar : uint8_t { kServerMetrics, kSecurityMetrics, kClientMetrics };
const char* RegistrarName(Registrar r);  // "ServerMetrics", ...

// The process whose /metrics page carries the metric.
enum class Exporter : uint8_t { kStaggerd, kClient };
const char* ExporterName(Exporter exporter);  // "staggerd" | "client"
constexpr Exporter ExporterOf(Registrar r) {
  return r == Registrar::kClientMetrics ? Exporter::kClient
                                        : Exporter::kStaggerd;
}

// The fixed set of values a label takes; LabelValues() lists them.
enum class LabelSet : uint8_t {
  kCall,              // admit | report
  kVerdict,           // engine::VerdictName(1..4)
  kReason,            // engine::ReasonName(1..kMaxReason)
  kBreakerState,      // engine::BreakerStateName(1..kNumBreakerStates)
  kAttempt,           // "2".."20" | overflow
  kResult,            // success | failure
  kMethod,            // the six RPC methods
  kBatchMethod,       // AdmitBatch | ReportBatch
  kStateLoadFailure,  // why the state file was not loaded
  kAuthzService,      // the services a denied call was for, or "other"
  kDenyCause,         // deny_rule | no_allow_rule
  kAdminAction,       // pause | resume | reset | force_breaker
  kClientErrorCode,   // gRPC status code names the client counts
  kDirection,         // in | out
  kDisableTrigger,    // operator | unavailable | permanent_failures
  kCountsDropCause,   // bucket_cap | agent_rate | endpoint_share
  kCountReport,       // applied | lost | duplicate
  kCountKind,         // first_attempts | successes
};
inline constexpr int kNumLabelSets = 18;

// Label values that are not some other layer's names, in the order the
// registering code indexes them (ServerMetrics::Call, ::Method,
// SecurityMetrics::DenyCause, ...).
inline constexpr std::array<const char*, 2> kCallLabels = {"admit", "report"};
inline constexpr std::array<const char*, 6> kMethodLabels = {
    "Admit",       "Report",      "AdmitBatch",
    "ReportBatch", "GetEndpoint", "ListEndpoints"};
inline constexpr std::array<const char*, 2> kBatchMethodLabels = {
    "AdmitBatch", "ReportBatch"};
// Index 0 is success, 1 failure.
inline constexpr std::array<const char*, 2> kResultLabels = {"success",
                                                             "failure"};
// stagger_retry_delay_seconds{attempt}: "2".."kMaxAttemptLabel", then
// "overflow" (kAttemptLabels.back()). kAttemptLabels[a - kMinAttemptLabel]
// is attempt a's label.
inline constexpr int kMinAttemptLabel = 2;
inline constexpr int kMaxAttemptLabel = 20;
inline constexpr std::array<const char*,
                            kMaxAttemptLabel - kMinAttemptLabel + 2>
    kAttemptLabels = {"2",  "3",  "4",  "5",  "6",  "7",  "8",
                      "9",  "10", "11", "12", "13", "14", "15",
                      "16", "17", "18", "19", "20", "overflow"};
// stagger_state_load_failures_total{reason}: state::LoadOutcomeName of
// every load outcome but "loaded" (tests/state holds the two together).
inline constexpr std::array<const char*, 5> kStateLoadFailureLabels = {
    "missing", "unreadable", "truncated", "corrupt", "incompatible_version"};
// stagger_authz_denied_total{service}: the services staggerd serves, then
// "other" (kAuthzServiceLabels.back()) for any other method path.
inline constexpr std::array<const char*, 6> kAuthzServiceLabels = {
    "stagger.v1.RetryCoordinator", "stagger.v1.Admin", "stagger.v1.AgentSync",
    "stagger.v1.EndpointWatch", "grpc.health.v1.Health", "other"};
inline constexpr std::array<const char*, 2> kDenyCauseLabels = {
    "deny_rule", "no_allow_rule"};
inline constexpr std::array<const char*, 6> kAdminActionLabels = {
    "pause", "resume", "reset", "force_breaker", "disable", "enable"};
// stagger_endpoint_disables_total{trigger}: engine::DisableTrigger 1..3,
// in order.
inline constexpr std::array<const char*, 3> kDisableTriggerLabels = {
    "operator", "unavailable", "permanent_failures"};
// Index 0 is in (received), 1 out (sent).
inline constexpr std::array<const char*, 2> kDirectionLabels = {"in", "out"};
// stagger_sync_counts_dropped_total{cause}, in ServerMetrics::CountsDrop
// order (server/service/count_guard.h says what each is).
inline constexpr std::array<const char*, 3> kCountsDropCauseLabels = {
    "bucket_cap", "agent_rate", "endpoint_share"};
// stagger_count_reports_total{result}, in ServerMetrics' order.
inline constexpr std::array<const char*, 3> kCountReportLabels = {
    "applied", "lost", "duplicate"};
// stagger_counted_total{kind}: index 0 first attempts, 1 successes.
inline constexpr std::array<const char*, 2> kCountKindLabels = {
    "first_attempts", "successes"};
// gRPC status code names by code number (grpc::StatusCode 0..16).
inline constexpr std::array<const char*, 17> kGrpcCodeNames = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED"};

// Every value of `set`, in registration order. Static storage.
const std::vector<const char*>& LabelValues(LabelSet set);

struct LabelSpec {
  std::string_view name;
  LabelSet values;
};

enum class MetricId : uint8_t {
  kDecisions,
  kRetryDelay,
  kRetryAfter,
  kRetryAfterClamped,
  kBudgetRefusals,
  kUntrackedDecisions,
  kPaceCuts,
  kMisroutedRequests,
  kSyncMessages,
  kLeaseGrants,
  kCountReports,
  kCounted,
  kNotClearEntries,
  kLeases,
  kSyncCountsDropped,
  kWaitingCalls,
  kWaitingOverflows,
  kBreakerTransitions,
  kEndpoints,
  kEndpointsTracked,
  kEndpointsEvicted,
  kEndpointsDisabled,
  kEndpointDisables,
  kWatchStreams,
  kWatchEvents,
  kWatchResyncs,
  kConfigReloads,
  kStateLoadFailures,
  kStateEndpointsRestored,
  kStateSaves,
  kStateLastSaveTimestamp,
  kAuthzDenied,
  kAuthzPolicyReloads,
  kAdminActions,
  kRpcDuration,
  kBatchSize,
  kClientFallbackDecisions,
  kClientCoordinatorErrors,
  kClientCoordinatorUp,
  kClientLeaseDecisions,
  kClientLeases,
  kClientSyncStreamsUp,
  kClientSyncFlushes,
  kClientSyncReconnects,
};
inline constexpr int kNumMetrics = 44;
inline constexpr int kMaxLabels = 3;

struct MetricSpec {
  MetricId id;
  std::string_view name;
  MetricType type;
  Registrar registrar;
  int num_labels;
  std::array<LabelSpec, kMaxLabels> labels;  // [0, num_labels) used
  std::string_view help;

  constexpr Exporter exporter() const { return ExporterOf(registrar); }
};

// docs/OBSERVABILITY.md's metric table lists the same metrics in the same
// order.
inline constexpr std::array<MetricSpec, kNumMetrics> kMetricCatalog = {{
    {MetricId::kDecisions, "stagger_decisions_total", MetricType::kCounter,
     Registrar::kServerMetrics, 3,
     {{{"call", LabelSet::kCall},
       {"verdict", LabelSet::kVerdict},
       {"reason", LabelSet::kReason}}},
     "Decisions returned, by call (admit|report), verdict and reason. Batch "
     "items count one each."},
    {MetricId::kRetryDelay, "stagger_retry_delay_seconds",
     MetricType::kHistogram, Registrar::kServerMetrics, 1,
     {{{"attempt", LabelSet::kAttempt}}},
     "Realised delay before each retry (a Report answered PROCEED with "
     "reason BACKOFF or RETRY_AFTER), in seconds, by the retry's attempt "
     "number (2..K, then overflow)."},
    {MetricId::kRetryAfter, "stagger_retry_after_total", MetricType::kCounter,
     Registrar::kServerMetrics, 0, {},
     "Failure reports that carried the endpoint's Retry-After."},
    {MetricId::kRetryAfterClamped, "stagger_retry_after_clamped_total",
     MetricType::kCounter, Registrar::kServerMetrics, 0, {},
     "Retry-After values above the policy's retry_after_max, clamped to it."},
    {MetricId::kBudgetRefusals, "stagger_budget_refusals_total",
     MetricType::kCounter, Registrar::kServerMetrics, 0, {},
     "Retries deferred because the endpoint's fleet-wide retry budget was "
     "empty (decisions with reason BUDGET_EXHAUSTED)."},
    {MetricId::kUntrackedDecisions, "stagger_untracked_decisions_total",
     MetricType::kCounter, Registrar::kServerMetrics, 0, {},
     "Decisions made from fresh, unstored state because the endpoint table "
     "was full (limits.max_endpoints): no fleet-wide backoff, budget or "
     "breaker for those calls."},
    {MetricId::kPaceCuts, "stagger_pace_cuts_total", MetricType::kCounter,
     Registrar::kServerMetrics, 0, {},
     "Cuts of an endpoint's learned release pace: released attempts failed "
     "while it was serving (overload), so its pace went down to the goodput "
     "measured."},
    {MetricId::kMisroutedRequests, "stagger_misrouted_requests_total",
     MetricType::kCounter, Registrar::kServerMetrics, 0, {},
     "Decision requests (batch items count one each) for endpoint keys this "
     "replica does not own under its view of the replicas (--replicas); "
     "answered all the same."},
    {MetricId::kSyncMessages, "stagger_sync_messages_total",
     MetricType::kCounter, Registrar::kServerMetrics, 1,
     {{{"direction", LabelSet::kDirection}}},
     "Messages on the lease streams of stagger-agents (stagger.v1.AgentSync), "
     "received (in) and sent (out); with the decisions, the coordinator's "
     "cost per delivery."},
    {MetricId::kLeaseGrants, "stagger_lease_grants_total",
     MetricType::kCounter, Registrar::kServerMetrics, 0, {},
     "Stream leases renewed for agents (every message up asks for one)."},
    {MetricId::kCountReports, "stagger_count_reports_total",
     MetricType::kCounter, Registrar::kServerMetrics, 1,
     {{{"result", LabelSet::kCountReport}}},
     "Agents' count reports of local answers: applied (each once, in "
     "order), lost (dropped unsent by an agent that kept too many) and "
     "duplicate (re-sent after a reconnect, already applied; not applied "
     "again). Updated every second."},
    {MetricId::kCounted, "stagger_counted_total", MetricType::kCounter,
     Registrar::kServerMetrics, 1, {{{"kind", LabelSet::kCountKind}}},
     "What agents answered under leases, as the count reports applied here "
     "say: first attempts admitted and successes answered. Summed over the "
     "agents, it equals their stagger_client_lease_decisions_total when "
     "every count arrived exactly once."},
    {MetricId::kNotClearEntries, "stagger_not_clear_entries",
     MetricType::kGauge, Registrar::kServerMetrics, 0, {},
     "Entries of this replica's not-clear set, which agents decide centrally: "
     "endpoints, prefix pauses, members stood in for (updated every second)."},
    {MetricId::kLeases, "stagger_leases", MetricType::kGauge,
     Registrar::kServerMetrics, 0, {},
     "Agent streams holding a live lease from this replica (updated every "
     "second)."},
    {MetricId::kSyncCountsDropped, "stagger_sync_counts_dropped_total",
     MetricType::kCounter, Registrar::kServerMetrics, 1,
     {{{"cause", LabelSet::kCountsDropCause}}},
     "Endpoint entries of agents' count reports cut or dropped by the caps: "
     "a bucket over the answers it may carry (bucket_cap, cut to it), an "
     "agent over its buckets a second (agent_rate), a key the table may not "
     "take for counts (endpoint_share)."},
    {MetricId::kWaitingCalls, "stagger_waiting_calls", MetricType::kGauge,
     Registrar::kServerMetrics, 0, {},
     "Waiting Admits (AdmitRequest.wait) held now, answered when the endpoint "
     "can take them or their wait runs out."},
    {MetricId::kWaitingOverflows, "stagger_waiting_overflows_total",
     MetricType::kCounter, Registrar::kServerMetrics, 0, {},
     "Waiting Admits answered at once because --max_waiting_calls were "
     "already held."},
    {MetricId::kBreakerTransitions, "stagger_breaker_transitions_total",
     MetricType::kCounter, Registrar::kServerMetrics, 2,
     {{{"from", LabelSet::kBreakerState}, {"to", LabelSet::kBreakerState}}},
     "Circuit-breaker state changes of any endpoint, by from and to state "
     "(CLOSED, OPEN, HALF_OPEN)."},
    {MetricId::kEndpoints, "stagger_endpoints", MetricType::kGauge,
     Registrar::kServerMetrics, 1,
     {{{"breaker_state", LabelSet::kBreakerState}}},
     "Tracked endpoints by circuit-breaker state, at scrape time."},
    {MetricId::kEndpointsTracked, "stagger_endpoints_tracked",
     MetricType::kGauge, Registrar::kServerMetrics, 0, {},
     "Endpoints whose state the server holds, at scrape time."},
    {MetricId::kEndpointsEvicted, "stagger_endpoints_evicted_total",
     MetricType::kCounter, Registrar::kServerMetrics, 0, {},
     "Endpoints dropped from the table (idle eviction or a full table), "
     "since the server started."},
    {MetricId::kEndpointsDisabled, "stagger_endpoints_disabled",
     MetricType::kGauge, Registrar::kServerMetrics, 0, {},
     "Endpoints disabled now (every Admit answered GIVE_UP with reason "
     "ENDPOINT_DISABLED), at scrape time."},
    {MetricId::kEndpointDisables, "stagger_endpoint_disables_total",
     MetricType::kCounter, Registrar::kServerMetrics, 1,
     {{{"trigger", LabelSet::kDisableTrigger}}},
     "Endpoints disabled since the server started, by trigger: operator "
     "(Admin/Disable), unavailable (breaker away from CLOSED for "
     "disable.after_unavailable), permanent_failures."},
    {MetricId::kWatchStreams, "stagger_watch_streams", MetricType::kGauge,
     Registrar::kServerMetrics, 0, {},
     "Watch streams (stagger.v1.EndpointWatch/Watch) open now."},
    {MetricId::kWatchEvents, "stagger_watch_events_total",
     MetricType::kCounter, Registrar::kServerMetrics, 0, {},
     "Events written to this replica's change log (endpoint transitions, "
     "pauses, disables), whether or not anyone watches."},
    {MetricId::kWatchResyncs, "stagger_watch_resyncs_total",
     MetricType::kCounter, Registrar::kServerMetrics, 0, {},
     "Watchers told they missed events: a token from before a restart, "
     "past the history, or a watcher that fell behind it."},
    {MetricId::kConfigReloads, "stagger_config_reloads_total",
     MetricType::kCounter, Registrar::kServerMetrics, 1,
     {{{"result", LabelSet::kResult}}},
     "Configuration reloads by result (success|failure); a failed reload "
     "keeps the old configuration."},
    {MetricId::kStateLoadFailures, "stagger_state_load_failures_total",
     MetricType::kCounter, Registrar::kServerMetrics, 1,
     {{{"reason", LabelSet::kStateLoadFailure}}},
     "State file (--state_file) not loaded at start, by reason; the server "
     "started with fresh state."},
    {MetricId::kStateEndpointsRestored, "stagger_state_endpoints_restored",
     MetricType::kGauge, Registrar::kServerMetrics, 0, {},
     "Endpoints restored from the state file at start."},
    {MetricId::kStateSaves, "stagger_state_saves_total", MetricType::kCounter,
     Registrar::kServerMetrics, 1, {{{"result", LabelSet::kResult}}},
     "State file snapshots written, by result (success|failure)."},
    {MetricId::kStateLastSaveTimestamp,
     "stagger_state_last_save_timestamp_seconds", MetricType::kGauge,
     Registrar::kServerMetrics, 0, {},
     "Unix time of the last state file snapshot written; 0 if none yet."},
    {MetricId::kAuthzDenied, "stagger_authz_denied_total",
     MetricType::kCounter, Registrar::kSecurityMetrics, 2,
     {{{"service", LabelSet::kAuthzService},
       {"cause", LabelSet::kDenyCause}}},
     "Calls refused by the authorization policy (PERMISSION_DENIED), by "
     "service and cause"},
    {MetricId::kAuthzPolicyReloads, "stagger_authz_policy_reloads_total",
     MetricType::kCounter, Registrar::kSecurityMetrics, 1,
     {{{"result", LabelSet::kResult}}},
     "Authorization policy reloads by result; a failure keeps the policy in "
     "force"},
    {MetricId::kAdminActions, "stagger_admin_actions_total",
     MetricType::kCounter, Registrar::kSecurityMetrics, 1,
     {{{"action", LabelSet::kAdminAction}}},
     "Operator actions through stagger.v1.Admin that changed state, by "
     "action"},
    {MetricId::kRpcDuration, "stagger_rpc_duration_seconds",
     MetricType::kHistogram, Registrar::kServerMetrics, 1,
     {{{"method", LabelSet::kMethod}}},
     "Server-side handling time of each RPC, in seconds, by method."},
    {MetricId::kBatchSize, "stagger_batch_size", MetricType::kHistogram,
     Registrar::kServerMetrics, 1, {{{"method", LabelSet::kBatchMethod}}},
     "Items per batch request (AdmitBatch, ReportBatch), in items."},
    {MetricId::kClientFallbackDecisions,
     "stagger_client_fallback_decisions_total", MetricType::kCounter,
     Registrar::kClientMetrics, 2,
     {{{"call", LabelSet::kCall}, {"verdict", LabelSet::kVerdict}}},
     "Decisions the Stagger client made locally because the coordinator was "
     "slow, unreachable or considered down."},
    {MetricId::kClientCoordinatorErrors,
     "stagger_client_coordinator_errors_total", MetricType::kCounter,
     Registrar::kClientMetrics, 1, {{{"code", LabelSet::kClientErrorCode}}},
     "Coordinator calls that failed and made the Stagger client fall back, "
     "by gRPC status code."},
    {MetricId::kClientCoordinatorUp, "stagger_client_coordinator_up",
     MetricType::kGauge, Registrar::kClientMetrics, 0, {},
     "1 while the Stagger client considers the coordinator reachable, 0 "
     "while it decides locally."},
    {MetricId::kClientLeaseDecisions, "stagger_client_lease_decisions_total",
     MetricType::kCounter, Registrar::kClientMetrics, 2,
     {{{"call", LabelSet::kCall}, {"verdict", LabelSet::kVerdict}}},
     "Decisions the Stagger client (or stagger-agent) answered itself under a "
     "coordinator's lease: first attempts (PROCEED) and successes (DONE)."},
    {MetricId::kClientLeases, "stagger_client_leases", MetricType::kGauge,
     Registrar::kClientMetrics, 0, {},
     "Coordinator replicas whose stream lease the Stagger client (or "
     "stagger-agent) holds now (updated every second)."},
    {MetricId::kClientSyncStreamsUp, "stagger_client_sync_streams_up",
     MetricType::kGauge, Registrar::kClientMetrics, 0, {},
     "Coordinator replicas the Stagger client's lease stream is connected "
     "to now (updated every second)."},
    {MetricId::kClientSyncFlushes, "stagger_client_sync_flushes_total",
     MetricType::kCounter, Registrar::kClientMetrics, 0, {},
     "Messages sent on the lease streams (renewals with counts and "
     "acknowledgements), over all replicas."},
    {MetricId::kClientSyncReconnects, "stagger_client_sync_reconnects_total",
     MetricType::kCounter, Registrar::kClientMetrics, 0, {},
     "Lease streams reopened after they broke, over all replicas."},
}};

constexpr const MetricSpec& Metric(MetricId id) {
  return kMetricCatalog[static_cast<int>(id)];
}

// The catalog as JSON, for tools outside C++ (stagger-metric-catalog):
//   {"metrics": [{"name", "type", "exporter", "registrar", "help",
//                 "labels": [{"name", "values": [...]}, ...]}, ...]}
// in catalog order, label values in LabelValues() order.
std::string CatalogJson();

}  // namespace stagger::metrics

#endif  // STAGGER_CORE_METRICS_METRIC_CATALOG_H_
