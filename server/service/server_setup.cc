#include "server/service/server_setup.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"

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

namespace {

// Drops every server-builder plugin (server reflection registers itself
// into every ServerBuilder of the process): the health-only server must
// serve the health service and nothing else.
class NoPluginsOption final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(
      std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins)
      override {
    plugins->clear();
  }
};

// Builds and starts; `*port` is the port AddListeningPort will fill in.
absl::StatusOr<std::unique_ptr<grpc::Server>> BuildAndStart(
    grpc::ServerBuilder& builder, const std::string& address, const int* port) {
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", address, " (address in use, or malformed?)"));
  }
  SetServing({server.get()}, true);
  return server;
}

}  // namespace

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& address, grpc::Service* service, int* port) {
  return StartServer(address, std::vector<grpc::Service*>{service}, nullptr,
                     port);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    std::shared_ptr<grpc::ServerCredentials> credentials, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  *port = 0;
  builder.AddListeningPort(
      address,
      credentials != nullptr ? credentials : grpc::InsecureServerCredentials(),
      port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  return BuildAndStart(builder, address, port);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(
    const std::string& address, int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetOption(std::make_unique<NoPluginsOption>());
  // gRPC refuses to build a server with no service of its own (the health
  // service is added at start); the default generic service answers every
  // other method UNIMPLEMENTED, as a server without it would.
  static grpc::CallbackGenericService* const unimplemented =
      new grpc::CallbackGenericService;
  builder.RegisterCallbackGenericService(unimplemented);
  *port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), port);
  return BuildAndStart(builder, address, port);
}

void SetServing(const std::vector<grpc::Server*>& servers, bool serving) {
  for (grpc::Server* server : servers) {
    if (server == nullptr) continue;
    grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
    if (health == nullptr) continue;
    health->SetServingStatus(serving);
    health->SetServingStatus(kCoordinatorServiceName, serving);
  }
}

}  // namespace stagger::service
