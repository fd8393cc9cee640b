// Drain: staggerd's shutdown after SIGTERM/SIGINT, in this order:
//   1. the health service turns NOT_SERVING (overall and for
//      stagger.v1.RetryCoordinator) on every port, so load balancers and
//      Kubernetes readiness probes stop sending new calls;
//   2. the gRPC port keeps serving for options.grace (--drain_grace) while
//      they notice;
//   3. before_close() runs (long-lived calls end or are answered now: lease
//      streams, waiting calls), then the gRPC port shuts down, giving
//      in-flight calls at most options.timeout (--drain_timeout) to
//      finish, and Drain waits for it;
//   4. after_last_answer() runs (the state file's last save: no decision
//      can change the state after it);
//   5. the health port (if any) closes; it answered NOT_SERVING until now.
// Returns when all of that is done.
#ifndef STAGGER_SERVER_DAEMON_DRAIN_H_
#define STAGGER_SERVER_DAEMON_DRAIN_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/daemon/servers.h"

namespace stagger::daemon {

struct DrainOptions {
  absl::Duration grace = absl::ZeroDuration();  // --drain_grace
  absl::Duration timeout = absl::Seconds(10);   // --drain_timeout
};

// Each must be in [0, kMaxDrainDuration]; InvalidArgument naming the flag.
inline constexpr absl::Duration kMaxDrainDuration = absl::Hours(1);
absl::Status CheckDrainOptions(const DrainOptions& options);

struct DrainHooks {
  std::function<void()> before_close;       // may be null
  std::function<void()> after_last_answer;  // may be null
};
void Drain(Servers& servers, const DrainOptions& options,
           const DrainHooks& hooks);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_DRAIN_H_
