#include "core/wire/pem_file.h"

#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace stagger::wire {

absl::StatusOr<std::string> ReadPemFile(absl::string_view flag,
                                        const std::string& path) {
  const std::string named = absl::StrCat("--", flag, "=", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(named + ": cannot be read");
  std::string bytes(kMaxPemFileBytes + 1, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (in.bad()) return absl::InvalidArgumentError(named + ": cannot be read");
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (bytes.size() > kMaxPemFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        named, ": over the limit of ", kMaxPemFileBytes, " bytes"));
  }
  if (bytes.find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(named + ": not a PEM file");
  }
  return bytes;
}

}  // namespace stagger::wire
