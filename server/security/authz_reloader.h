// AuthzReloader: keeps an AuthzProcessor's policy equal to its policy file
// (--authz_policy_file), the way staggerd's config reloader does for the
// config: every poll_interval it reads the file by path, following
// symlinks (so a rewrite, a rename over it and a Kubernetes ConfigMap's
// "..data" swap are all seen) and compares the bytes with the last version
// it saw. New bytes are parsed; a valid policy replaces the one in force
// (each call sees the old or the new one), a bad one is refused: the old
// policy stays, the error (file, line:column or field path) is logged and
// the failure counted. The same bad bytes are reported once; a file that
// disappears is reported once and the policy in force kept.
//
// Thread-safe; Stop() (or the destructor) joins the poller. The processor
// and metrics (nullable) must outlive it.
#ifndef STAGGER_SERVER_SECURITY_AUTHZ_RELOADER_H_
#define STAGGER_SERVER_SECURITY_AUTHZ_RELOADER_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "server/security/authz_processor.h"
#include "server/security/security_metrics.h"

namespace stagger::security {

// Reads (at most kMaxAuthzPolicyBytes + 1 bytes) and parses a policy file.
absl::StatusOr<AuthzPolicy> LoadAuthzPolicyFile(const std::string& path,
                                                std::string* bytes = nullptr);

class AuthzReloader {
 public:
  using LogFn = std::function<void(const std::string&)>;
  // `applied` are the bytes the processor's policy was parsed from.
  AuthzReloader(std::string path, std::string applied,
                AuthzProcessor* processor, SecurityMetrics* metrics,
                absl::Duration poll_interval, LogFn log);
  ~AuthzReloader();

  void Start();
  void Stop();
  // One poll now (tests; SIGHUP). Returns whether a new policy was applied.
  bool PollOnce();

 private:
  const std::string path_;
  AuthzProcessor* processor_;
  SecurityMetrics* metrics_;
  const absl::Duration poll_interval_;
  LogFn log_;
  absl::Mutex mu_;
  std::string seen_ ABSL_GUARDED_BY(mu_);  // last bytes acted on
  bool missing_reported_ ABSL_GUARDED_BY(mu_) = false;
  absl::Notification stop_;
  std::thread poller_;
};

}  // namespace stagger::security

#endif  // STAGGER_SERVER_SECURITY_AUTHZ_RELOADER_H_
