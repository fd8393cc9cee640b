// KeyFingerprint: how staggerd's logs name an endpoint key or key prefix
// without writing it (keys can carry secrets: docs/SECURITY.md): "key#"
// and the first 12 hex digits of its SHA-256. Stable across runs and
// machines, so an operator can match a log line to a key they hold
// (`printf %s KEY | sha256sum`). Pure; thread-safe.
#ifndef STAGGER_SERVER_SECURITY_KEY_FINGERPRINT_H_
#define STAGGER_SERVER_SECURITY_KEY_FINGERPRINT_H_

#include <string>

#include "absl/strings/string_view.h"

namespace stagger::security {

std::string KeyFingerprint(absl::string_view key);

}  // namespace stagger::security

#endif  // STAGGER_SERVER_SECURITY_KEY_FINGERPRINT_H_
