// ExposureLine: staggerd's first line says which interfaces each port
// serves and with what security, from the flags as given.
#include "server/daemon/exposure.h"

#include "gtest/gtest.h"

namespace stagger::daemon {
namespace {

TEST(ExposureLine, TheDefaultsServeLoopbackOnlyInPlaintext) {
  EXPECT_EQ(ExposureLine({"127.0.0.1:50051", "127.0.0.1:9464", "", "", {}}),
            "serving gRPC on 127.0.0.1:50051 (loopback only), plaintext, no "
            "authorization policy; metrics on 127.0.0.1:9464 (loopback only, "
            "plain HTTP); no health port; no status page");
}

TEST(ExposureLine, TheSecureOverlaySaysMutualTlsAndItsPolicy) {
  security::SecurityFlags s;
  s.tls = {"/etc/stagger-tls/tls.crt", "/etc/stagger-tls/tls.key",
           "/etc/stagger-tls/ca.crt"};
  s.authz_policy_file = "/etc/stagger-authz/authz-policy.json";
  EXPECT_EQ(
      ExposureLine({"0.0.0.0:50051", "0.0.0.0:9464", "0.0.0.0:8081", "", s}),
      "serving gRPC on 0.0.0.0:50051 (all interfaces), mutual TLS, "
      "authorization policy /etc/stagger-authz/authz-policy.json; metrics on "
      "0.0.0.0:9464 (all interfaces, plain HTTP); health on 0.0.0.0:8081 "
      "(all interfaces, plaintext); no status page");
}

TEST(ExposureLine, TlsWithoutClientCertificatesIsSaid) {
  security::SecurityFlags s;
  s.tls = {"c.pem", "k.pem", ""};
  EXPECT_EQ(ExposureLine({"10.0.0.7:50051", "", "", "127.0.0.1:8080", s}),
            "serving gRPC on 10.0.0.7:50051 (interface 10.0.0.7 only), TLS "
            "without client certificates, no authorization policy; no "
            "metrics; no health port; status page on 127.0.0.1:8080 "
            "(loopback only, plain HTTP, no login)");
}

}  // namespace
}  // namespace stagger::daemon
