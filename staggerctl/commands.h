// staggerctl's commands over the coordinator's read API
// (stagger.v1.RetryCoordinator GetEndpoint/ListEndpoints) and the operator
// API (stagger.v1.Admin). `watch` is watch_command.h's: it runs on every
// replica at once. Each command prints a readable table, or with
// --json the response messages as JSON (proto field names), and returns
// the process exit code:
//   0  done
//   1  staggerd answered with another error (the message is printed)
//   2  bad usage: unknown command, missing or extra operands
//   3  staggerd unreachable (UNAVAILABLE, DEADLINE_EXCEEDED): not running,
//      wrong --address, or a TLS mismatch (wrong CA, missing client cert)
//   4  refused: PERMISSION_DENIED / UNAUTHENTICATED (the client
//      certificate's identity is not allowed this call by the policy)
//   5  NOT_FOUND (untracked endpoint, no such pause, not disabled)
//   6  INVALID_ARGUMENT (staggerd names the field)
#ifndef STAGGER_STAGGERCTL_COMMANDS_H_
#define STAGGER_STAGGERCTL_COMMANDS_H_

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace stagger::staggerctl {

enum ExitCode {
  kOk = 0,
  kError = 1,
  kUsage = 2,
  kUnreachable = 3,
  kDenied = 4,
  kNotFound = 5,
  kInvalid = 6,
};

struct CommandOptions {
  std::string address;
  absl::Duration timeout = absl::Seconds(5);
  bool json = false;
  std::string state;   // list --state
  std::string prefix;  // pause/resume --prefix
  absl::Duration pause_for = absl::ZeroDuration();  // pause --for
  std::string reason;
  int limit = 10000;   // list: at most this many rows
  // pause/resume/disable/enable: names the command on every replica it is
  // sent to (admin.proto's operation_id); one per staggerctl run.
  std::string operation_id;
};

// Runs args[0] with args[1..]; output to `out`, errors to `err`.
int RunCommand(const std::vector<std::string>& args,
               const CommandOptions& options,
               std::shared_ptr<grpc::Channel> channel, std::ostream& out,
               std::ostream& err);

// The usage text (commands, flags, exit codes).
std::string Usage();

}  // namespace stagger::staggerctl

#endif  // STAGGER_STAGGERCTL_COMMANDS_H_
