// EndpointRecord: one endpoint's state as plain data, for the state file
// (staggerd --state_file; proto/stagger/v1/snapshot.proto is its wire form,
// server/state/ converts). Every instant is absolute Unix time, unwrapped
// from the engine's compact forms (ms or slot indexes mod 2^32), so a
// record restored after a restart means the same instants: an open breaker
// stays open for exactly its remaining time.
//
// Each part is written by its component's Save() and read back by its
// Restore() (circuit_breaker.h, retry_budget.h, capacity_estimator.h,
// release_pacer.h); the engine exports and imports whole records. Plain
// values only: Abseil-free, no proto, no I/O.
#ifndef STAGGER_CORE_ENGINE_ENDPOINT_RECORD_H_
#define STAGGER_CORE_ENGINE_ENDPOINT_RECORD_H_

#include <array>
#include <cstdint>
#include <string>

#include "core/engine/decision.h"

namespace stagger::engine {

// A sliding window (sliding_window.h): slot i covers Unix time
// [i, i + 1) x slot_ns. slots[k] = the counts of slot head_slot - k.
// slot_ns == 0: no window recorded.
struct WindowRecord {
  static constexpr int kSlots = 5;
  int64_t slot_ns = 0;
  int64_t head_slot = 0;
  std::array<std::array<uint32_t, 2>, kSlots> slots{};  // {a, b}, newest first
};

struct BreakerRecord {
  BreakerState state = BreakerState::kClosed;
  int64_t time_ns = 0;  // OPEN: open until; HALF_OPEN: the latest probe
  uint32_t consecutive_failures = 0;
  uint32_t probes_in_flight = 0;
  uint32_t probe_successes = 0;
  uint32_t trips = 0;
  WindowRecord window;  // a = attempts, b = failures
};

struct ServedRecord {
  int64_t unix_second = 0;
  uint32_t this_second = 0;
  uint32_t previous_second = 0;
};

// Instants in Unix ms, 0 = none (as in the estimator).
struct CapacityRecord {
  float pace = 0;
  float threshold = 0;
  float before_cuts = 0;
  float successes = 0;
  float failures = 0;
  int64_t rates_at_ms = 0;
  int64_t measured_from_ms = 0;
  int64_t last_success_ms = 0;
  int64_t cut_round_end_ms = 0;
  int64_t streak_start_ms = 0;
  uint32_t rtt_ms = 0;
  uint8_t phase = 1;   // CapacityEstimator::Phase
  uint8_t source = 1;  // CapacityEstimator::Source
};

struct PacerRecord {
  int64_t tail_ns = 0;
  int64_t gate_ns = 0;
  int64_t release_end_ns = 0;
  int64_t closed_since_ns = 0;
  float parked_seconds = 0;
  float backlog = 0;
};

struct EndpointRecord {
  std::string key;
  int64_t last_seen_ns = 0;
  int64_t previous_delay_ns = 0;
  int64_t retry_after_until_ns = 0;
  BreakerRecord breaker;
  WindowRecord budget;  // a = first attempts, b = failed retries
  ServedRecord served;
  bool has_release = false;  // the gate has closed: capacity and pacer hold
  CapacityRecord capacity;
  PacerRecord pacer;
  // The breaker away from CLOSED since (Unix ns; 0: CLOSED): the
  // disable.after_unavailable trigger's clock (has_release only).
  int64_t unavailable_since_ns = 0;
};

// What an import of records did with them (Engine::ImportState).
struct ImportStats {
  int64_t restored = 0;
  int64_t stale = 0;     // idle longer than limits.idle_eviction
  int64_t rejected = 0;  // a key the current limits refuse
  int64_t skipped = 0;   // already tracked, or the table is full
};

// Widens a compact instant (Unix units mod 2^32) to the full value nearest
// `now` (exact for instants within 2^31 units of it); 0 stays 0 ("none").
inline int64_t UnwrapNear(uint32_t compact, int64_t now) {
  if (compact == 0) return 0;
  return now + static_cast<int32_t>(compact - static_cast<uint32_t>(now));
}

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_ENDPOINT_RECORD_H_
