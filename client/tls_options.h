// Client-side TLS for talking to staggerd: the flags every Stagger client
// tool takes (--tls_ca_file --tls_cert_file --tls_key_file
// --tls_server_name) turned into gRPC channel credentials, with gRPC's own
// TLS stack (TlsChannelCredentials + FileWatcherCertificateProvider: the
// files are re-read every refresh_interval, so rotated client certificates
// are used by new connections without a restart).
//
//   no CA file               plaintext (tls.enabled() == false)
//   CA file                  TLS; the server's certificate must chain to it
//                            and name the target host (or server_name)
//   + cert and key files     mutual TLS: this client's certificate
//   server_name              the name to expect in the server's certificate
//                            instead of the target's host (e.g. dialling
//                            127.0.0.1 through a port-forward)
//
// Bad combinations and unreadable files are refused with a message naming
// the flag. Thread-safe (pure functions).
#ifndef STAGGER_CLIENT_TLS_OPTIONS_H_
#define STAGGER_CLIENT_TLS_OPTIONS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

// Returned through this header only; never dereferenced by it.
namespace grpc {
class Channel;
class ChannelCredentials;
}  // namespace grpc

namespace stagger::client {

struct ClientTlsOptions {
  std::string ca_file;      // --tls_ca_file
  std::string cert_file;    // --tls_cert_file
  std::string key_file;     // --tls_key_file
  std::string server_name;  // --tls_server_name
  absl::Duration refresh_interval = absl::Seconds(10);
  bool enabled() const { return !ca_file.empty(); }
};

// InvalidArgument naming the flag: cert without key (or the reverse), cert
// or server name without a CA file, a file that cannot be read or is not
// PEM, refresh_interval outside [1s, 1h].
absl::Status CheckClientTlsOptions(const ClientTlsOptions& tls);

// Credentials for `tls` (insecure credentials when !tls.enabled()).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
MakeChannelCredentials(const ClientTlsOptions& tls);

// A channel to `target` with `tls` (the server name override set as a
// channel argument, since credentials cannot carry it).
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(
    const std::string& target, const ClientTlsOptions& tls);

}  // namespace stagger::client

#endif  // STAGGER_CLIENT_TLS_OPTIONS_H_
