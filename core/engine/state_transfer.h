// StateTransfer: one endpoint's state to and from an EndpointRecord
// (endpoint_record.h), for the state file. Each component saves and
// restores its own part (circuit_breaker.h, retry_budget.h,
// capacity_estimator.h, release_pacer.h); this unit puts the parts
// together. The policy and the configuration binding are not part of a
// record: the table binds a restored state to the configuration in force
// first, and windows whose slot width differs from the record's start empty.
// Not thread-safe: the table's shard lock guards each state.
#ifndef STAGGER_CORE_ENGINE_STATE_TRANSFER_H_
#define STAGGER_CORE_ENGINE_STATE_TRANSFER_H_

#include "absl/time/time.h"
#include "core/engine/endpoint_record.h"
#include "core/engine/endpoint_state.h"
#include "core/engine/engine_config.h"

namespace stagger::engine {

// `st`'s state under policy `p`, instants unwrapped near `now`.
EndpointRecord SaveEndpoint(const EndpointState& st, const PolicyParams& p,
                            absl::Time now);
// Overwrites `st`'s data (not its key or binding) with `r`'s, under `p`.
void RestoreEndpoint(const EndpointRecord& r, const PolicyParams& p,
                     EndpointState* st);

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_STATE_TRANSFER_H_
