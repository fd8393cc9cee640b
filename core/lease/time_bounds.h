// The time bounds the lease protocol rests on, in one place.
//
// Clocks. Each side measures the stream lease on its own monotonic clock.
// Their rates may differ from true time by at most kMaxDrift (1%; real
// clocks are within 0.01%). The agent counts its lease from the moment it
// SENT the message the renewal answers, and for AgentLeaseSpan(ttl), a
// little less than ttl. The replica counts from the moment it SENT the
// renewal, for the full ttl. The agent sent first, so its lease always
// ends first in true time, whatever the network's delays.
//
// Renewals. An agent renews its lease with every message it sends up,
// at least every kDefaultFlushInterval by default, and at least twice per
// ttl whatever its flush interval (AgentLink::RenewEvery).
//
// Sends. A first attempt the agent admits carries a delay of up to the
// policy's initial jitter, and its worker sends it after that delay, give
// or take kSendSlack. So a local admission decided at t is on the wire by
// t + SendBound(jitter). A probe waits that long past the moment the last
// agent stopped admitting locally.
#ifndef STAGGER_CORE_LEASE_TIME_BOUNDS_H_
#define STAGGER_CORE_LEASE_TIME_BOUNDS_H_

#include "absl/time/time.h"

namespace stagger::lease {

inline constexpr double kMaxDrift = 0.01;
inline constexpr absl::Duration kSendSlack = absl::Milliseconds(100);
// The default flush interval (stagger-agent's --flush_interval,
// ClientOptions::lease_flush_interval): one message per agent per second
// carries its counts and renews its lease.
inline constexpr absl::Duration kDefaultFlushInterval = absl::Seconds(1);

// How long the agent's lease lasts on its own clock.
inline absl::Duration AgentLeaseSpan(absl::Duration ttl) {
  return ttl * ((1 - kMaxDrift) / (1 + kMaxDrift));
}

// A span measured on one clock, stretched to cover the same span on any
// other clock within the drift bound.
inline absl::Duration Stretch(absl::Duration d) {
  return d * ((1 + kMaxDrift) / (1 - kMaxDrift));
}

// By how long after a local admission its attempt is on the wire.
inline absl::Duration SendBound(absl::Duration initial_jitter) {
  return Stretch(initial_jitter) + kSendSlack;
}

}  // namespace stagger::lease

#endif  // STAGGER_CORE_LEASE_TIME_BOUNDS_H_
