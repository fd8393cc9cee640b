#include "server/security/tls_credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "core/wire/pem_file.h"

namespace stagger::security {
namespace {

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioDeleter>;
using X509Ptr = std::unique_ptr<X509, X509Deleter>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyDeleter>;

BioPtr MemBio(const std::string& s) {
  return BioPtr(BIO_new_mem_buf(s.data(), static_cast<int>(s.size())));
}

X509Ptr FirstCert(const std::string& pem) {
  BioPtr bio = MemBio(pem);
  X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  return cert;
}

}  // namespace

absl::Status CheckServerTlsFiles(const ServerTlsFiles& files) {
  if (!files.enabled()) {
    if (files.mutual()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca_file needs --tls_cert_file and --tls_key_file "
          "(client certificates are only asked for over TLS)");
    }
    return absl::OkStatus();
  }
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls_cert_file and --tls_key_file");
  }
  absl::StatusOr<std::string> cert =
      wire::ReadPemFile("tls_cert_file", files.cert_file);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key =
      wire::ReadPemFile("tls_key_file", files.key_file);
  if (!key.ok()) return key.status();
  X509Ptr leaf = FirstCert(*cert);
  if (leaf == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_cert_file=", files.cert_file, ": no certificate in it"));
  }
  BioPtr key_bio = MemBio(*key);
  KeyPtr pkey(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (pkey == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key_file=", files.key_file,
        ": no private key in it (or it is encrypted)"));
  }
  if (X509_check_private_key(leaf.get(), pkey.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_key_file=", files.key_file,
                     ": does not belong to the certificate in --tls_cert_file=",
                     files.cert_file));
  }
  if (files.mutual()) {
    absl::StatusOr<std::string> ca =
        wire::ReadPemFile("tls_client_ca_file", files.client_ca_file);
    if (!ca.ok()) return ca.status();
    if (FirstCert(*ca) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls_client_ca_file=", files.client_ca_file,
          ": no certificate in it"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const ServerTlsFiles& files, absl::Duration refresh_interval,
    std::shared_ptr<grpc::AuthMetadataProcessor> processor) {
  if (refresh_interval < kMinTlsRefresh || refresh_interval > kMaxTlsRefresh) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_refresh_interval: must be in [",
        absl::FormatDuration(kMinTlsRefresh), ", ",
        absl::FormatDuration(kMaxTlsRefresh), "], got ",
        absl::FormatDuration(refresh_interval)));
  }
  const unsigned seconds =
      static_cast<unsigned>(absl::ToInt64Seconds(refresh_interval));
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          files.key_file, files.cert_file, files.client_ca_file, seconds);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (files.mutual()) {
    options.watch_root_certs();
    options.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  std::shared_ptr<grpc::ServerCredentials> creds =
      grpc::experimental::TlsServerCredentials(options);
  if (creds == nullptr) {
    return absl::InternalError("gRPC refused the TLS server options");
  }
  if (processor != nullptr) creds->SetAuthMetadataProcessor(std::move(processor));
  return creds;
}

}  // namespace stagger::security
