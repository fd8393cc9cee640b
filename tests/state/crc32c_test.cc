// CRC-32C against its published check value and the RFC 3720 (iSCSI)
// test vectors, and extension in parts equal to the whole.
#include "server/state/crc32c.h"

#include <string>

#include "gtest/gtest.h"

namespace stagger::state {
namespace {

TEST(Crc32c, CheckValue) { EXPECT_EQ(Crc32c("123456789"), 0xE3069283u); }

TEST(Crc32c, Rfc3720Vectors) {
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(Crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32c, EmptyIsZero) { EXPECT_EQ(Crc32c(""), 0u); }

TEST(Crc32c, ExtendingInPartsEqualsTheWhole) {
  const std::string all = "the quick brown fox jumps over the lazy dog";
  for (size_t cut = 0; cut <= all.size(); ++cut) {
    const uint32_t parts =
        Crc32cExtend(Crc32c(all.substr(0, cut)), all.substr(cut));
    EXPECT_EQ(parts, Crc32c(all)) << "cut at " << cut;
  }
}

TEST(Crc32c, OneFlippedBitChangesIt) {
  std::string s(1000, 'x');
  const uint32_t before = Crc32c(s);
  s[500] ^= 0x01;
  EXPECT_NE(Crc32c(s), before);
}

}  // namespace
}  // namespace stagger::state
