// ListenScope: who can reach a program listening on an address, in the
// words of the first line a Stagger program prints (staggerd's and
// stagger-agent's: which interfaces each port serves).
//
//   ListenScope("127.0.0.1:9464")    -> "loopback only"  (also localhost,
//                                        127.x.y.z, [::1])
//   ListenScope("0.0.0.0:50051")     -> "all interfaces" (also [::], ":port"
//                                        and "*:port")
//   ListenScope("unix:/run/a.sock")  -> "this host only, a Unix socket"
//   ListenScope("10.0.0.7:50051")    -> "interface 10.0.0.7 only"
//   DescribeListen("127.0.0.1:9464") -> "127.0.0.1:9464 (loopback only)"
//
// Only words: the address is not checked here (a malformed one is refused
// where it is bound). Pure functions, thread-safe.
#ifndef STAGGER_CORE_CLI_LISTEN_SCOPE_H_
#define STAGGER_CORE_CLI_LISTEN_SCOPE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace stagger::cli {

std::string ListenScope(absl::string_view address);

// "ADDRESS (SCOPE)".
std::string DescribeListen(absl::string_view address);

}  // namespace stagger::cli

#endif  // STAGGER_CORE_CLI_LISTEN_SCOPE_H_
