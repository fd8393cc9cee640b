#include "server/security/authz_processor.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/grpc_security_constants.h"

namespace stagger::security {
namespace {

std::vector<std::string> Values(const grpc::AuthContext& context,
                                const char* property) {
  std::vector<std::string> out;
  for (const grpc::string_ref& v : context.FindPropertyValues(property)) {
    out.emplace_back(v.data(), v.size());
  }
  return out;
}

}  // namespace

AuthzPeer PeerOf(const grpc::AuthContext& context) {
  AuthzPeer peer;
  const std::vector<std::string> type =
      Values(context, GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  // "tls" from TlsServerCredentials, "ssl" from SslServerCredentials.
  const bool tls = !type.empty() && (type[0] == GRPC_TLS_TRANSPORT_SECURITY_TYPE ||
                                     type[0] == GRPC_SSL_TRANSPORT_SECURITY_TYPE);
  peer.authenticated = tls && context.IsPeerAuthenticated();
  if (!peer.authenticated) return peer;
  peer.uri_sans = Values(context, GRPC_PEER_URI_PROPERTY_NAME);
  peer.dns_sans = Values(context, GRPC_PEER_DNS_PROPERTY_NAME);
  const std::vector<std::string> subject =
      Values(context, GRPC_X509_SUBJECT_PROPERTY_NAME);
  if (!subject.empty()) peer.subject = subject[0];
  return peer;
}

std::string PrincipalOf(const grpc::AuthContext& context) {
  const AuthzPeer peer = PeerOf(context);
  if (!peer.uri_sans.empty()) return peer.uri_sans[0];
  if (!peer.dns_sans.empty()) return peer.dns_sans[0];
  if (!peer.subject.empty()) return peer.subject;
  return "unauthenticated";
}

AuthzProcessor::AuthzProcessor(AuthzPolicy policy, SecurityMetrics* metrics,
                               LogFn log)
    : metrics_(metrics),
      log_(std::move(log)),
      policy_(std::make_shared<const AuthzPolicy>(std::move(policy))) {}

void AuthzProcessor::SetPolicy(AuthzPolicy policy) {
  auto next = std::make_shared<const AuthzPolicy>(std::move(policy));
  absl::MutexLock l(&mu_);
  policy_ = std::move(next);
}

std::shared_ptr<const AuthzPolicy> AuthzProcessor::policy() const {
  absl::ReaderMutexLock l(&mu_);
  return policy_;
}

grpc::Status AuthzProcessor::Process(const InputMetadata& auth_metadata,
                                     grpc::AuthContext* context,
                                     OutputMetadata* /*consumed*/,
                                     OutputMetadata* /*response*/) {
  AuthzRequest request;
  for (const auto& [key, value] : auth_metadata) {
    std::string k = absl::AsciiStrToLower(absl::string_view(key.data(), key.size()));
    const absl::string_view v(value.data(), value.size());
    if (k == ":path") {
      request.path = std::string(v);
      continue;
    }
    std::string& joined = request.headers[k];
    absl::StrAppend(&joined, joined.empty() ? "" : ",", v);
  }
  if (context != nullptr) request.peer = PeerOf(*context);
  const std::shared_ptr<const AuthzPolicy> policy = this->policy();
  const AuthzVerdict verdict = request.path.empty()
                                   ? AuthzVerdict{false, "no :path"}
                                   : Evaluate(*policy, request);
  if (verdict.allowed) return grpc::Status::OK;
  const std::string who =
      context != nullptr ? PrincipalOf(*context) : "unauthenticated";
  if (metrics_ != nullptr) {
    metrics_->RecordDenied(request.path,
                           verdict.why.rfind("deny_rules:", 0) == 0
                               ? SecurityMetrics::DenyCause::kDenyRule
                               : SecurityMetrics::DenyCause::kNoAllowRule);
  }
  const std::string message =
      absl::StrCat("permission denied: ", request.path, " for ", who, " (",
                   verdict.why, ")");
  LogDenial(message);
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, message);
}

void AuthzProcessor::LogDenial(const std::string& line) {
  if (!log_) return;
  const int64_t now = absl::GetCurrentTimeNanos();
  int64_t last = last_log_ns_.load(std::memory_order_relaxed);
  if (now - last < 1'000'000'000 ||
      !last_log_ns_.compare_exchange_strong(last, now)) {
    unlogged_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const int64_t more = unlogged_.exchange(0);
  log_(more > 0 ? absl::StrCat("authz: ", line, " (and ", more,
                               " more denial(s) since the last line)")
                : absl::StrCat("authz: ", line));
}

}  // namespace stagger::security
