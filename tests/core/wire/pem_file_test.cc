// core/wire/pem_file: the one check of a TLS file that staggerd and the
// client tools share - its bytes, or an error naming the flag and the path.
#include "core/wire/pem_file.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"

namespace stagger::wire {
namespace {

using ::stagger::testing::ScratchDir;
using ::stagger::testing::WriteFile;
using ::testing::HasSubstr;

constexpr char kPem[] =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

TEST(ReadPemFileTest, AReadablePemFileComesBackWhole) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(WriteFile(dir / "ca.pem", kPem));
  absl::StatusOr<std::string> bytes = ReadPemFile("tls_ca_file", dir / "ca.pem");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, kPem);
}

TEST(ReadPemFileTest, AMissingFileNamesTheFlagAndThePath) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::string> bytes =
      ReadPemFile("tls_cert_file", dir / "absent.pem");
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bytes.status().message(),
            "--tls_cert_file=" + (dir / "absent.pem") + ": cannot be read");
}

TEST(ReadPemFileTest, ADirectoryCannotBeRead) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  absl::StatusOr<std::string> bytes = ReadPemFile("tls_key_file", dir.path());
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bytes.status().message(), HasSubstr("--tls_key_file="));
}

TEST(ReadPemFileTest, AFileWithoutABeginLineIsNotPem) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  ASSERT_TRUE(WriteFile(dir / "key.der", std::string("\x30\x82\x01\x0a", 4)));
  absl::StatusOr<std::string> bytes = ReadPemFile("tls_key_file", dir / "key.der");
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bytes.status().message(),
            "--tls_key_file=" + (dir / "key.der") + ": not a PEM file");
}

TEST(ReadPemFileTest, TheLimitItselfIsAcceptedOneByteMoreIsRefused) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  std::string at_limit(kPem);
  at_limit.resize(kMaxPemFileBytes, '\n');
  ASSERT_TRUE(WriteFile(dir / "bundle.pem", at_limit));
  EXPECT_TRUE(ReadPemFile("tls_client_ca_file", dir / "bundle.pem").ok());

  ASSERT_TRUE(WriteFile(dir / "bundle.pem", at_limit + "\n"));
  absl::StatusOr<std::string> bytes =
      ReadPemFile("tls_client_ca_file", dir / "bundle.pem");
  EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bytes.status().message(),
            "--tls_client_ca_file=" + (dir / "bundle.pem") +
                ": over the limit of 1048576 bytes");
}

}  // namespace
}  // namespace stagger::wire
