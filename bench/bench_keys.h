// Endpoint keys for the benchmarks: realistic webhook URLs,
//   "https://hooks.tenant-<id>.example.com/webhooks/v1"
// with the id zero-padded to at least six digits (51 bytes for ids below
// 1,000,000). Formatted into a caller's buffer: no allocation, ~10 ns.
#ifndef STAGGER_BENCH_BENCH_KEYS_H_
#define STAGGER_BENCH_BENCH_KEYS_H_

#include <cstdint>
#include <cstring>

#include "absl/strings/string_view.h"

namespace stagger::bench {

inline constexpr int kKeyBufferBytes = 96;

// Returns a view of `buf`, valid until `buf` is written again.
inline absl::string_view FormatKey(uint64_t id, char (&buf)[kKeyBufferBytes]) {
  static constexpr char kHead[] = "https://hooks.tenant-";
  static constexpr char kTail[] = ".example.com/webhooks/v1";
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + id % 10);
    id /= 10;
  } while (id != 0);
  while (n < 6) digits[n++] = '0';
  char* p = buf;
  std::memcpy(p, kHead, sizeof(kHead) - 1);
  p += sizeof(kHead) - 1;
  while (n > 0) *p++ = digits[--n];
  std::memcpy(p, kTail, sizeof(kTail) - 1);
  p += sizeof(kTail) - 1;
  return absl::string_view(buf, static_cast<size_t>(p - buf));
}

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_BENCH_KEYS_H_
