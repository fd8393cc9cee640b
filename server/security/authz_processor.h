// AuthzProcessor: enforces an AuthzPolicy (authz_policy.h) at the transport
// edge, as a grpc::AuthMetadataProcessor on the TLS server credentials
// (tls_credentials.h). gRPC runs it on every call after the handshake and
// before any handler; it reads the call's ":path" and the peer's identity
// from the auth context (URI SANs "peer_uri", DNS SANs "peer_dns", subject
// "x509_subject"; authenticated when the transport is TLS and the client
// certificate was verified), evaluates the policy, and refuses the call
// with PERMISSION_DENIED ("permission denied: /svc/Method for <principal>
// (no rule matched)") or lets it through. A call with no ":path" is refused.
//
// The policy in force can be replaced at any time (SetPolicy: the policy
// reloader); each call sees the old or the new one. Denials are counted
// (SecurityMetrics) and logged at most once a second (the others counted
// in the next line); never with an endpoint key (it is in the message body,
// which this layer does not see).
//
// Thread-safe. Non-blocking (runs inline on gRPC's thread: evaluation is a
// few string compares under a reader lock). `metrics` may be null.
#ifndef STAGGER_SERVER_SECURITY_AUTHZ_PROCESSOR_H_
#define STAGGER_SERVER_SECURITY_AUTHZ_PROCESSOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/auth_context.h"
#include "grpcpp/security/auth_metadata_processor.h"
#include "server/security/authz_policy.h"
#include "server/security/security_metrics.h"

namespace stagger::security {

// The caller's identity as staggerd logs it (Admin actions, denials): the
// first URI SAN, else the first DNS SAN, else the subject, else
// "unauthenticated".
std::string PrincipalOf(const grpc::AuthContext& context);
AuthzPeer PeerOf(const grpc::AuthContext& context);

class AuthzProcessor final : public grpc::AuthMetadataProcessor {
 public:
  using LogFn = std::function<void(const std::string&)>;
  AuthzProcessor(AuthzPolicy policy, SecurityMetrics* metrics, LogFn log);

  void SetPolicy(AuthzPolicy policy);
  std::shared_ptr<const AuthzPolicy> policy() const;

  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata,
                       grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  void LogDenial(const std::string& line);

  SecurityMetrics* metrics_;
  LogFn log_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const AuthzPolicy> policy_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> last_log_ns_{0};
  std::atomic<int64_t> unlogged_{0};
};

}  // namespace stagger::security

#endif  // STAGGER_SERVER_SECURITY_AUTHZ_PROCESSOR_H_
