#include "core/engine/inspection.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/engine/compiled_config.h"
#include "core/engine/endpoint_state.h"
#include "core/engine/endpoint_table.h"

namespace stagger::engine {
namespace {

// The release side: learned pace and release queue.
void SnapshotRelease(const EndpointRelease& rel, const PolicyParams& p,
                     absl::Time now, EndpointSnapshot* snap) {
  const CapacityEstimator& c = rel.capacity;
  snap->has_release = true;
  snap->release_rate = c.Pace(p.deferral);
  snap->pace_source = c.source();
  snap->pace_capped = p.deferral.release_rate_per_second > 0 &&
                      snap->release_rate >= p.deferral.release_rate_per_second;
  snap->pace_phase = c.phase();
  snap->pace_threshold = c.threshold();
  snap->releasing = rel.pacer.Releasing(now);
  snap->backlog = rel.pacer.backlog();
  snap->round_trip = c.rtt();
}

void SnapshotBreaker(const CircuitBreaker& b, absl::Time now,
                     EndpointSnapshot* snap) {
  snap->breaker_state = b.StateAt(now);
  if (snap->breaker_state == BreakerState::kOpen) {
    snap->open_until = b.open_until();
  }
  snap->consecutive_trips = b.trips();
  snap->consecutive_failures = b.consecutive_failures();
  if (b.state() == BreakerState::kHalfOpen) {
    snap->probes_in_flight = b.probes_in_flight();
    snap->probe_successes = b.probe_successes();
  }
}

}  // namespace

EndpointSnapshot SnapshotOf(const CompiledConfig& cfg, absl::string_view key,
                            const EndpointState& st, absl::Time now) {
  EndpointSnapshot snap;
  snap.endpoint = std::string(key);
  const int index = cfg.IndexFor(st, key);
  snap.policy = cfg.PolicyName(index);
  const PolicyParams& p = cfg.Policy(index);
  SnapshotBreaker(st.breaker, now, &snap);
  snap.previous_delay = absl::Nanoseconds(st.previous_delay_ns);
  RetryBudget budget = st.budget;  // reading advances the window: a copy
  snap.budget_remaining = budget.Remaining(p.budget, now);
  if (st.retry_after_until_ns > absl::ToUnixNanos(now)) {
    snap.retry_after_until = absl::FromUnixNanos(st.retry_after_until_ns);
  }
  snap.last_seen = absl::FromUnixNanos(st.last_seen_ns);
  snap.served_per_second = st.served.PerSecond(now);
  if (const EndpointRelease* rel = st.release.get()) {
    SnapshotRelease(*rel, p, now, &snap);
  }
  return snap;
}

absl::StatusOr<EndpointSnapshot> InspectEndpoint(const EndpointTable& table,
                                                 absl::string_view key,
                                                 absl::Time now) {
  std::optional<EndpointSnapshot> snap;
  table.WithTracked(key, [&](const EndpointState& st,
                             const CompiledConfig& cfg) {
    snap = SnapshotOf(cfg, key, st, now);
  });
  if (!snap.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("endpoint: not tracked: \"", key, "\""));
  }
  return *std::move(snap);
}

ListPage ListEndpoints(const EndpointTable& table, absl::string_view after,
                       int page_size, std::optional<BreakerState> state,
                       absl::Time now) {
  return ListMatching(
      table, after, page_size,
      [&](const EndpointState& st) {
        return !state.has_value() || st.breaker.StateAt(now) == *state;
      },
      now);
}

ListPage ListMatching(const EndpointTable& table, absl::string_view after,
                      int page_size,
                      absl::FunctionRef<bool(const EndpointState&)> keep,
                      absl::Time now) {
  page_size = std::max(1, page_size);
  ListPage page;
  // One key more than the page tells whether another page follows.
  // KeysAfter asks `keep` only for keys > `after`: those are counted.
  std::vector<std::string> keys = table.KeysAfter(
      after, static_cast<size_t>(page_size) + 1,
      [&](const EndpointState& st) {
        ++page.scanned;
        const bool kept = keep(st);
        if (kept) ++page.matched;
        return kept;
      });
  const bool more = keys.size() > static_cast<size_t>(page_size);
  if (more) keys.resize(page_size);
  for (const std::string& key : keys) {
    // Not validated against the current max_key_bytes: an endpoint tracked
    // before the limit was lowered must still be listed (it is counted in
    // total_tracked). An endpoint evicted since the scan is left out.
    table.WithTracked(key, [&](const EndpointState& st,
                               const CompiledConfig& cfg) {
      page.endpoints.push_back(SnapshotOf(cfg, key, st, now));
    });
  }
  if (more && !keys.empty()) page.next_after = keys.back();
  page.total_tracked = table.tracked();
  return page;
}

bool NotClearAt(const EndpointState& st, absl::Time now) {
  // OPEN past its time reads HALF_OPEN: not CLOSED either way, no clock.
  if (st.breaker.state() != BreakerState::kClosed || st.disabled) return true;
  if (st.retry_after_until_ns > absl::ToUnixNanos(now)) return true;
  return st.release != nullptr && st.release->pacer.Releasing(now);
}

}  // namespace stagger::engine
