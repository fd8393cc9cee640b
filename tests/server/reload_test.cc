// Live config reload through the real staggerd, as it happens under
// Kubernetes: --config points into a ConfigMap volume,
//
//   dir/config.textproto -> ..data/config.textproto
//   dir/..data           -> ..2026_12_02_00_00_00.000     (a directory)
//
// and an update writes a new timestamped directory, points a temporary
// symlink at it, renames that over ..data (atomic) and removes the old
// directory -- what the kubelet's AtomicWriter does. The file named by
// --config never changes; only what it resolves to does.
//
// The policies differ in max_attempts, which is observable from outside:
// a failure report for attempt 2 answers PROCEED(BACKOFF) while the limit is
// above 2, and GIVE_UP(ATTEMPTS_EXHAUSTED) once it is 2. Each such probe uses
// a fresh endpoint key, so probes never feed each other's breaker. The
// breaker settings are the same in every version, so "state kept" means
// exactly that: an endpoint's open breaker (its open_until instant, its trip
// count) is untouched by a reload.
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/server/rpc_helpers.h"
#include "tests/testing/blackbox_util.h"
#include "tests/testing/files.h"
#include "tests/testing/kubelet_volume.h"
#include "tests/testing/staggerd_process.h"

#ifndef STAGGERD_PATH
#error "STAGGERD_PATH must name the staggerd binary (set by CMake)"
#endif

namespace stagger::server_test {
namespace {

using stagger::testing::KubeletVolume;
using stagger::testing::PollUntil;
using stagger::testing::ReplaceFile;
using stagger::testing::ScrapeMetric;
using stagger::testing::ScratchDir;
using stagger::testing::StaggerdProcess;
using stagger::testing::WriteFile;

constexpr char kPrefix[] = "https://hooks.reload.example/";
constexpr char kOverrideName[] = "prefix:https://hooks.reload.example/";
constexpr char kSuccess[] = "stagger_config_reloads_total{result=\"success\"}";
constexpr char kFailure[] = "stagger_config_reloads_total{result=\"failure\"}";

// v1: no override. The breaker trips after 3 consecutive failures and stays
// open for 10 minutes (+-20%): far longer than the test.
constexpr char kBreaker[] = R"pb(
  breaker {
    consecutive_failures: 3
    open_base { seconds: 600 }
    open_max { seconds: 3600 }
  }
)pb";
std::string ConfigV1() {
  return absl::StrCat("default_policy {", kBreaker, "}\n");
}
// The same plus an override for kPrefix with the given max_attempts (the
// override inherits the default policy's breaker).
std::string ConfigWithOverride(int max_attempts) {
  return absl::StrCat(ConfigV1(), "overrides {\n  prefix: \"", kPrefix,
                      "\"\n  policy { backoff { max_attempts: ", max_attempts,
                      " } }\n}\n");
}
// Parses, but two fields are out of range.
std::string ConfigInvalid() {
  return absl::StrCat(ConfigWithOverride(0), "limits { max_key_bytes: 0 }\n");
}

// The config file's name in the ConfigMap volume.
constexpr char kConfigName[] = "config.textproto";

class ReloadTest : public ::testing::Test {
 protected:
  void Start(const std::string& config_path, const std::string& poll) {
    auto c = StaggerdProcess::Spawn(STAGGERD_PATH,
                                    {"--address=127.0.0.1:0",
                                     "--metrics_address=127.0.0.1:0",
                                     "--config=" + config_path,
                                     "--config_poll_interval=" + poll});
    ASSERT_TRUE(c.ok()) << c.status();
    d_ = *std::move(c);
    absl::Status up = d_->WaitUntilListening();
    ASSERT_TRUE(up.ok()) << up;
    ASSERT_GT(d_->metrics_port(), 0);
    stub_ = v1::RetryCoordinator::NewStub(Channel(d_->target()));
  }

  void TearDown() override {
    if (d_ == nullptr) return;
    // An idle C++ channel is only polled every few seconds, and the server's
    // graceful GOAWAY waits for the client's answer: close it first.
    stub_.reset();
    d_->Signal(SIGTERM);
    absl::StatusOr<int> code = d_->WaitForExit();
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0);
  }

  std::optional<double> Metric(const char* series) {
    return ScrapeMetric(d_->metrics_port(), series);
  }
  bool MetricBecomes(const char* series, double value) {
    return PollUntil([&] { return Metric(series) == value; });
  }

  // The policy GetEndpoint names for `ep` ("" if the call fails).
  std::string PolicyOf(const std::string& ep) {
    v1::EndpointState st;
    return GetEndpoint(*stub_, ep, &st).ok() ? st.policy() : "";
  }

  // A failure report for attempt `attempt` on a never-seen endpoint under
  // kPrefix: what the current policy answers.
  v1::Decision ProbeFailure(int attempt) {
    const std::string ep = absl::StrCat(kPrefix, "probe-", ++probes_);
    v1::Decision d;
    grpc::Status s = Report(*stub_, ep, attempt, v1::RETRYABLE_FAILURE, &d);
    EXPECT_TRUE(s.ok()) << s;
    return d;
  }

  // Trips `ep`'s breaker (3 deliveries fail their first attempt) and
  // returns its state.
  v1::EndpointState Trip(const std::string& ep) {
    v1::Decision d;
    for (int i = 1; i <= 3; ++i) {
      grpc::Status s = Report(*stub_, ep, 1, v1::RETRYABLE_FAILURE, &d);
      EXPECT_TRUE(s.ok()) << s;
    }
    // failures=3: tripped, the third report is told to defer.
    EXPECT_EQ(d.verdict(), v1::DEFER) << Describe(d);
    EXPECT_EQ(d.reason(), v1::CIRCUIT_OPEN) << Describe(d);
    v1::EndpointState st;
    EXPECT_TRUE(GetEndpoint(*stub_, ep, &st).ok());
    EXPECT_EQ(st.breaker_state(), v1::OPEN);
    EXPECT_EQ(st.consecutive_trips(), 1);
    return st;
  }

  // `ep`'s breaker is exactly as `before` left it, and Admit still defers.
  void ExpectBreakerKept(const std::string& ep, const v1::EndpointState& before) {
    v1::EndpointState now;
    ASSERT_TRUE(GetEndpoint(*stub_, ep, &now).ok());
    EXPECT_EQ(now.breaker_state(), v1::OPEN);
    EXPECT_EQ(now.consecutive_trips(), before.consecutive_trips());
    EXPECT_EQ(now.consecutive_failures(), before.consecutive_failures());
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        now.open_until(), before.open_until()))
        << "open_until moved: " << before.open_until().ShortDebugString()
        << " -> " << now.open_until().ShortDebugString();
    v1::Decision d;
    ASSERT_TRUE(Admit(*stub_, ep, 2, &d).ok());
    EXPECT_EQ(d.verdict(), v1::DEFER) << Describe(d);
    EXPECT_EQ(d.reason(), v1::CIRCUIT_OPEN) << Describe(d);
  }

  std::unique_ptr<StaggerdProcess> d_;
  std::unique_ptr<Coordinator> stub_;
  int probes_ = 0;
};

TEST_F(ReloadTest, ConfigMapSymlinkSwapReloadsKeepsStateAndRefusesBadFiles) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  KubeletVolume mount(dir.path());
  ASSERT_TRUE(mount.Update({{kConfigName, ConfigV1()}}));
  const std::string config = mount.path(kConfigName);
  Start(config, "200ms");
  const std::string tripped = absl::StrCat(kPrefix, "tripped");

  // v1 in force: no reload yet (the file read at start-up is not counted).
  EXPECT_EQ(Metric(kSuccess), 0.0);
  EXPECT_EQ(Metric(kFailure), 0.0);
  const v1::EndpointState open = Trip(tripped);
  EXPECT_EQ(open.policy(), "default");
  // max_attempts 8: attempt 2's failure gets a backoff for attempt 3.
  v1::Decision p = ProbeFailure(2);
  EXPECT_EQ(p.verdict(), v1::PROCEED) << Describe(p);
  EXPECT_EQ(p.reason(), v1::BACKOFF) << Describe(p);

  // Swap ..data to v2: an override for the prefix with max_attempts 2.
  ASSERT_TRUE(mount.Update({{kConfigName, ConfigWithOverride(2)}}));
  ASSERT_TRUE(PollUntil([&] { return PolicyOf(tripped) == kOverrideName; }))
      << "the ..data swap was not picked up; policy: " << PolicyOf(tripped);
  // Attempt 2 is now the last one.
  p = ProbeFailure(2);
  EXPECT_EQ(p.verdict(), v1::GIVE_UP) << Describe(p);
  EXPECT_EQ(p.reason(), v1::ATTEMPTS_EXHAUSTED) << Describe(p);
  // The endpoint's breaker is still open, to the same instant.
  ExpectBreakerKept(tripped, open);
  EXPECT_TRUE(MetricBecomes(kSuccess, 1)) << Metric(kSuccess).value_or(-1);
  EXPECT_EQ(Metric(kFailure), 0.0);
  EXPECT_TRUE(d_->WaitForOutput("config reloaded from " + config))
      << d_->output();

  // Swap to an invalid version: refused, every error logged with the file
  // and its field path, counted; v2 stays in force.
  size_t mark = d_->output_size();
  ASSERT_TRUE(mount.Update({{kConfigName, ConfigInvalid()}}));
  EXPECT_TRUE(MetricBecomes(kFailure, 1)) << Metric(kFailure).value_or(-1);
  EXPECT_TRUE(d_->WaitForOutput(
      config + ": overrides[0].policy.backoff.max_attempts", mark))
      << d_->output_from(mark);
  EXPECT_TRUE(d_->WaitForOutput(config + ": limits.max_key_bytes", mark))
      << d_->output_from(mark);
  EXPECT_TRUE(d_->WaitForOutput("keeping the current config", mark))
      << d_->output_from(mark);
  EXPECT_EQ(Metric(kSuccess), 1.0);
  EXPECT_EQ(PolicyOf(tripped), kOverrideName);
  p = ProbeFailure(2);
  EXPECT_EQ(p.verdict(), v1::GIVE_UP) << Describe(p);
  EXPECT_EQ(p.reason(), v1::ATTEMPTS_EXHAUSTED) << Describe(p);
  ExpectBreakerKept(tripped, open);
  // The same bad version is reported once, not at every poll: over the
  // next second (five poll intervals, fewer on a slow machine) the failure
  // count stays 1.
  const absl::Time until = absl::Now() + absl::Seconds(1);
  while (absl::Now() < until) {
    ASSERT_EQ(Metric(kFailure), 1.0) << "the same bad file counted again";
    absl::SleepFor(absl::Milliseconds(100));
  }

  // A good version again (max_attempts 3): applied.
  ASSERT_TRUE(mount.Update({{kConfigName, ConfigWithOverride(3)}}));
  EXPECT_TRUE(MetricBecomes(kSuccess, 2)) << Metric(kSuccess).value_or(-1);
  EXPECT_EQ(Metric(kFailure), 1.0);
  p = ProbeFailure(2);
  EXPECT_EQ(p.verdict(), v1::PROCEED) << Describe(p);
  EXPECT_EQ(p.attempt(), 3);
  p = ProbeFailure(3);
  EXPECT_EQ(p.verdict(), v1::GIVE_UP) << Describe(p);
  EXPECT_EQ(p.reason(), v1::ATTEMPTS_EXHAUSTED) << Describe(p);
  ExpectBreakerKept(tripped, open);

  // SIGHUP reloads even though the bytes have not changed.
  mark = d_->output_size();
  d_->Signal(SIGHUP);
  EXPECT_TRUE(MetricBecomes(kSuccess, 3)) << Metric(kSuccess).value_or(-1);
  // stderr is read on another thread: wait for the line, don't race it.
  EXPECT_TRUE(d_->WaitForOutput("SIGHUP: reloading config", mark))
      << d_->output_from(mark);
  EXPECT_EQ(Metric(kFailure), 1.0);
  ExpectBreakerKept(tripped, open);
}

// With a poll interval of an hour only SIGHUP can reload: a new file is not
// in force until the signal, then it is; a bad file on SIGHUP is refused.
TEST_F(ReloadTest, SighupReloadsAGoodFileAndRefusesABadOne) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir / "stagger.textproto";
  ASSERT_TRUE(WriteFile(path, ConfigV1()));
  Start(path, "1h");
  const std::string ep = absl::StrCat(kPrefix, "hup");
  ASSERT_TRUE(Admit(*stub_, ep, 1, nullptr).ok());
  EXPECT_EQ(PolicyOf(ep), "default");

  // A new file, no signal: still v1 (the poller sleeps for an hour).
  ASSERT_TRUE(ReplaceFile(path, ConfigWithOverride(2)));
  EXPECT_EQ(PolicyOf(ep), "default");
  EXPECT_EQ(Metric(kSuccess), 0.0);

  // SIGHUP: v2 in force.
  size_t mark = d_->output_size();
  d_->Signal(SIGHUP);
  ASSERT_TRUE(PollUntil([&] { return PolicyOf(ep) == kOverrideName; }))
      << "SIGHUP did not reload; policy: " << PolicyOf(ep);
  EXPECT_TRUE(MetricBecomes(kSuccess, 1));
  // stderr is read on another thread: wait for the line, don't race it.
  EXPECT_TRUE(d_->WaitForOutput("SIGHUP: reloading config", mark))
      << d_->output_from(mark);
  v1::Decision p = ProbeFailure(2);
  EXPECT_EQ(p.reason(), v1::ATTEMPTS_EXHAUSTED) << Describe(p);

  // A bad file on SIGHUP: refused with its field paths, counted, v2 kept.
  ASSERT_TRUE(ReplaceFile(path, ConfigInvalid()));
  mark = d_->output_size();
  d_->Signal(SIGHUP);
  EXPECT_TRUE(MetricBecomes(kFailure, 1));
  EXPECT_TRUE(d_->WaitForOutput(
      path + ": overrides[0].policy.backoff.max_attempts", mark))
      << d_->output_from(mark);
  EXPECT_EQ(Metric(kSuccess), 1.0);
  EXPECT_EQ(PolicyOf(ep), kOverrideName);
  p = ProbeFailure(2);
  EXPECT_EQ(p.reason(), v1::ATTEMPTS_EXHAUSTED) << Describe(p);

  // The file goes away: SIGHUP is a failed reload naming it, v2 kept.
  ASSERT_EQ(unlink(path.c_str()), 0);
  mark = d_->output_size();
  d_->Signal(SIGHUP);
  EXPECT_TRUE(MetricBecomes(kFailure, 2));
  EXPECT_TRUE(d_->WaitForOutput(path, mark)) << d_->output_from(mark);
  EXPECT_EQ(PolicyOf(ep), kOverrideName);
  // The staggerd with a 1h poll interval still exits promptly (TearDown).
}

}  // namespace
}  // namespace stagger::server_test
