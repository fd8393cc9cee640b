#include "core/engine/key_validation.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace stagger::engine {
namespace {

// The length of the UTF-8 sequence that lead byte `c` starts (2..4) and the
// code point bits it carries, or 0 for a byte that cannot lead one.
int SequenceLength(unsigned char c, uint32_t* cp) {
  if ((c & 0xe0) == 0xc0) {
    *cp = c & 0x1f;
    return 2;
  }
  if ((c & 0xf0) == 0xe0) {
    *cp = c & 0x0f;
    return 3;
  }
  if ((c & 0xf8) == 0xf0) {
    *cp = c & 0x07;
    return 4;
  }
  return 0;
}

// True if every byte of `key` is printable ASCII (0x20..0x7e): no control
// character and nothing UTF-8 needs checking. Eight bytes at a time: a byte
// b < 0x20 leaves its top bit set in (w - 0x2020..) & ~w, a byte b >= 0x7f
// in w | (w + 0x0101..). Both are exact for "some byte matches" (a borrow or
// carry only crosses a byte that already matched). The common case of a
// key; anything else takes the byte-by-byte checks.
bool IsPrintableAscii(absl::string_view key) {
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  const char* p = key.data();
  size_t n = key.size();
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    if ((((w - kOnes * 0x20) & ~w) | w | (w + kOnes)) & kHigh) return false;
  }
  for (; n > 0; --n, ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

size_t InvalidUtf8At(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp = 0;
    const int len = SequenceLength(c, &cp);
    if (len == 0 || i + len > s.size()) return i;
    for (int k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return i;
    }
    i += len;
  }
  return absl::string_view::npos;
}

absl::Status ValidateEndpointKey(absl::string_view key, int max_key_bytes) {
  if (key.empty()) {
    return absl::InvalidArgumentError("endpoint: must not be empty");
  }
  if (key.size() > static_cast<size_t>(max_key_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint: ", key.size(), " bytes, over the limit of ",
                     max_key_bytes, " (limits.max_key_bytes)"));
  }
  if (IsPrintableAscii(key)) return absl::OkStatus();  // the common case
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "endpoint: control character 0x", absl::Hex(c, absl::kZeroPad2),
          " at byte ", i));
    }
  }
  if (size_t bad = InvalidUtf8At(key); bad != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("endpoint: not valid UTF-8 at byte ", bad));
  }
  return absl::OkStatus();
}

}  // namespace stagger::engine
