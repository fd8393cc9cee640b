// The gRPC server settings staggerd runs with, in one place so that the
// benchmark's no-op service (bench/) runs on exactly the same stack and the
// load generator measures the ceiling of this set-up, not of another.
#ifndef STAGGER_SERVER_SERVICE_SERVER_SETUP_H_
#define STAGGER_SERVER_SERVICE_SERVER_SETUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/server_builder.h"

namespace stagger::service {

// Largest request accepted, bytes: a batch at the largest allowed
// max_batch_size (100000 items) of typical keys fits.
inline constexpr int kMaxReceiveMessageBytes = 64 << 20;

// Message size limits, keepalive policy (clients may ping every 10 s, also
// between calls: workers keep long-lived channels to the coordinator), and
// no SO_REUSEPORT (a busy port is a start-up failure).
// Also turns off Abseil's mutex deadlock detector for the whole process
// (see server_setup.cc): call it before the server starts.
void ConfigureServerBuilder(grpc::ServerBuilder& builder);

// A started server on `address` (host:port, port 0 = any free one) serving
// `service` with the settings above, the gRPC health service (SERVING for ""
// and for stagger.v1.RetryCoordinator) and server reflection. `*port` gets
// the bound port. Unavailable, naming the address, if it cannot listen.
// `service` must outlive the server.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& address, grpc::Service* service, int* port);

// The same with every service in `services` and `credentials` on the port
// (null: plaintext). With TLS credentials the health service and reflection
// on this port are behind TLS (and the credentials' authorization) too.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    std::shared_ptr<grpc::ServerCredentials> credentials, int* port);

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
