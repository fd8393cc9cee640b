#include "server/service/server_setup.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

namespace stagger::service {

void ConfigureServerBuilder(grpc::ServerBuilder& builder) {
  // Debian's Abseil is built without NDEBUG, so by default every
  // absl::Mutex::Lock() in the process (the engine's shard locks, and
  // gRPC's own locks, which are absl::Mutex too) runs the deadlock detector:
  // a lock-graph update under one process-wide spin lock. A server turns it
  // off (process-wide, before any server thread exists); unit tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  // gRPC binds with SO_REUSEPORT by default: a second staggerd on the same
  // port would then start "successfully" and take half of the connections,
  // each process holding half of the fleet's endpoint state. A busy port
  // must be a start-up failure instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& address, grpc::Service* service, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  *port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address, " (address in use, or malformed?)"));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(true);
  health->SetServingStatus(kCoordinatorServiceName, true);
  return server;
}

}  // namespace stagger::service
