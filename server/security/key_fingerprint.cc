#include "server/security/key_fingerprint.h"

#include <openssl/evp.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace stagger::security {

std::string KeyFingerprint(absl::string_view key) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_Digest(key.data(), key.size(), digest, &n, EVP_sha256(), nullptr) != 1) {
    return "key#?";
  }
  const std::string hex = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), n));
  return absl::StrCat("key#", hex.substr(0, 12));
}

}  // namespace stagger::security
