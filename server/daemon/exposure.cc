#include "server/daemon/exposure.h"

#include "absl/strings/str_cat.h"
#include "core/cli/listen_scope.h"

namespace stagger::daemon {
namespace {

// "ADDRESS (SCOPE, how)" for a port serving `how`.
std::string Port(const std::string& address, const char* how) {
  return absl::StrCat(address, " (", cli::ListenScope(address), ", ", how,
                      ")");
}

std::string GrpcSecurity(const security::SecurityFlags& s) {
  const char* transport = !s.tls.enabled()  ? "plaintext"
                          : !s.tls.mutual() ? "TLS without client certificates"
                                            : "mutual TLS";
  return absl::StrCat(transport, ", ",
                      s.authz_policy_file.empty()
                          ? std::string("no authorization policy")
                          : absl::StrCat("authorization policy ",
                                         s.authz_policy_file));
}

}  // namespace

std::string ExposureLine(const ExposureFlags& flags) {
  return absl::StrCat(
      "serving gRPC on ", cli::DescribeListen(flags.address), ", ",
      GrpcSecurity(flags.security), "; ",
      flags.metrics_address.empty()
          ? std::string("no metrics")
          : absl::StrCat("metrics on ",
                         Port(flags.metrics_address, "plain HTTP")),
      "; ",
      flags.health_address.empty()
          ? std::string("no health port")
          : absl::StrCat("health on ", Port(flags.health_address, "plaintext")),
      "; ",
      flags.status_address.empty()
          ? std::string("no status page")
          : absl::StrCat("status page on ",
                         Port(flags.status_address, "plain HTTP, no login")));
}

}  // namespace stagger::daemon
