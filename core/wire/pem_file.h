// Reading a TLS file (certificate, key or CA bundle) that a flag names, as
// staggerd and the client tools both check theirs before handing the path
// to gRPC's file watcher: one check, one set of messages on both sides.
//
// Contract:
//   * Returns the file's bytes, or INVALID_ARGUMENT naming the flag and the
//     path: "--FLAG=PATH: cannot be read", "...: over the limit of 1048576
//     bytes", "...: not a PEM file" (no "-----BEGIN " line).
//   * kMaxPemFileBytes (1 MiB) holds a long chain or a large CA bundle; a
//     larger file is refused, not read into memory whole.
// Stateless; thread-safe.
#ifndef STAGGER_CORE_WIRE_PEM_FILE_H_
#define STAGGER_CORE_WIRE_PEM_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace stagger::wire {

inline constexpr size_t kMaxPemFileBytes = size_t{1} << 20;

// `flag` is the flag's name without dashes ("tls_cert_file").
absl::StatusOr<std::string> ReadPemFile(absl::string_view flag,
                                        const std::string& path);

}  // namespace stagger::wire

#endif  // STAGGER_CORE_WIRE_PEM_FILE_H_
