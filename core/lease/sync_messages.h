// The lease stream's messages as plain values (proto/stagger/v1/sync.proto
// has the contract of each field; core/wire/sync_wire.h converts). Shared
// by the agent side (LeaseBook) and the coordinator side (LeaseLedger).
#ifndef STAGGER_CORE_LEASE_SYNC_MESSAGES_H_
#define STAGGER_CORE_LEASE_SYNC_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "core/engine/lease_terms.h"

namespace stagger::lease {

// Limits of one message (sync.proto), checked on receipt.
inline constexpr size_t kMaxItemsPerMessage = 10000;
inline constexpr size_t kMaxBucketsPerEndpoint = 64;
inline constexpr size_t kMaxAgentIdBytes = 256;

struct EndpointCounts {
  std::string endpoint;
  std::vector<engine::LateCounts> buckets;  // oldest first
};

struct CountReport {
  uint64_t seq = 0;  // 1, 2, ...
  std::vector<EndpointCounts> endpoints;
};

struct LeaseGrant {
  std::string endpoint;
  uint64_t epoch = 0;
  absl::Duration ttl;
  uint32_t allowance = 0;
  absl::Duration initial_jitter;
};

struct LeaseRevoke {
  std::string endpoint;
  uint64_t epoch = 0;
};

struct LeaseAck {
  std::string endpoint;
  uint64_t epoch = 0;
};

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_SYNC_MESSAGES_H_
