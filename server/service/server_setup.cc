#include "server/service/server_setup.h"

#include "absl/synchronization/mutex.h"
#include "grpc/grpc.h"

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

}  // namespace stagger::service
