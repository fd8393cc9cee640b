#include "server/security/authz_reloader.h"

#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace stagger::security {
namespace {

absl::StatusOr<std::string> ReadBounded(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::string bytes(kMaxAuthzPolicyBytes + 1, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  return bytes;
}

}  // namespace

absl::StatusOr<AuthzPolicy> LoadAuthzPolicyFile(const std::string& path,
                                                std::string* bytes) {
  absl::StatusOr<std::string> read = ReadBounded(path);
  if (!read.ok()) return read.status();
  if (bytes != nullptr) *bytes = *read;
  return ParseAuthzPolicy(*read, path);
}

AuthzReloader::AuthzReloader(std::string path, std::string applied,
                             AuthzProcessor* processor,
                             SecurityMetrics* metrics,
                             absl::Duration poll_interval, LogFn log)
    : path_(std::move(path)),
      processor_(processor),
      metrics_(metrics),
      poll_interval_(poll_interval),
      log_(std::move(log)),
      seen_(std::move(applied)) {}

AuthzReloader::~AuthzReloader() { Stop(); }

void AuthzReloader::Start() {
  poller_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(poll_interval_)) PollOnce();
  });
}

void AuthzReloader::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (poller_.joinable()) poller_.join();
}

bool AuthzReloader::PollOnce() {
  absl::MutexLock l(&mu_);
  absl::StatusOr<std::string> bytes = ReadBounded(path_);
  if (!bytes.ok()) {
    if (!missing_reported_) {
      missing_reported_ = true;
      seen_.clear();
      if (metrics_ != nullptr) metrics_->RecordPolicyReload(false);
      if (log_) {
        log_(absl::StrCat("authz policy: ", bytes.status().message(),
                          "; keeping the policy in force"));
      }
    }
    return false;
  }
  missing_reported_ = false;
  if (*bytes == seen_) return false;
  seen_ = *bytes;
  absl::StatusOr<AuthzPolicy> policy = ParseAuthzPolicy(*bytes, path_);
  if (metrics_ != nullptr) metrics_->RecordPolicyReload(policy.ok());
  if (!policy.ok()) {
    if (log_) {
      log_(absl::StrCat("authz policy reload refused, keeping the policy in "
                        "force: ",
                        policy.status().message()));
    }
    return false;
  }
  const std::string name = policy->name;
  const size_t allow = policy->allow_rules.size();
  const size_t deny = policy->deny_rules.size();
  processor_->SetPolicy(*std::move(policy));
  if (log_) {
    log_(absl::StrCat("authz policy \"", name, "\" reloaded from ", path_,
                      " (", allow, " allow rule(s), ", deny,
                      " deny rule(s))"));
  }
  return true;
}

}  // namespace stagger::security
