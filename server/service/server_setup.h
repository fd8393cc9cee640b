// The gRPC server settings staggerd runs with, in one place so that the
// benchmark's no-op service (bench/) runs with exactly the same settings and
// the load generator measures the ceiling of this set-up, not of another.
// (The no-op service's methods are typed, staggerd's raw: see
// coordinator_service.h; both put a call's messages on one arena.)
//
// TransportLimits are the per-connection and per-process bounds a client (buggy
// or hostile) meets before any handler runs; each is chosen on purpose
// (defaults and reasons below, docs/OPERATING.md "Limits"), each is a staggerd
// flag, and each is held by tests/service/transport_limits_test.cc: a client
// over it is refused while others are served.
#ifndef STAGGER_SERVER_SERVICE_SERVER_SETUP_H_
#define STAGGER_SERVER_SERVICE_SERVER_SETUP_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/server_builder.h"

namespace stagger::service {

struct TransportLimits {
  // Largest request accepted, bytes (--max_receive_message_bytes). A batch
  // at the largest allowed max_batch_size (100000 items) of typical keys
  // fits. Larger: the call fails RESOURCE_EXHAUSTED, the connection stays.
  int max_receive_message_bytes = 64 << 20;
  // Concurrent calls per connection (--max_concurrent_streams, HTTP/2
  // SETTINGS_MAX_CONCURRENT_STREAMS). Workers share one channel per process
  // and calls take microseconds, so 1000 in flight on one connection is far
  // beyond any real worker; calls over it wait on the client (and meet their
  // deadline there) instead of queueing unbounded work in the server.
  int max_concurrent_streams = 1000;
  // Keepalive enforcement (--min_ping_interval, --permit_pings_without_calls):
  // a client may ping at most every min_ping_interval (also between calls,
  // if permit_pings_without_calls: workers keep long-lived channels); a
  // client pinging faster gets max_ping_strikes warnings, then GOAWAY
  // ENHANCE_YOUR_CALM ("too_many_pings") and its connection is closed.
  // 2 s: stagger-agent pings its lease streams' connections every 3 s
  // (client/coordinator_client.h, "Keepalive").
  absl::Duration min_ping_interval = absl::Seconds(2);
  bool permit_pings_without_calls = true;
  int max_ping_strikes = 2;
  // Keepalive sent (--keepalive_time, --keepalive_timeout): staggerd pings
  // each connection after keepalive_time without a ping, and closes it if
  // no acknowledgement comes within keepalive_timeout (unacknowledged
  // writes are cut off after keepalive_timeout too: TCP_USER_TIMEOUT). A
  // peer that died or went silent thus loses its calls, its lease streams
  // and the calls its agent held here within keepalive_time +
  // keepalive_timeout (10 s).
  absl::Duration keepalive_time = absl::Seconds(5);
  absl::Duration keepalive_timeout = absl::Seconds(5);
  // Every connection is closed (GOAWAY, then in-flight calls get `grace` to
  // finish) after max_connection_age (+-10% jitter, gRPC's), so clients
  // reconnect and spread over replicas added since
  // (--max_connection_age, --max_connection_age_grace; 0 = never).
  absl::Duration max_connection_age = absl::Minutes(30);
  absl::Duration max_connection_age_grace = absl::Seconds(30);
  // Memory gRPC may use for connections and messages in flight, bytes
  // (--memory_quota_bytes; a grpc::ResourceQuota for the whole process).
  // A call whose request does not fit in what is left is refused
  // RESOURCE_EXHAUSTED (RST_STREAM ENHANCE_YOUR_CALM) and under pressure
  // gRPC shrinks read buffers, instead of a flood of clients taking the
  // process's memory. 1 GiB: 16 requests of the largest size at once.
  int64_t memory_quota_bytes = int64_t{1} << 30;
};

// InvalidArgument naming the flag of every out-of-range field, one per line.
absl::Status ValidateTransportLimits(const TransportLimits& limits);

// `limits` (valid), no SO_REUSEPORT (a busy port is a start-up failure).
// Also turns off Abseil's mutex deadlock detector for the whole process
// (see server_setup.cc): call it before the server starts.
void ConfigureServerBuilder(grpc::ServerBuilder& builder,
                            const TransportLimits& limits = TransportLimits());

// A started server on `address` (host:port, port 0 = any free one) serving
// `service` with the settings above, the gRPC health service (SERVING for ""
// and for stagger.v1.RetryCoordinator) and server reflection. `*port` gets
// the bound port. Unavailable, naming the address, if it cannot listen.
// Raises the process's soft open-file limit to its hard limit first (each
// connection is a descriptor; 1024 would cap connections by accident).
// `service` must outlive the server.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& address, grpc::Service* service, int* port,
    const TransportLimits& limits = TransportLimits());

// The same with every service in `services` and `credentials` on the port
// (null: plaintext). With TLS credentials the health service and reflection
// on this port are behind TLS (and the credentials' authorization) too.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    std::shared_ptr<grpc::ServerCredentials> credentials, int* port,
    const TransportLimits& limits = TransportLimits());

// A separate plaintext server on `address` holding the gRPC health service
// alone (no reflection, nothing else: the coordinator's methods answer
// UNIMPLEMENTED there), SERVING for "" and kCoordinatorServiceName, for
// probes that cannot do TLS (Kubernetes' grpc: probes). A second port on
// the main server would expose every service without TLS; this cannot.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(
    const std::string& address, int* port);

// Sets the serving status ("" and kCoordinatorServiceName) on every
// server's health service (null entries skipped).
void SetServing(const std::vector<grpc::Server*>& servers, bool serving);

// The service name the health service reports for the coordinator.
inline constexpr char kCoordinatorServiceName[] = "stagger.v1.RetryCoordinator";

}  // namespace stagger::service

#endif  // STAGGER_SERVER_SERVICE_SERVER_SETUP_H_
