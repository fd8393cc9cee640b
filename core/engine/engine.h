// Engine: the retry coordinator's decision logic and per-endpoint state.
//
// Admit() answers "may I send attempt n now?"; Report() records an attempt's
// outcome and, for a failure, answers for attempt n+1. The decision order for
// a failure report (docs/API.md, "The decision order") is: validate -> a
// disabled endpoint (GIVE_UP(ENDPOINT_DISABLED), nothing changes) -> an
// operator's pause (DEFER(PAUSED), nothing changes) -> not
// retryable -> remember Retry-After, feed the breaker (or, for overload, the
// learned pace) -> attempt limit -> breaker -> overload (wait for a slot) ->
// retry budget (an empty budget answers at once, before any delay is
// computed) -> policy delay -> Retry-After -> deadline/horizon (a last-chance
// attempt just before it, GIVE_UP only when none can start in time).
// First attempts fund the retry budget when admitted; a failed retry spends
// from it when reported (unless it was overload), and Admit and the failure
// report only check the balance: a retry that succeeds costs nothing.
//
// Parked deliveries come back through the endpoint's release queue
// (release_pacer.h) at a pace learned from the fleet's answers
// (capacity_estimator.h); that state is allocated when the endpoint is
// first unavailable (breaker tripped or a Retry-After window), since most
// endpoints never need it.
//
// State per endpoint is shared by every caller (the fleet) and soft: losing
// it loses only backoff history. The table is sharded by key hash, one
// absl::Mutex per shard, no global lock on the decision path, and a lookup
// of a known endpoint allocates nothing.
//
// Thread-safe: every method may be called concurrently. Time comes only from
// the injected Clock and randomness only from the injected RandomSource.
//
// This class is the facade; the parts are their own units:
//   key_validation.h   what a valid endpoint key is
//   endpoint_state.h   one endpoint's state, its key in the same allocation
//   compiled_config.h  a configuration as decisions read it; reloads
//   endpoint_table.h   sharding, lookup, the max_endpoints limit, eviction,
//                      counters
//   decision_path.h    Admit and Report as columns of named gates
//   inspection.h       snapshots, list pages and stats
//   state_transfer.h   one endpoint's state to and from a state-file record
#ifndef STAGGER_CORE_ENGINE_ENGINE_H_
#define STAGGER_CORE_ENGINE_ENGINE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include <functional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "core/engine/clock.h"
#include "core/engine/decision.h"
#include "core/engine/disable_table.h"
#include "core/engine/endpoint_record.h"
#include "core/engine/endpoint_condition.h"
#include "core/engine/engine_config.h"
#include "core/engine/inspection.h"
#include "core/engine/lease_terms.h"
#include "core/engine/pause_table.h"
#include "core/engine/random.h"

namespace stagger::engine {

class EndpointTable;

class Engine {
 public:
  // `clock` and `random` must outlive the engine. `config` must pass
  // ValidateEngineConfig (CHECK-fails otherwise: validate first).
  Engine(EngineConfig config, const Clock* clock, RandomSource* random);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // InvalidArgument naming the field ("endpoint", "attempt", "outcome",
  // "retry_after") for bad input; otherwise a decision. Never changes state
  // on an error.
  absl::StatusOr<Decision> Admit(const AdmitInput& in);
  absl::StatusOr<Decision> Report(const ReportInput& in);

  // Waiting admission (decision.h, "Waiting admission"): one step of a
  // waiting call's life; `w` is its holder's (since/until set at kArrive).
  // At kArrive the input is checked as Admit checks it (InvalidArgument
  // naming the field, no state changed).
  absl::StatusOr<WaitOutcome> AdmitWaiting(const AdmitInput& in, WaitState* w,
                                           WaitStep step);

  // The checks Admit/Report make, without deciding (for batch validation).
  absl::Status ValidateAdmit(const AdmitInput& in) const;
  absl::Status ValidateReport(const ReportInput& in) const;

  // Replaces the configuration atomically: each decision sees the old or the
  // new config, never a mix. Endpoint state is kept; endpoints re-resolve
  // their policy. `config` must pass ValidateEngineConfig.
  void SetConfig(EngineConfig config);
  EngineConfig config() const;

  // Inspection: NotFound if `endpoint` is not tracked. Does not touch state.
  absl::StatusOr<EndpointSnapshot> Inspect(absl::string_view endpoint) const;
  // Up to `page_size` endpoints with keys > `after`, optionally only those
  // whose breaker is in `state`, in key order.
  ListPage List(absl::string_view after, int page_size,
                std::optional<BreakerState> state) const;
  // The same, but only endpoints that are not clear now (the status page):
  // NotClearAt (inspection.h) or covered by a pause in force. One pass over
  // the table under its shard locks, as List; page.scanned / page.matched
  // count the endpoints after `after` it examined / found not clear.
  ListPage ListNotClear(absl::string_view after, int page_size) const;

  // Evicts endpoints idle longer than limits.idle_eviction. Called
  // periodically by the server; also happens on demand when the table is
  // full. Returns the number evicted.
  int64_t EvictIdle();

  EngineStats Stats() const;
  // The clock decisions read (a lease replica stamps its messages with it).
  const Clock* clock() const { return clock_; }

  // The state file (endpoint_record.h; server/state/ writes and reads it).
  // ExportState calls `sink` with the records of one table shard at a
  // time, copied under the shard's lock and passed without it (records of
  // different shards are taken moments apart).
  void ExportState(
      absl::FunctionRef<void(absl::Span<const EndpointRecord>)> sink) const;
  // Restores records (ExportState's, maybe another process's under another
  // configuration). Dropped: records idle longer than limits.idle_eviction
  // now (stale), keys the current limits refuse (rejected), endpoints
  // already tracked or beyond limits.max_endpoints (skipped). A restored
  // endpoint's policy is resolved from the configuration in force; a window
  // whose width changed starts empty.
  ImportStats ImportState(absl::Span<const EndpointRecord> records);

  // Operator controls (stagger.v1.Admin). Pauses (pause_table.h) are the
  // first gate of every decision: while one covers the endpoint, Admit and
  // every report but SUCCESS answer DEFER(PAUSED) until it ends (spread
  // over deferral.spread after it), without touching the endpoint's state:
  // failures during an operator's pause teach nothing, and nothing is
  // given up. Pauses are not endpoint state: config reloads, eviction and
  // ResetEndpoint keep them.
  PauseTable& pauses() { return pauses_; }
  const PauseTable& pauses() const { return pauses_; }
  // Tracks `endpoint` (a valid key) if it is not, as a decision would, and
  // changes nothing else. False if the table is full (it stays untracked).
  bool Track(absl::string_view endpoint);
  // Forgets the endpoint's state, as eviction does. NotFound if untracked.
  absl::Status ResetEndpoint(absl::string_view endpoint);
  // Forces its breaker OPEN for `open_for` (> 0) or CLOSED (CircuitBreaker::
  // ForceOpen/ForceClosed), counted as a transition. NotFound if untracked.
  absl::StatusOr<EndpointSnapshot> ForceBreaker(absl::string_view endpoint,
                                                BreakerState to,
                                                absl::Duration open_for);
  // Disabled endpoints (docs/API.md, "Disabled endpoints"): every Admit
  // and every report but SUCCESS is answered GIVE_UP(ENDPOINT_DISABLED),
  // nothing learnt, until Enable. A disabled endpoint stays tracked (never
  // evicted; ResetEndpoint keeps the disable) and is not clear (its
  // condition's `disabled`). Disable: an operator's, `d`'s reason, by and
  // operation_id kept (since = now); InvalidArgument for a bad key,
  // ResourceExhausted when DisableTable::kMaxDisabled are disabled or the
  // endpoint cannot be tracked (limits.max_endpoints). Disabling a disabled
  // endpoint replaces its disable. Enable: NotFound if it is not disabled;
  // both triggers then count from now. The policy's triggers
  // (endpoint_lifecycle.h) disable by themselves.
  absl::Status Disable(absl::string_view endpoint, engine::Disable d);
  absl::StatusOr<engine::Disable> Enable(absl::string_view endpoint,
                                         const engine::Enable& e);
  // A disable a state file kept, as it was (trigger, since). Call after
  // ImportState: a record imported later finds the endpoint tracked.
  absl::Status RestoreDisable(engine::Disable d);
  const DisableTable& disables() const { return disables_; }

  // Leases (core/lease/, lease_terms.h). Whether `endpoint` (a valid key)
  // is clear for a lease now, and on what terms; an untracked endpoint is
  // clear on its policy's terms.
  LeaseTerms LeaseTermsFor(absl::string_view endpoint);
  // A lease holder's counts for `endpoint` (a valid key), learned at the
  // times they happened. Counts may start tracking an endpoint only while
  // the table holds fewer than kLateCountsEndpointShare of
  // limits.max_endpoints: beyond, counts for an untracked key are dropped
  // (false; counted in Stats().late_counts_dropped), so fabricated keys
  // cannot fill the table that decisions need.
  static constexpr double kLateCountsEndpointShare = 0.5;
  bool ApplyLateCounts(absl::string_view endpoint,
                       absl::Span<const LateCounts> buckets);
  // The latest sign that `endpoint` takes deliveries again: its last
  // success, or the end of a Retry-After window that has passed
  // (decision_path.h); InfinitePast if untracked. A waiting call held only
  // by its own backoff may go once this is after its arrival (decision.h,
  // "Waiting admission"). Reads; changes nothing.
  absl::Time LastEvidence(absl::string_view endpoint) const;
  // An outside reason to hold a half-open probe back (leases: a holder of
  // an older epoch may still admit locally; core/lease/lease_ledger.h).
  // Asked only when a probe would be admitted, under the endpoint's shard
  // lock: it must not call back into the engine. A held probe answers
  // DEFER(HALF_OPEN_BUSY). Set before decisions start; null: none.
  using ProbeHold =
      std::function<bool(absl::string_view endpoint, absl::Time now)>;
  void set_probe_hold(ProbeHold hold) { probe_hold_ = std::move(hold); }

  // Conditions (endpoint_condition.h): every change of a tracked
  // endpoint's condition goes to `sink`, under the endpoint's shard lock.
  // Set before decisions start; null: none. RefreshCondition(endpoint)
  // reports a change that time alone made (OPEN reads HALF_OPEN, a
  // Retry-After window or a release ended, failures aged out of the
  // window); nothing if untracked.
  void set_condition_sink(ConditionSink* sink);
  void RefreshCondition(absl::string_view endpoint);

  // A probe admitted with `admission` will not be sent (the waiting call it
  // was released to went away): its slot is free again. Nothing if the
  // token is not a probe of the endpoint's current half-open period.
  void ReturnProbe(absl::string_view endpoint, uint64_t admission);

  int max_batch_size() const {
    return max_batch_size_.load(std::memory_order_relaxed);
  }

 private:
  // One decision on `in.endpoint`'s state under its shard's lock: builds
  // the decision context (now, effective deadline, randomness, pause) and
  // hands it to `decide` (DecideAdmit, DecideReport or DecideWaiting);
  // returns what it returns. `in` is validated.
  template <typename Input, typename DecideFn>
  auto DecideOn(const Input& in, bool after_failure, DecideFn decide);
  // Disables the tracked `st` with `d` (table, bit, feed, count).
  absl::Status DisableLocked(EndpointState& st, const PolicyParams& p,
                             absl::Time now, engine::Disable d);
  // The policy's after_unavailable trigger, before a decision or at a
  // refresh.
  void CheckUnavailable(EndpointState& st, const PolicyParams& p,
                        absl::Time now);

  const Clock* clock_;
  RandomSource* random_;
  // Names this engine's probe admission tokens (admission.h).
  const uint32_t token_salt_;
  ProbeHold probe_hold_;
  ConditionSink* condition_sink_ = nullptr;
  PauseTable pauses_;
  DisableTable disables_;
  std::array<std::atomic<int64_t>, kMaxDisableTrigger + 1> disables_total_{};
  // Serialises SetConfig: two reloads interleaving their walks over the
  // shards would leave some shards on one configuration for good.
  absl::Mutex set_config_mu_;
  std::unique_ptr<EndpointTable> table_;
  std::atomic<int64_t> late_counts_dropped_{0};
  std::atomic<int> max_key_bytes_;
  std::atomic<int> max_batch_size_;
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_ENGINE_H_
