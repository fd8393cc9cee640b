// The metric names Stagger exports, with their labels and the fixed label
// values, as the README's Observability section lists them. The rules,
// dashboard and their tests may reference only these (plus Prometheus' own
// `up`). A metric renamed in server/metrics must be renamed here, and the
// deploy tests then show every rule and panel that still uses the old name.
"use strict";

const VERDICTS = ["PROCEED", "DEFER", "GIVE_UP", "DONE"];
const REASONS = [
  "INITIAL_JITTER", "BACKOFF", "RETRY_AFTER", "CIRCUIT_OPEN", "HALF_OPEN_PROBE",
  "BUDGET_EXHAUSTED", "ATTEMPTS_EXHAUSTED", "NOT_RETRYABLE", "DEADLINE",
  "SUCCEEDED", "HALF_OPEN_BUSY", "RETRY_AFTER_WINDOW", "ADMITTED", "PACED",
  "LAST_CHANCE", "PAUSED",
];
const BREAKER_STATES = ["CLOSED", "OPEN", "HALF_OPEN"];
const METHODS = ["Admit", "Report", "AdmitBatch", "ReportBatch", "GetEndpoint", "ListEndpoints"];
const CALLS = ["admit", "report"];

// Labels every scraped series can carry: Prometheus' target labels and the
// ones Kubernetes service discovery / the Prometheus Operator add.
const TARGET_LABELS = ["job", "instance", "namespace", "pod", "service", "container", "endpoint"];

// name -> { type, labels: { label: allowed values array | RegExp | null (any) } }
const METRICS = {
  stagger_decisions_total: {
    type: "counter",
    labels: { call: CALLS, verdict: VERDICTS, reason: REASONS },
  },
  // attempt: "2".."N" (N = the largest max_attempts configured, at most 20)
  // and "overflow".
  stagger_retry_delay_seconds: {
    type: "histogram",
    labels: { attempt: /^(?:[2-9]|[1-9][0-9]+|overflow)$/ },
  },
  stagger_retry_after_total: { type: "counter", labels: {} },
  stagger_retry_after_clamped_total: { type: "counter", labels: {} },
  stagger_budget_refusals_total: { type: "counter", labels: {} },
  stagger_breaker_transitions_total: {
    type: "counter",
    labels: { from: BREAKER_STATES, to: BREAKER_STATES },
  },
  stagger_endpoints: { type: "gauge", labels: { breaker_state: BREAKER_STATES } },
  stagger_endpoints_tracked: { type: "gauge", labels: {} },
  stagger_endpoints_evicted_total: { type: "counter", labels: {} },
  stagger_untracked_decisions_total: { type: "counter", labels: {} },
  stagger_pace_cuts_total: { type: "counter", labels: {} },
  stagger_misrouted_requests_total: { type: "counter", labels: {} },
  stagger_config_reloads_total: {
    type: "counter",
    labels: { result: ["success", "failure"] },
  },
  stagger_state_load_failures_total: {
    type: "counter",
    labels: { reason: ["missing", "unreadable", "truncated", "corrupt", "incompatible_version"] },
  },
  stagger_state_endpoints_restored: { type: "gauge", labels: {} },
  stagger_state_saves_total: { type: "counter", labels: { result: ["success", "failure"] } },
  stagger_state_last_save_timestamp_seconds: { type: "gauge", labels: {} },
  // Security (server/security/security_metrics.h).
  stagger_authz_denied_total: {
    type: "counter",
    labels: {
      service: ["stagger.v1.RetryCoordinator", "stagger.v1.Admin", "grpc.health.v1.Health", "other"],
      cause: ["deny_rule", "no_allow_rule"],
    },
  },
  stagger_authz_policy_reloads_total: {
    type: "counter",
    labels: { result: ["success", "failure"] },
  },
  stagger_admin_actions_total: {
    type: "counter",
    labels: { action: ["pause", "resume", "reset", "force_breaker"] },
  },
  stagger_rpc_duration_seconds: { type: "histogram", labels: { method: METHODS } },
  stagger_batch_size: { type: "histogram", labels: { method: METHODS } },
  // Client side: exported by the worker processes that embed the client.
  stagger_client_fallback_decisions_total: {
    type: "counter",
    labels: { call: CALLS, verdict: VERDICTS },
  },
  // code: a gRPC status code name (UNAVAILABLE, DEADLINE_EXCEEDED, ...).
  stagger_client_coordinator_errors_total: {
    type: "counter",
    labels: { code: /^[A-Z_]+$/ },
  },
  stagger_client_coordinator_up: { type: "gauge", labels: {} },
  // Prometheus' own per-target series.
  up: { type: "gauge", labels: {} },
};

// Every series name a query may select, histogram families expanded into
// _bucket (with le), _sum and _count: name -> labels spec.
function seriesNames() {
  const out = new Map();
  for (const [name, m] of Object.entries(METRICS)) {
    if (m.type === "histogram") {
      out.set(`${name}_bucket`, { ...m.labels, le: null });
      out.set(`${name}_sum`, m.labels);
      out.set(`${name}_count`, m.labels);
    } else {
      out.set(name, m.labels);
    }
  }
  return out;
}

module.exports = { METRICS, TARGET_LABELS, REASONS, VERDICTS, METHODS, BREAKER_STATES, seriesNames };
