// EndpointState: everything the engine remembers about one endpoint, with
// the endpoint's key stored in the same allocation.
//
// The table holds one pointer per endpoint and a lookup compares the key
// right next to the state. New() allocates sizeof(EndpointState) plus the
// key bytes that do not fit in key_head; Delete() frees it. A scratch state
// (the table is full) is a plain value with no key. The release side
// (EndpointRelease: learned pace and release queue) is allocated only when
// the endpoint's gate first closes, since most endpoints never need it.
// Not thread-safe: the table's shard lock guards each state.
#ifndef STAGGER_CORE_ENGINE_ENDPOINT_STATE_H_
#define STAGGER_CORE_ENGINE_ENDPOINT_STATE_H_

#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "core/engine/capacity_estimator.h"
#include "core/engine/circuit_breaker.h"
#include "core/engine/engine_config.h"
#include "core/engine/release_pacer.h"
#include "core/engine/retry_budget.h"

namespace stagger::engine {

// How one endpoint's parked deliveries come back: its learned pace and its
// release queue (capacity_estimator.h, release_pacer.h).
struct EndpointRelease {
  CapacityEstimator capacity;
  ReleasePacer pacer;
  // Since when the breaker has been away from CLOSED (0: it is CLOSED);
  // what the policy's disable.after_unavailable trigger measures
  // (endpoint_lifecycle.h). Here, not in every endpoint: an endpoint's
  // release side exists whenever its breaker is not CLOSED.
  int64_t unavailable_since_ns = 0;
};

// With a 51-byte key one state is one 224-byte malloc chunk, plus 9 bytes
// of table per slot (pointer and control byte) at a load of 0.44..0.87.
// The members are ordered so that none needs padding: the pointer with the
// 8-byte members, the 2-byte ones together, the key's head last.
struct EndpointState {
  int64_t last_seen_ns = 0;
  int64_t previous_delay_ns = 0;     // decorrelated jitter's state; 0 = none
  int64_t retry_after_until_ns = 0;  // fleet-wide Retry-After window end
  // The last success (reported, or counted by a lease holder): what lets
  // a waiting retry go before its backoff ends (decision_path.h).
  int64_t last_success_ns = 0;
  // The release side, allocated when the endpoint's gate first closes.
  std::unique_ptr<EndpointRelease> release;
  uint32_t config_generation = 0;    // generation policy_index refers to
  // -1: default policy; else the override's index (< kMaxOverrides).
  int16_t policy_index = -1;
  uint16_t key_size = 0;  // bytes, <= 4096 (limits.max_key_bytes)
  CircuitBreaker breaker;
  RetryBudget budget;
  ServedRate served;
  // The condition last reported to the engine's ConditionSink
  // (endpoint_condition.h: EndpointCondition::Pack, 6 bits; 0 is clear).
  uint8_t reported_condition : 6;
  // Disabled (disable_table.h holds since when, why, by whom): every
  // Admit is GIVE_UP(ENDPOINT_DISABLED); never evicted while set.
  uint8_t disabled : 1;
  // The engine's DisableTable may hold permanent failures counted for it
  // (the disable.permanent_failures trigger): a success forgets them.
  uint8_t counting_strikes : 1;
  char key_head[3] = {};  // the key's first bytes; the rest follow

  EndpointState() : reported_condition(0), disabled(0), counting_strikes(0) {}
  absl::string_view key() const { return {key_head, key_size}; }

  // A tracked endpoint's state, holding a copy of `key` (<= 65535 bytes).
  static EndpointState* New(absl::string_view key);
  // Frees a state made by New().
  static void Delete(EndpointState* st);
};

// Counted against the <= 256 B/endpoint target (bench/endpoint_memory).
static_assert(sizeof(EndpointState) <= 256, "EndpointState grew");
// One 224-byte chunk with a 51-byte key needs sizeof + 48 <= 216.
static_assert(sizeof(EndpointState) <= 168, "EndpointState grew past 168 B");
static_assert(kMaxOverrides <= 32767, "policy_index is 16 bits");

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_ENDPOINT_STATE_H_
