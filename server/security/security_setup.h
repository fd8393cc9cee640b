// ServerSecurity: staggerd's security flags turned into what the gRPC port
// needs, in one place so main.cc only wires it:
//   - no TLS flags: plaintext (local use), no authorization;
//   - --tls_cert_file/--tls_key_file: TLS; + --tls_client_ca_file: mutual
//     TLS, every client certificate verified (tls_credentials.h);
//   - + --authz_policy_file: the gRFC A43 policy enforced on every call
//     (authz_processor.h), reloaded on change (authz_reloader.h).
// Refused at start-up, with a message naming the flag and file (main exits
// 2, like a bad config): unreadable or mismatched certificate files, a bad
// policy file, and a policy without client certificates (without them
// every caller is anonymous, so a policy could only allow everyone or no
// one: surely a mistake).
//
// Thread-safe after Create. The registry must outlive the object.
#ifndef STAGGER_SERVER_SECURITY_SECURITY_SETUP_H_
#define STAGGER_SERVER_SECURITY_SECURITY_SETUP_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"
#include "prometheus/registry.h"
#include "server/security/authz_processor.h"
#include "server/security/authz_reloader.h"
#include "server/security/security_metrics.h"
#include "server/security/tls_credentials.h"

namespace stagger::security {

struct SecurityFlags {
  ServerTlsFiles tls;
  absl::Duration tls_refresh_interval = absl::Seconds(10);
  std::string authz_policy_file;  // empty: no authorization
  absl::Duration authz_poll_interval = absl::Seconds(1);
};

class ServerSecurity {
 public:
  using LogFn = std::function<void(const std::string&)>;
  static absl::StatusOr<std::unique_ptr<ServerSecurity>> Create(
      const SecurityFlags& flags, prometheus::Registry& registry, LogFn log);

  // Null for plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials() const {
    return credentials_;
  }
  // "plaintext", "TLS", "mutual TLS", "mutual TLS, authz policy \"p\"".
  std::string Describe() const;
  SecurityMetrics& metrics() { return metrics_; }
  // Starts watching the policy file (no-op without one).
  void StartReloading();
  void Stop();

 private:
  ServerSecurity(prometheus::Registry& registry) : metrics_(registry) {}

  SecurityFlags flags_;
  SecurityMetrics metrics_;
  std::shared_ptr<AuthzProcessor> processor_;
  std::unique_ptr<AuthzReloader> reloader_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
};

}  // namespace stagger::security

#endif  // STAGGER_SERVER_SECURITY_SECURITY_SETUP_H_
