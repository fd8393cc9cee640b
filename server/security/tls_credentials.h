// TLS credentials for staggerd's gRPC port, from gRPC's own TLS stack
// (grpc::experimental::TlsServerCredentials with a
// FileWatcherCertificateProvider): no TLS code of ours on the data path.
//
// Contract:
//  - CheckServerTlsFiles reads the files once at start-up and refuses, with
//    a message naming the file, anything gRPC would only complain about in
//    its log at the first handshake: a missing or unreadable file, a file
//    that is not PEM, a key that does not belong to the certificate, a
//    client CA file with no certificate. The contents are not kept.
//  - MakeServerCredentials: TLS with the certificate chain and key; with a
//    client CA file, mutual TLS: every client must present a certificate
//    that chains to one of its CAs (refused in the handshake otherwise).
//  - Rotation: gRPC's provider re-reads the files every `refresh_interval`
//    by path, following symlinks, so a rewrite, a rename over the path and
//    a Kubernetes Secret's "..data" symlink swap are all picked up; new
//    handshakes use the new certificate, established connections keep
//    theirs. A half-rotated pair (key not matching the certificate) is
//    ignored by gRPC until both files agree.
//  - `processor`, if set, runs on every call before any handler (see
//    authz_processor.h).
#ifndef STAGGER_SERVER_SECURITY_TLS_CREDENTIALS_H_
#define STAGGER_SERVER_SECURITY_TLS_CREDENTIALS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "grpcpp/security/server_credentials.h"

namespace stagger::security {

struct ServerTlsFiles {
  std::string cert_file;       // PEM certificate chain, leaf first
  std::string key_file;        // PEM private key of the leaf
  std::string client_ca_file;  // PEM CA bundle; empty: no client certs
  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
  bool mutual() const { return !client_ca_file.empty(); }
};

// How often rotated files are looked for: 1 s .. 1 h.
inline constexpr absl::Duration kMinTlsRefresh = absl::Seconds(1);
inline constexpr absl::Duration kMaxTlsRefresh = absl::Hours(1);

// InvalidArgument naming the flag and file for any of the problems above
// (including a client CA without a certificate and key, or only one of
// cert/key).
absl::Status CheckServerTlsFiles(const ServerTlsFiles& files);

// Credentials for ServerBuilder::AddListeningPort. `files` must have
// passed CheckServerTlsFiles; `refresh_interval` in [kMinTlsRefresh,
// kMaxTlsRefresh] (InvalidArgument otherwise).
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files, absl::Duration refresh_interval,
    std::shared_ptr<grpc::AuthMetadataProcessor> processor);

}  // namespace stagger::security

#endif  // STAGGER_SERVER_SECURITY_TLS_CREDENTIALS_H_
