#include "client/tls_options.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "core/wire/pem_file.h"

namespace stagger::client {
absl::Status CheckClientTlsOptions(const ClientTlsOptions& tls) {
  if (!tls.enabled()) {
    if (!tls.cert_file.empty() || !tls.key_file.empty() ||
        !tls.server_name.empty()) {
      return absl::InvalidArgumentError(
          "--tls_cert_file, --tls_key_file and --tls_server_name need "
          "--tls_ca_file (the CA that signed staggerd's certificate)");
    }
    return absl::OkStatus();
  }
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs both --tls_cert_file and --tls_key_file");
  }
  if (tls.refresh_interval < absl::Seconds(1) ||
      tls.refresh_interval > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        "TLS refresh interval: must be in [1s, 1h]");
  }
  // Every file named must be a PEM file (no client certificate: neither).
  const std::pair<const char*, const std::string*> files[] = {
      {"tls_ca_file", &tls.ca_file},
      {"tls_cert_file", &tls.cert_file},
      {"tls_key_file", &tls.key_file}};
  for (const auto& [flag, path] : files) {
    if (path->empty()) continue;
    if (absl::Status s = wire::ReadPemFile(flag, *path).status(); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const ClientTlsOptions& tls) {
  if (absl::Status s = CheckClientTlsOptions(tls); !s.ok()) return s;
  if (!tls.enabled()) return grpc::InsecureChannelCredentials();
  const unsigned seconds =
      static_cast<unsigned>(absl::ToInt64Seconds(tls.refresh_interval));
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          tls.key_file, tls.cert_file, tls.ca_file, seconds);
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!tls.cert_file.empty()) options.watch_identity_key_cert_pairs();
  std::shared_ptr<grpc::ChannelCredentials> creds =
      grpc::experimental::TlsCredentials(options);
  if (creds == nullptr) {
    return absl::InternalError("gRPC refused the TLS channel options");
  }
  return creds;
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& target, const ClientTlsOptions& tls) {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      MakeChannelCredentials(tls);
  if (!creds.ok()) return creds.status();
  grpc::ChannelArguments args;
  if (tls.enabled() && !tls.server_name.empty()) {
    args.SetSslTargetNameOverride(tls.server_name);
  }
  return grpc::CreateCustomChannel(target, *creds, args);
}

}  // namespace stagger::client
