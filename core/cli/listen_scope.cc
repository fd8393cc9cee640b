#include "core/cli/listen_scope.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace stagger::cli {
namespace {

// The host of "host:port" or "[v6]:port" (brackets removed); the whole
// text when there is no port.
absl::string_view HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t close = address.find(']');
    if (close != absl::string_view::npos) return address.substr(1, close - 1);
  }
  const size_t colon = address.rfind(':');
  return colon == absl::string_view::npos ? address
                                          : address.substr(0, colon);
}

}  // namespace

std::string ListenScope(absl::string_view address) {
  if (absl::StartsWith(address, "unix:") ||
      absl::StartsWith(address, "unix-abstract:")) {
    return "this host only, a Unix socket";
  }
  const absl::string_view host = HostOf(address);
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "*") {
    return "all interfaces";
  }
  if (host == "localhost" || host == "::1" ||
      (absl::StartsWith(host, "127.") &&
       host.find_first_not_of("0123456789.") == absl::string_view::npos)) {
    return "loopback only";
  }
  return absl::StrCat("interface ", host, " only");
}

std::string DescribeListen(absl::string_view address) {
  return absl::StrCat(address, " (", ListenScope(address), ")");
}

}  // namespace stagger::cli
