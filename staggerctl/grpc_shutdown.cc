#include "staggerctl/grpc_shutdown.h"

#include <grpc/grpc.h>

#include "absl/time/clock.h"

namespace stagger::staggerctl {

void WaitForGrpcShutdown(absl::Duration limit) {
  const absl::Time give_up = absl::Now() + limit;
  while (grpc_is_initialized() != 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
}

}  // namespace stagger::staggerctl
