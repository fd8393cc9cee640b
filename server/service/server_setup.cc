#include "server/service/server_setup.h"

#include <sys/resource.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpc/grpc.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "grpcpp/resource_quota.h"

namespace stagger::service {

namespace {

int Millis(absl::Duration d) {
  return static_cast<int>(absl::ToInt64Milliseconds(d));
}

std::string Show(int64_t v) { return absl::StrCat(v); }
std::string Show(absl::Duration d) { return absl::FormatDuration(d); }

// `name` (the staggerd flag) in [lo, hi], else an error line naming it.
template <typename T>
void CheckRange(std::vector<std::string>* errors, const char* name, T value,
                T lo, T hi) {
  if (value < lo || value > hi) {
    errors->push_back(absl::StrCat("--", name, ": must be in [", Show(lo),
                                   ", ", Show(hi), "], got ", Show(value)));
  }
}

}  // namespace

absl::Status ValidateTransportLimits(const TransportLimits& l) {
  std::vector<std::string> e;
  CheckRange(&e, "max_receive_message_bytes", l.max_receive_message_bytes,
             4 << 10, 1 << 30);
  CheckRange(&e, "max_concurrent_streams", l.max_concurrent_streams, 1,
             1000000);
  CheckRange(&e, "min_ping_interval", l.min_ping_interval,
             absl::ZeroDuration(), absl::Hours(24));
  CheckRange(&e, "max_ping_strikes", l.max_ping_strikes, 0, 1000);
  CheckRange(&e, "keepalive_time", l.keepalive_time, absl::Seconds(1),
             absl::Hours(24));
  CheckRange(&e, "keepalive_timeout", l.keepalive_timeout, absl::Seconds(1),
             absl::Hours(1));
  if (l.max_connection_age != absl::ZeroDuration()) {
    CheckRange(&e, "max_connection_age", l.max_connection_age,
               absl::Seconds(1), absl::Hours(24 * 30));
  }
  CheckRange(&e, "max_connection_age_grace", l.max_connection_age_grace,
             absl::ZeroDuration(), absl::Hours(24));
  CheckRange(&e, "memory_quota_bytes", l.memory_quota_bytes,
             int64_t{64} << 10, int64_t{1} << 40);
  if (e.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(e, "\n"));
}

void ConfigureServerBuilder(grpc::ServerBuilder& builder,
                            const TransportLimits& limits) {
  // Debian's Abseil is built without NDEBUG, so by default every
  // absl::Mutex::Lock() in the process (the engine's shard locks, and
  // gRPC's own locks, which are absl::Mutex too) runs the deadlock detector:
  // a lock-graph update under one process-wide spin lock. A server turns it
  // off (process-wide, before any server thread exists); unit tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // gRPC binds with SO_REUSEPORT by default: a second staggerd on the same
  // port would then start "successfully" and take half of the connections,
  // each process holding half of the fleet's endpoint state. A busy port
  // must be a start-up failure instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // No bandwidth-delay probes: staggerd receives small messages. A probe
  // rode on nearly every lease-stream message (a ping, its ack and a
  // window update), a fifth of an idle fleet's wake-ups. Large uploads
  // (count reports) keep HTTP/2's default 64 KiB window per round trip.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.SetMaxReceiveMessageSize(limits.max_receive_message_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             limits.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                             limits.permit_pings_without_calls ? 1 : 0);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      Millis(limits.min_ping_interval));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES,
                             limits.max_ping_strikes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS,
                             Millis(limits.keepalive_time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             Millis(limits.keepalive_timeout));
  if (limits.max_connection_age != absl::ZeroDuration()) {
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                               Millis(limits.max_connection_age));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               Millis(limits.max_connection_age_grace));
  }
  grpc::ResourceQuota quota("staggerd");
  quota.Resize(static_cast<size_t>(limits.memory_quota_bytes));
  builder.SetResourceQuota(quota);
}

namespace {

// A connection is a file descriptor: the soft limit (often 1024) goes up to
// the hard one, so that connections are bounded by the limits above, not by
// an accident of the environment. Best effort (unchanged if not allowed).
void RaiseOpenFileLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

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
    const std::string& address, grpc::Service* service, int* port,
    const TransportLimits& limits) {
  return StartServer(address, std::vector<grpc::Service*>{service}, nullptr,
                     port, limits);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartServer(
    const std::string& address, const std::vector<grpc::Service*>& services,
    std::shared_ptr<grpc::ServerCredentials> credentials, int* port,
    const TransportLimits& limits) {
  RaiseOpenFileLimit();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder, limits);
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
