#include "server/transport_flags.h"

#include <cstdint>

#include "absl/flags/flag.h"
#include "absl/time/time.h"

namespace {
const stagger::service::TransportLimits kDefaults;
}  // namespace

ABSL_FLAG(int, max_receive_message_bytes, kDefaults.max_receive_message_bytes,
          "largest request accepted, bytes; larger calls fail "
          "RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_concurrent_streams, kDefaults.max_concurrent_streams,
          "concurrent calls per client connection (HTTP/2 "
          "MAX_CONCURRENT_STREAMS)");
ABSL_FLAG(absl::Duration, min_ping_interval, kDefaults.min_ping_interval,
          "clients pinging more often than this get GOAWAY too_many_pings "
          "after --max_ping_strikes pings");
ABSL_FLAG(bool, permit_pings_without_calls,
          kDefaults.permit_pings_without_calls,
          "allow keepalive pings on connections with no call in flight");
ABSL_FLAG(int, max_ping_strikes, kDefaults.max_ping_strikes,
          "pings under --min_ping_interval tolerated before GOAWAY (0: "
          "unlimited)");
ABSL_FLAG(absl::Duration, keepalive_time, kDefaults.keepalive_time,
          "ping each connection after this long without one; a peer that "
          "does not answer within --keepalive_timeout is cut off (1s..24h)");
ABSL_FLAG(absl::Duration, keepalive_timeout, kDefaults.keepalive_timeout,
          "how long a keepalive ping (or any write) may go unacknowledged "
          "before the connection is closed (1s..1h)");
ABSL_FLAG(absl::Duration, max_connection_age, kDefaults.max_connection_age,
          "close every connection after this long (+-10%), so clients "
          "rebalance; 0 = never");
ABSL_FLAG(absl::Duration, max_connection_age_grace,
          kDefaults.max_connection_age_grace,
          "calls in flight on an aged connection get this long to finish");
ABSL_FLAG(int64_t, memory_quota_bytes, kDefaults.memory_quota_bytes,
          "memory gRPC may use for connections and messages "
          "(grpc::ResourceQuota), bytes");

namespace stagger {

service::TransportLimits TransportLimitsFromFlags() {
  service::TransportLimits l;
  l.max_receive_message_bytes = absl::GetFlag(FLAGS_max_receive_message_bytes);
  l.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  l.min_ping_interval = absl::GetFlag(FLAGS_min_ping_interval);
  l.permit_pings_without_calls = absl::GetFlag(FLAGS_permit_pings_without_calls);
  l.max_ping_strikes = absl::GetFlag(FLAGS_max_ping_strikes);
  l.keepalive_time = absl::GetFlag(FLAGS_keepalive_time);
  l.keepalive_timeout = absl::GetFlag(FLAGS_keepalive_timeout);
  l.max_connection_age = absl::GetFlag(FLAGS_max_connection_age);
  l.max_connection_age_grace = absl::GetFlag(FLAGS_max_connection_age_grace);
  l.memory_quota_bytes = absl::GetFlag(FLAGS_memory_quota_bytes);
  return l;
}

}  // namespace stagger
