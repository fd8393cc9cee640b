// client/tls_options: CheckClientTlsOptions refuses, naming the flag, every
// combination or file a client could not use, and accepts a CA alone or a
// CA with a client certificate and key.
#include "client/tls_options.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"

namespace stagger::client {
namespace {

using ::stagger::testing::ScratchDir;
using ::stagger::testing::WriteFile;
using ::testing::HasSubstr;

constexpr char kPem[] =
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

class CheckClientTlsOptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    ASSERT_TRUE(WriteFile(dir_ / "good.pem", kPem));
    ASSERT_TRUE(WriteFile(dir_ / "not.pem", "just text\n"));
  }
  // Every file good, with a client certificate.
  ClientTlsOptions Mutual() {
    ClientTlsOptions tls;
    tls.ca_file = dir_ / "good.pem";
    tls.cert_file = dir_ / "good.pem";
    tls.key_file = dir_ / "good.pem";
    return tls;
  }
  ScratchDir dir_;
};

TEST_F(CheckClientTlsOptionsTest, PlaintextACaAloneAndACaWithACertificatePass) {
  EXPECT_TRUE(CheckClientTlsOptions(ClientTlsOptions{}).ok());
  ClientTlsOptions ca_only;
  ca_only.ca_file = dir_ / "good.pem";
  EXPECT_TRUE(CheckClientTlsOptions(ca_only).ok());
  EXPECT_TRUE(CheckClientTlsOptions(Mutual()).ok());
}

TEST_F(CheckClientTlsOptionsTest, EachFileThatIsNotPemIsNamed) {
  for (std::string ClientTlsOptions::*file :
       {&ClientTlsOptions::ca_file, &ClientTlsOptions::cert_file,
        &ClientTlsOptions::key_file}) {
    ClientTlsOptions tls = Mutual();
    tls.*file = dir_ / "not.pem";
    const absl::Status s = CheckClientTlsOptions(tls);
    const std::string flag = file == &ClientTlsOptions::ca_file ? "tls_ca_file"
                             : file == &ClientTlsOptions::cert_file
                                 ? "tls_cert_file"
                                 : "tls_key_file";
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_EQ(s.message(),
              "--" + flag + "=" + (dir_ / "not.pem") + ": not a PEM file");
  }
}

TEST_F(CheckClientTlsOptionsTest, AMissingKeyFileCannotBeRead) {
  ClientTlsOptions tls = Mutual();
  tls.key_file = dir_ / "absent.key";
  EXPECT_THAT(std::string(CheckClientTlsOptions(tls).message()),
              HasSubstr("--tls_key_file=" + (dir_ / "absent.key") +
                        ": cannot be read"));
}

TEST_F(CheckClientTlsOptionsTest, BadCombinationsAreRefused) {
  ClientTlsOptions cert_without_ca = Mutual();
  cert_without_ca.ca_file.clear();
  EXPECT_THAT(std::string(CheckClientTlsOptions(cert_without_ca).message()),
              HasSubstr("need --tls_ca_file"));
  ClientTlsOptions cert_without_key = Mutual();
  cert_without_key.key_file.clear();
  EXPECT_THAT(std::string(CheckClientTlsOptions(cert_without_key).message()),
              HasSubstr("both --tls_cert_file and --tls_key_file"));
  ClientTlsOptions slow_refresh = Mutual();
  slow_refresh.refresh_interval = absl::Hours(2);
  EXPECT_THAT(std::string(CheckClientTlsOptions(slow_refresh).message()),
              HasSubstr("must be in [1s, 1h]"));
}

}  // namespace
}  // namespace stagger::client
