// Endpoint keys (core/engine/key_validation.h): the messages that name what
// is wrong, and the eight-bytes-at-a-time printable-ASCII check held to a
// byte-by-byte reference for every byte value at every position of a word
// and of the tail.
#include "core/engine/key_validation.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace stagger::engine {
namespace {

constexpr int kMax = 4096;

// What the rules say about a key with one unusual byte `c` in it, checked
// one byte at a time: control characters are refused, printable ASCII is
// fine, and a byte >= 0x80 alone is not UTF-8.
std::string Expected(unsigned char c, size_t at) {
  if (c < 0x20 || c == 0x7f) {
    return absl::StrCat("endpoint: control character 0x",
                        absl::Hex(c, absl::kZeroPad2), " at byte ", at);
  }
  if (c >= 0x80) return absl::StrCat("endpoint: not valid UTF-8 at byte ", at);
  return "";
}

TEST(EndpointKeyTest, EveryByteAtEveryPositionMatchesTheByteByByteRules) {
  // Lengths 1..17 cover a tail alone, one word, a word and a tail, two
  // words and a tail: the byte sits in each lane of the fast path.
  for (size_t len = 1; len <= 17; ++len) {
    for (size_t at = 0; at < len; ++at) {
      for (int b = 0; b < 256; ++b) {
        std::string key(len, 'a');
        key[at] = static_cast<char>(b);
        const absl::Status s = ValidateEndpointKey(key, kMax);
        const std::string want = Expected(static_cast<unsigned char>(b), at);
        if (want.empty()) {
          ASSERT_TRUE(s.ok()) << "len " << len << " byte " << b << " at "
                              << at << ": " << s;
        } else {
          ASSERT_EQ(s.message(), want) << "len " << len << " at " << at;
          ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
        }
      }
    }
  }
}

TEST(EndpointKeyTest, EmptyAndOversizedKeysNameTheLimit) {
  EXPECT_EQ(ValidateEndpointKey("", kMax).message(),
            "endpoint: must not be empty");
  EXPECT_TRUE(ValidateEndpointKey(std::string(50, 'k'), 50).ok());
  EXPECT_EQ(ValidateEndpointKey(std::string(51, 'k'), 50).message(),
            "endpoint: 51 bytes, over the limit of 50 (limits.max_key_bytes)");
}

TEST(EndpointKeyTest, WellFormedUtf8OfEachLengthIsAccepted) {
  EXPECT_TRUE(ValidateEndpointKey("caf\xc3\xa9", kMax).ok());        // U+00E9
  EXPECT_TRUE(ValidateEndpointKey("\xe2\x82\xac/x", kMax).ok());     // U+20AC
  EXPECT_TRUE(ValidateEndpointKey("\xf0\x9f\x98\x80", kMax).ok());   // U+1F600
  EXPECT_TRUE(ValidateEndpointKey("\xf4\x8f\xbf\xbf", kMax).ok());   // U+10FFFF
}

TEST(EndpointKeyTest, MalformedUtf8IsRefusedAtItsFirstByte) {
  // Overlong "/" (0xc0 0xaf), a surrogate (U+D800), above U+10FFFF, a lone
  // continuation byte, a sequence cut short, and a bad continuation.
  EXPECT_EQ(InvalidUtf8At("ab\xc0\xaf"), 2u);
  EXPECT_EQ(InvalidUtf8At("\xed\xa0\x80"), 0u);
  EXPECT_EQ(InvalidUtf8At("x\xf4\x90\x80\x80"), 1u);
  EXPECT_EQ(InvalidUtf8At("abc\x80"), 3u);
  EXPECT_EQ(InvalidUtf8At("ab\xe2\x82"), 2u);
  EXPECT_EQ(InvalidUtf8At("\xc3\x28"), 0u);
  EXPECT_EQ(InvalidUtf8At("plain"), absl::string_view::npos);
  EXPECT_EQ(ValidateEndpointKey("https://h/\xed\xa0\x80", kMax).message(),
            "endpoint: not valid UTF-8 at byte 10");
}

}  // namespace
}  // namespace stagger::engine
