#include "server/daemon/servers.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stagger::daemon {

absl::StatusOr<Servers> StartServers(
    const ServersOptions& options,
    const std::vector<grpc::Service*>& services) {
  Servers servers;
  absl::StatusOr<std::unique_ptr<grpc::Server>> grpc_port =
      service::StartServer(options.address, services, options.credentials,
                           &servers.port, options.limits);
  if (!grpc_port.ok()) return grpc_port.status();
  servers.server = *std::move(grpc_port);
  if (options.health_address.empty()) return servers;
  absl::StatusOr<std::unique_ptr<grpc::Server>> health_port =
      service::StartHealthServer(options.health_address, &servers.health_port);
  if (!health_port.ok()) {
    return absl::Status(
        health_port.status().code(),
        absl::StrCat("health port: ", health_port.status().message()));
  }
  servers.health_server = *std::move(health_port);
  return servers;
}

}  // namespace stagger::daemon
