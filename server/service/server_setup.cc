#include "server/service/server_setup.h"

#include "grpc/grpc.h"

namespace stagger::service {

void ConfigureServerBuilder(grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
}

}  // namespace stagger::service
