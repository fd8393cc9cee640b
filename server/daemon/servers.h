// StartServers: staggerd's listening ports. The gRPC port on
// options.address serves `services` (the coordinator and Admin) with the
// gRPC health service and reflection, under the transport limits and the
// credentials (null: plaintext; TLS covers health and reflection there
// too). With options.health_address, a second, plaintext port serves the
// health service alone, for probes that cannot do TLS
// (service/server_setup.h says why it is a separate server).
//
// Errors: Unavailable naming the address that cannot be bound; the health
// port's is prefixed "health port: ". staggerd then exits
// kExitStartupFailure. `services` must outlive the servers. Drain (drain.h)
// stops them; destroying them without it shuts them down at once.
#ifndef STAGGER_SERVER_DAEMON_SERVERS_H_
#define STAGGER_SERVER_DAEMON_SERVERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "server/service/server_setup.h"

namespace stagger::daemon {

struct ServersOptions {
  std::string address;                // --address; port 0: any free one
  std::string health_address;         // --health_address; "" = none
  service::TransportLimits limits;    // valid (ValidateTransportLimits)
  std::shared_ptr<grpc::ServerCredentials> credentials;  // null: plaintext
};

struct Servers {
  std::unique_ptr<grpc::Server> server;         // the gRPC port
  int port = 0;                                 // as bound
  std::unique_ptr<grpc::Server> health_server;  // null without health_address
  int health_port = 0;
};

absl::StatusOr<Servers> StartServers(
    const ServersOptions& options, const std::vector<grpc::Service*>& services);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_SERVERS_H_
