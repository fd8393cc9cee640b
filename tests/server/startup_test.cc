// staggerd start-up, as an operator sees it: which config it runs on, and
// how it refuses to start (exit code and stderr) when it cannot.
//
//   no --config          -> serves on the embedded defaults
//   bad config file      -> exit 2, every error on stderr with its field path
//   unparsable file      -> exit 2, file:line:column
//   missing config file  -> non-zero, the file named
//   gRPC port taken      -> exit 1, "cannot listen on <address>" (also when
//                           the port is held by another staggerd)
//   metrics port taken   -> exit 1, "cannot serve metrics"
//   bad transport limit  -> exit 2, each flag named with its range
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/rpc_helpers.h"
#include "tests/testing/blackbox_util.h"
#include "tests/testing/files.h"
#include "tests/testing/staggerd_process.h"

#ifndef STAGGERD_PATH
#error "STAGGERD_PATH must name the staggerd binary (set by CMake)"
#endif
#ifndef SERVER_TESTDATA
#error "SERVER_TESTDATA must name tests/server/testdata (set by CMake)"
#endif

namespace stagger::server_test {
namespace {

using stagger::testing::BusyPort;
using stagger::testing::ScratchDir;
using stagger::testing::StaggerdProcess;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kTestdata = SERVER_TESTDATA;

// A staggerd that is expected to come up, on free loopback ports.
std::unique_ptr<StaggerdProcess> StartServing(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--address=127.0.0.1:0",
                                   "--metrics_address=127.0.0.1:0"};
  args.insert(args.end(), extra.begin(), extra.end());
  absl::StatusOr<std::unique_ptr<StaggerdProcess>> c =
      StaggerdProcess::Spawn(STAGGERD_PATH, args);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  absl::Status up = (*c)->WaitUntilListening();
  EXPECT_TRUE(up.ok()) << up;
  if (!up.ok()) return nullptr;
  return *std::move(c);
}

// A staggerd that is expected to refuse: its exit code (or -1) once it has
// exited; `stderr_out` gets everything it printed.
int ExitCodeOf(std::vector<std::string> args, std::string* stderr_out) {
  absl::StatusOr<std::unique_ptr<StaggerdProcess>> c =
      StaggerdProcess::Spawn(STAGGERD_PATH, args);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return -1;
  absl::StatusOr<int> code = (*c)->WaitForExit();
  *stderr_out = (*c)->output();
  EXPECT_TRUE(code.ok()) << code.status() << "\nstderr:\n" << *stderr_out;
  return code.ok() ? *code : -1;
}

TEST(StartupTest, NoConfigServesEmbeddedDefaults) {
  std::unique_ptr<StaggerdProcess> d = StartServing({});
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->output(), HasSubstr("no --config: running on embedded defaults"));
  EXPECT_GT(d->metrics_port(), 0) << "the ready line names the metrics port";
  auto stub = v1::RetryCoordinator::NewStub(Channel(d->target()));
  const std::string ep = "https://defaults.example/hook";

  // Nothing is tracked before the first call.
  grpc::Status s = GetEndpoint(*stub, ep, nullptr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s;

  // Attempt 1: admitted after the default initial jitter, [0, 50ms).
  v1::Decision d1;
  ASSERT_TRUE(Admit(*stub, ep, 1, &d1).ok());
  EXPECT_EQ(d1.verdict(), v1::PROCEED) << Describe(d1);
  EXPECT_EQ(d1.reason(), v1::INITIAL_JITTER) << Describe(d1);
  EXPECT_LT(d1.delay().seconds(), 1);
  EXPECT_LT(d1.delay().nanos(), 50'000'000);

  // Now tracked, under the default policy, breaker closed.
  v1::EndpointState st;
  ASSERT_TRUE(GetEndpoint(*stub, ep, &st).ok());
  EXPECT_EQ(st.policy(), "default");
  EXPECT_EQ(st.breaker_state(), v1::CLOSED);

  // Default max_attempts is 8 (counting the first): a failure of attempt 7
  // gets a backoff for attempt 8, decorrelated from base 200ms, i.e. in
  // [200ms, 600ms]; a failure of attempt 8 is the end.
  v1::Decision d7;
  ASSERT_TRUE(Report(*stub, ep, 7, v1::RETRYABLE_FAILURE, &d7).ok());
  EXPECT_EQ(d7.verdict(), v1::PROCEED) << Describe(d7);
  EXPECT_EQ(d7.reason(), v1::BACKOFF) << Describe(d7);
  EXPECT_EQ(d7.attempt(), 8);
  const absl::Duration delay =
      absl::Seconds(d7.delay().seconds()) + absl::Nanoseconds(d7.delay().nanos());
  EXPECT_GE(delay, absl::Milliseconds(200));
  EXPECT_LE(delay, absl::Milliseconds(600));
  v1::Decision d8;
  ASSERT_TRUE(Report(*stub, ep, 8, v1::RETRYABLE_FAILURE, &d8).ok());
  EXPECT_EQ(d8.verdict(), v1::GIVE_UP) << Describe(d8);
  EXPECT_EQ(d8.reason(), v1::ATTEMPTS_EXHAUSTED) << Describe(d8);

  // (Closing our channel first: an idle C++ channel is polled only every
  // few seconds, and the server's graceful GOAWAY waits for its answer.)
  stub.reset();
  d->Signal(SIGTERM);
  absl::StatusOr<int> code = d->WaitForExit();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

TEST(StartupTest, BadConfigExitsTwoListingEveryErrorWithItsFieldPath) {
  const std::string file = kTestdata + "/bad_several.textproto";
  std::string err;
  EXPECT_EQ(ExitCodeOf({"--address=127.0.0.1:0", "--metrics_address=",
                        "--config=" + file},
                       &err),
            2);
  EXPECT_THAT(err, HasSubstr("refusing to start: bad configuration"));
  // Each of the five mistakes, on its own line: file, field path, problem.
  for (const char* path : {
           "default_policy.backoff.cap: ",
           "default_policy.backoff.max_attempts: ",
           "overrides[0].prefix: ",
           "overrides[1].policy.budget.ratio: ",
           "limits.max_batch_size: ",
       }) {
    EXPECT_THAT(err, HasSubstr(absl::StrCat("\n", file, ": ", path)))
        << "missing " << path;
  }
  // It never got as far as listening.
  EXPECT_THAT(err, Not(HasSubstr("listening on")));
}

TEST(StartupTest, UnparsableConfigExitsTwoNamingLineAndColumn) {
  const std::string file = kTestdata + "/syntax_error.textproto";
  std::string err;
  EXPECT_EQ(ExitCodeOf({"--address=127.0.0.1:0", "--metrics_address=",
                        "--config=" + file},
                       &err),
            2);
  // "bsae" is on line 4.
  EXPECT_THAT(err, HasSubstr(file + ":4:"));
  EXPECT_THAT(err, HasSubstr("bsae"));
}

TEST(StartupTest, MissingConfigFileExitsNonZeroNamingTheFile) {
  ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string file = dir / "no_such_config.textproto";
  std::string err;
  const int code = ExitCodeOf(
      {"--address=127.0.0.1:0", "--metrics_address=", "--config=" + file},
      &err);
  EXPECT_NE(code, 0);
  EXPECT_NE(code, -1);
  EXPECT_THAT(err, HasSubstr(file));
  EXPECT_THAT(err, Not(HasSubstr("listening on")));
}

TEST(StartupTest, BadTransportLimitsExitTwoNamingEachFlag) {
  std::string err;
  const int code = ExitCodeOf(
      {"--address=127.0.0.1:0", "--metrics_address=",
       "--max_concurrent_streams=0", "--max_connection_age=10ms"},
      &err);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("refusing to start: bad transport limits"));
  EXPECT_THAT(err, HasSubstr("--max_concurrent_streams: must be in [1, 1000000], got 0"));
  EXPECT_THAT(err, HasSubstr("--max_connection_age: must be in [1s, 720h], got 10ms"));
  EXPECT_THAT(err, Not(HasSubstr("listening on")));
}

TEST(StartupTest, NegativeOrHugeDrainTimesExitTwoNamingTheFlag) {
  std::string err;
  const int code = ExitCodeOf({"--address=127.0.0.1:0", "--metrics_address=",
                               "--drain_grace=-1s", "--drain_timeout=2h"},
                              &err);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err, HasSubstr("--drain_grace: must be in [0, 1h], got -1s"));
  EXPECT_THAT(err, HasSubstr("--drain_timeout: must be in [0, 1h], got 2h"));
  EXPECT_THAT(err, Not(HasSubstr("listening on")));
}

TEST(StartupTest, WaitingCallBoundsOutOfRangeExitTwoNamingTheFlag) {
  for (const char* flag : {"max_waiting_calls", "max_agent_held_calls"}) {
    for (const char* bad : {"-1", "10000001"}) {
      std::string err;
      const int code =
          ExitCodeOf({"--address=127.0.0.1:0", "--metrics_address=",
                      absl::StrCat("--", flag, "=", bad)},
                     &err);
      EXPECT_EQ(code, 2) << flag << "=" << bad;
      EXPECT_THAT(err, HasSubstr(absl::StrCat("--", flag,
                                              ": must be in [0, 10000000], "
                                              "got ",
                                              bad)));
    }
  }
}

TEST(StartupTest, BadConfigPollIntervalExitsTwoEvenWithoutAConfigFile) {
  for (const char* bad : {"0", "-1s", "2h"}) {
    std::string err;
    const int code = ExitCodeOf({"--address=127.0.0.1:0", "--metrics_address=",
                                 absl::StrCat("--config_poll_interval=", bad)},
                                &err);
    EXPECT_EQ(code, 2) << bad;
    EXPECT_THAT(err, HasSubstr("--config_poll_interval: must be in (0, 1h]"))
        << bad;
  }
}

TEST(StartupTest, TransportLimitFlagsAreAccepted) {
  auto d = StaggerdProcess::Start(
      STAGGERD_PATH,
      {"--address=127.0.0.1:0", "--metrics_address=",
       "--max_receive_message_bytes=1048576", "--max_concurrent_streams=100",
       "--min_ping_interval=30s", "--permit_pings_without_calls=false",
       "--max_ping_strikes=3", "--keepalive_time=20s",
       "--keepalive_timeout=3s", "--max_connection_age=0",
       "--max_connection_age_grace=5s", "--memory_quota_bytes=268435456"});
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<int> code = (*d)->Terminate();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

TEST(StartupTest, BusyGrpcPortExitsOneWithAClearMessage) {
  BusyPort busy;
  ASSERT_GT(busy.port(), 0);
  const std::string address = absl::StrCat("127.0.0.1:", busy.port());
  std::string err;
  EXPECT_EQ(ExitCodeOf({"--address=" + address, "--metrics_address="}, &err), 1);
  EXPECT_THAT(err, HasSubstr("cannot listen on " + address));
}

// gRPC binds with SO_REUSEPORT by default: without care a second staggerd
// on the same port would come up and silently take half of the
// connections, each holding half of the fleet's endpoint state.
TEST(StartupTest, PortHeldByAnotherStaggerdExitsOne) {
  std::unique_ptr<StaggerdProcess> first = StartServing({});
  ASSERT_NE(first, nullptr);
  const std::string address = absl::StrCat("127.0.0.1:", first->grpc_port());
  std::string err;
  EXPECT_EQ(ExitCodeOf({"--address=" + address, "--metrics_address="}, &err), 1);
  EXPECT_THAT(err, HasSubstr("cannot listen on " + address));
  // The first one is unaffected.
  auto stub = v1::RetryCoordinator::NewStub(Channel(first->target()));
  EXPECT_TRUE(Admit(*stub, "https://first.example/", 1, nullptr).ok());
  stub.reset();
  first->Signal(SIGTERM);
  absl::StatusOr<int> code = first->WaitForExit();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
}

TEST(StartupTest, BusyMetricsPortExitsOne) {
  BusyPort busy;
  ASSERT_GT(busy.port(), 0);
  const std::string address = absl::StrCat("127.0.0.1:", busy.port());
  std::string err;
  EXPECT_EQ(ExitCodeOf({"--address=127.0.0.1:0", "--metrics_address=" + address},
                       &err),
            1);
  EXPECT_THAT(err, HasSubstr("cannot serve metrics"));
  EXPECT_THAT(err, HasSubstr(address));
}

}  // namespace
}  // namespace stagger::server_test
