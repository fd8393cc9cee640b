// UsageMessage: the first lines of `staggerd --help` (core/cli/usage.h lists
// the flags under it): what staggerd serves, its signals and exit codes.
#ifndef STAGGER_SERVER_DAEMON_USAGE_MESSAGE_H_
#define STAGGER_SERVER_DAEMON_USAGE_MESSAGE_H_

#include <string>

namespace stagger::daemon {

std::string UsageMessage();

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_USAGE_MESSAGE_H_
