// Waiting for gRPC's own shutdown before staggerctl exits.
//
// When the last gRPC object goes, gRPC cleans up; if the last reference is
// dropped on one of gRPC's threads (a failed connection's timers, say), that
// clean-up runs on a detached thread of its own. A process that returns from
// main meanwhile exits with gRPC's timer threads still unjoined: harmless,
// but reported as a thread leak under ThreadSanitizer, which fails the run.
//
// Contract: call after every channel and stub is destroyed. Returns once
// gRPC is no longer initialized, or after `limit` (it never blocks longer).
// Not thread-safe with respect to other gRPC use (there must be none left).
#ifndef STAGGER_STAGGERCTL_GRPC_SHUTDOWN_H_
#define STAGGER_STAGGERCTL_GRPC_SHUTDOWN_H_

#include "absl/time/time.h"

namespace stagger::staggerctl {

void WaitForGrpcShutdown(absl::Duration limit);

}  // namespace stagger::staggerctl

#endif  // STAGGER_STAGGERCTL_GRPC_SHUTDOWN_H_
