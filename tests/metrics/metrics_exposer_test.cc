// MetricsExposer tests against a real HTTP listener on 127.0.0.1: it serves
// the registry at /metrics, refreshes engine gauges per scrape, and turns a
// bind failure (port taken) or a malformed address into a Status instead of
// prometheus-cpp's exception.
#include "core/metrics/metrics_exposer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "server/metrics/server_metrics.h"
#include "tests/testing/http_get.h"
#include "tests/testing/prom_text.h"

namespace stagger::metrics {
namespace {

using ::testing::HasSubstr;
using stagger::testing::HttpGet;
using stagger::testing::PromText;

TEST(MetricsExposerTest, ServesTheRegistryOnAnEphemeralLoopbackPort) {
  auto registry = std::make_shared<prometheus::Registry>();
  ServerMetrics metrics(*registry, 8);
  engine::Decision d;
  d.verdict = engine::Verdict::kGiveUp;
  d.reason = engine::Reason::kAttemptsExhausted;
  metrics.RecordDecision(ServerMetrics::Call::kReport, d);

  auto exposer = MetricsExposer::Start("127.0.0.1:0", registry,
                                       [&metrics] { metrics.RefreshEngineStats(); });
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const int port = (*exposer)->port();
  ASSERT_GT(port, 0);

  auto response = HttpGet(port, "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  PromText t(response->body);
  ASSERT_TRUE(t.ok()) << t.error();
  EXPECT_EQ(t.Value("stagger_decisions_total", {{"call", "report"},
                                                {"verdict", "GIVE_UP"},
                                                {"reason", "ATTEMPTS_EXHAUSTED"}}),
            1);
  EXPECT_THAT(response->body, HasSubstr("# TYPE stagger_retry_delay_seconds histogram"));
  EXPECT_THAT(response->body, HasSubstr("# HELP stagger_decisions_total "));

  // A second scrape sees a later increment: values are live, not cached.
  metrics.RecordDecision(ServerMetrics::Call::kReport, d);
  response = HttpGet(port, "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(PromText(response->body)
                .Value("stagger_decisions_total",
                       {{"call", "report"},
                        {"verdict", "GIVE_UP"},
                        {"reason", "ATTEMPTS_EXHAUSTED"}}),
            2);

  // Anything but /metrics is not served.
  response = HttpGet(port, "/other");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 404);
}

TEST(MetricsExposerTest, PortAlreadyInUseIsAnErrorNotAnException) {
  // Hold a listening socket on an ephemeral loopback port...
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  // ... then ask the exposer for it.
  auto registry = std::make_shared<prometheus::Registry>();
  auto exposer = MetricsExposer::Start(taken, registry, nullptr);
  close(fd);
  ASSERT_FALSE(exposer.ok());
  EXPECT_EQ(exposer.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(exposer.status().message(), HasSubstr(taken));
  EXPECT_THAT(exposer.status().message(), HasSubstr("in use"));
}

TEST(MetricsExposerTest, MalformedAddressesAreInvalidArgument) {
  auto registry = std::make_shared<prometheus::Registry>();
  for (const char* bad : {"", "9464", ":9464", "127.0.0.1:", "127.0.0.1:x",
                          "127.0.0.1:65536", "127.0.0.1:-1"}) {
    auto exposer = MetricsExposer::Start(bad, registry, nullptr);
    ASSERT_FALSE(exposer.ok()) << bad;
    EXPECT_EQ(exposer.status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
    EXPECT_THAT(exposer.status().message(), HasSubstr("metrics_address"));
  }
  EXPECT_EQ(MetricsExposer::Start("127.0.0.1:0", nullptr, nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace stagger::metrics
