// Log: staggerd's one-line operator log. Every line goes to stderr as
// "staggerd: <line>" and is flushed at once (tests and the kubelet read it
// line by line; a multi-line message continues on the following lines).
// Thread-safe (one fprintf per line). Every daemon step logs through it.
#ifndef STAGGER_SERVER_DAEMON_LOG_H_
#define STAGGER_SERVER_DAEMON_LOG_H_

#include "absl/strings/string_view.h"

namespace stagger::daemon {

void Log(absl::string_view line);

}  // namespace stagger::daemon

#endif  // STAGGER_SERVER_DAEMON_LOG_H_
