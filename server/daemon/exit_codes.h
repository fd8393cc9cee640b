// staggerd's exit codes, one place for the three outcomes a caller (a
// supervisor, Kubernetes, a test) can tell apart. Each daemon step's header
// says which code its failure leads to.
//   kExitClean           drained after SIGTERM/SIGINT
//   kExitStartupFailure  could not start with a valid configuration (a port
//                        taken, an address that cannot be bound)
//   kExitBadConfig       refused: the configuration or a flag is invalid;
//                        restarting without changing it cannot help
#ifndef STAGGER_SERVER_DAEMON_EXIT_CODES_H_
#define STAGGER_SERVER_DAEMON_EXIT_CODES_H_

namespace stagger::daemon {

inline constexpr int kExitClean = 0;
inline constexpr int kExitStartupFailure = 1;
inline constexpr int kExitBadConfig = 2;

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_EXIT_CODES_H_
