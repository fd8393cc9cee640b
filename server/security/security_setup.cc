#include "server/security/security_setup.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace stagger::security {

absl::StatusOr<std::unique_ptr<ServerSecurity>> ServerSecurity::Create(
    const SecurityFlags& flags, prometheus::Registry& registry, LogFn log) {
  std::unique_ptr<ServerSecurity> s(new ServerSecurity(registry));
  s->flags_ = flags;
  if (absl::Status st = CheckServerTlsFiles(flags.tls); !st.ok()) return st;
  if (!flags.authz_policy_file.empty() && !flags.tls.mutual()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--authz_policy_file=", flags.authz_policy_file,
        " needs client certificates: set --tls_cert_file, --tls_key_file and "
        "--tls_client_ca_file (without them every caller is anonymous and "
        "the policy cannot tell workers, readers and admins apart)"));
  }
  if (!flags.authz_policy_file.empty()) {
    if (flags.authz_poll_interval <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("--authz_poll_interval: must be > 0");
    }
    std::string bytes;
    absl::StatusOr<AuthzPolicy> policy =
        LoadAuthzPolicyFile(flags.authz_policy_file, &bytes);
    if (!policy.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--authz_policy_file: ", policy.status().message()));
    }
    s->processor_ = std::make_shared<AuthzProcessor>(*std::move(policy),
                                                     &s->metrics_, log);
    s->reloader_ = std::make_unique<AuthzReloader>(
        flags.authz_policy_file, std::move(bytes), s->processor_.get(),
        &s->metrics_, flags.authz_poll_interval, log);
  }
  if (flags.tls.enabled()) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds =
        MakeServerCredentials(flags.tls, flags.tls_refresh_interval,
                              s->processor_);
    if (!creds.ok()) return creds.status();
    s->credentials_ = *std::move(creds);
  }
  return s;
}

std::string ServerSecurity::Describe() const {
  if (!flags_.tls.enabled()) return "plaintext";
  if (!flags_.tls.mutual()) return "TLS";
  if (processor_ == nullptr) return "mutual TLS";
  return absl::StrCat("mutual TLS, authz policy \"", processor_->policy()->name,
                      "\"");
}

void ServerSecurity::StartReloading() {
  if (reloader_ != nullptr) reloader_->Start();
}

void ServerSecurity::Stop() {
  if (reloader_ != nullptr) reloader_->Stop();
}

}  // namespace stagger::security
