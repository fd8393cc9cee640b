// Inspection: read-only views of the engine for the GetEndpoint and
// ListEndpoints RPCs and for metrics.
//
// SnapshotOf() reads one endpoint's state as a decision at `now` would see
// it, without changing it (the budget is read from a copy; a breaker past
// its open time reads as HALF_OPEN). InspectEndpoint() and ListEndpoints()
// take the table's shard locks themselves, one shard at a time; a list page
// is consistent per endpoint, not across endpoints. EngineStats are the
// table's counters, read without stopping the engine.
#ifndef STAGGER_CORE_ENGINE_INSPECTION_H_
#define STAGGER_CORE_ENGINE_INSPECTION_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/engine/capacity_estimator.h"
#include "core/engine/decision.h"
#include "core/engine/disable_table.h"
#include "core/engine/pause_table.h"

namespace stagger::engine {

struct CompiledConfig;
struct EndpointState;
class EndpointTable;

// Read-only view of one endpoint (the inspection RPC).
struct EndpointSnapshot {
  std::string endpoint;
  std::string policy;  // "default" or the override's Name()
  BreakerState breaker_state = BreakerState::kClosed;
  absl::Time open_until = absl::InfinitePast();  // kOpen only
  int consecutive_trips = 0;
  int consecutive_failures = 0;
  int probes_in_flight = 0;
  int probe_successes = 0;
  absl::Duration previous_delay = absl::ZeroDuration();
  double budget_remaining = 0;  // retries allowed now
  absl::Time retry_after_until = absl::InfinitePast();  // none if past
  absl::Time last_seen = absl::InfinitePast();
  // The release side (capacity_estimator.h); has_release is false until the
  // endpoint's gate first closed.
  bool has_release = false;
  double release_rate = 0;  // deliveries/s released now, after the cap
  CapacityEstimator::Source pace_source = CapacityEstimator::Source::kStart;
  bool pace_capped = false;  // deferral.release_rate_per_second binds
  CapacityEstimator::Phase pace_phase = CapacityEstimator::Phase::kIdle;
  double pace_threshold = 0;  // capacity measured at the last cut; 0 none
  bool releasing = false;
  double backlog = 0;
  double served_per_second = 0;
  absl::Duration round_trip = absl::ZeroDuration();
  // The operator's pause covering it now (its own, or a prefix's), if any;
  // filled by the engine (pause_table.h), not by SnapshotOf.
  std::optional<Pause> pause;
  // The disable in force (disable_table.h), if any; filled by the engine.
  std::optional<Disable> disable;
};

struct ListPage {
  std::vector<EndpointSnapshot> endpoints;  // in key order
  std::string next_after;  // last key of the page; empty if last page
  int64_t total_tracked = 0;
  // Endpoints with keys > `after` the scan examined, and those of them the
  // filter kept (the page holds the first page_size of those).
  int64_t scanned = 0;
  int64_t matched = 0;
};

// Counters and gauges for metrics, read without stopping the engine.
struct EngineStats {
  int64_t tracked = 0;
  int64_t evicted_total = 0;
  std::array<int64_t, kNumBreakerStates + 1> by_breaker_state{};  // [state]
  // Endpoints disabled now, and disables since start by trigger
  // ([DisableTrigger]; restored ones are not counted).
  int64_t disabled = 0;
  std::array<int64_t, kMaxDisableTrigger + 1> disables_total{};
};

// `st` (tracked under `key`) as seen at `now` under `cfg`.
EndpointSnapshot SnapshotOf(const CompiledConfig& cfg, absl::string_view key,
                            const EndpointState& st, absl::Time now);

// NotFound naming the endpoint if it is not tracked. The caller validates
// the key.
absl::StatusOr<EndpointSnapshot> InspectEndpoint(const EndpointTable& table,
                                                 absl::string_view key,
                                                 absl::Time now);

// Up to `page_size` (>= 1) endpoints with keys > `after`, optionally only
// those whose breaker is in `state` at `now`, in key order. Endpoints
// tracked before limits.max_key_bytes was lowered are listed too.
ListPage ListEndpoints(const EndpointTable& table, absl::string_view after,
                       int page_size, std::optional<BreakerState> state,
                       absl::Time now);

// ListEndpoints with any filter: `keep` is asked, under the shard's lock,
// for each endpoint with a key > `after` (it must not call into the table).
ListPage ListMatching(const EndpointTable& table, absl::string_view after,
                      int page_size,
                      absl::FunctionRef<bool(const EndpointState&)> keep,
                      absl::Time now);

// An endpoint that is not clear at `now`, as far as its own state says: its
// breaker is not CLOSED, it is disabled, a Retry-After window runs, or a
// release of parked deliveries is in progress. (Pauses are the pause table's: the engine's
// ListNotClear adds them.)
bool NotClearAt(const EndpointState& st, absl::Time now);

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_INSPECTION_H_
