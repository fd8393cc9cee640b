// FanOut: staggerctl against several staggerd replicas at once. With
// --replicas each replica holds its own shard of endpoints and its own
// pauses, so an operator's pause must reach every replica; `--address`
// takes a comma-separated list, and the command runs once per address, in
// order.
//
//  - One address: exactly RunCommand (commands.h).
//  - Several: each answer is preceded by "== ADDRESS ==" (on stdout; with
//    --json on stderr, so stdout stays a sequence of JSON documents).
//  - Exit code: 0 if every address succeeded, or if every failure was
//    NOT_FOUND and at least one address succeeded (an endpoint lives on one
//    replica; a pause may be on some). Otherwise the first failure's code.
//    A usage error (2) stops at the first address: it is the same for all.
//  - An address that cannot be dialled (bad TLS flags) is a usage error.
#ifndef STAGGER_STAGGERCTL_FAN_OUT_H_
#define STAGGER_STAGGERCTL_FAN_OUT_H_

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "staggerctl/commands.h"

namespace stagger::staggerctl {

using Connect = std::function<absl::StatusOr<std::shared_ptr<grpc::Channel>>(
    const std::string& address)>;

// The addresses in `address_list` ("a:1,b:2"; blanks around commas
// ignored); InvalidArgument if there is none or one is empty.
absl::StatusOr<std::vector<std::string>> SplitAddresses(
    const std::string& address_list);

// The exit code of one command run on several addresses (rules above).
int CombineExitCodes(const std::vector<int>& codes);

// Runs args on each address of options.address (rules above).
int RunOnEachAddress(const std::vector<std::string>& args,
                     const CommandOptions& options, const Connect& connect,
                     std::ostream& out, std::ostream& err);

}  // namespace stagger::staggerctl

#endif  // STAGGER_STAGGERCTL_FAN_OUT_H_
