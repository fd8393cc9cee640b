// --state_file through the real staggerd on loopback: the state a fleet
// taught the coordinator survives a restart, and a bad snapshot never stops
// it from starting.
//
//  - Drain and restart: an endpoint's open breaker (tripped for 10 min) is
//    open after the restart with the very same open_until instant (kept as
//    an absolute time, so it stays open for exactly its remaining time), and
//    Admit still defers it; another endpoint's Retry-After window (1 h) is
//    still in force: a retry is deferred RETRY_AFTER_WINDOW until the same
//    instant.
//  - A crash (SIGKILL) after a periodic save: the state of the last save is
//    back.
//  - A corrupt, a truncated and an other-version snapshot each start the
//    server fresh, logged and counted in
//    stagger_state_load_failures_total{reason}; the drain then writes a good
//    snapshot over it. A missing file (first start) is counted as "missing".
//  - State idle longer than limits.idle_eviction when loaded is dropped.
//  - An operator's pause (stagger.v1.Admin/Pause) survives a restart with
//    its reason, who set it and its end, and still holds workers.
// No fixed sleeps: every wait polls with a generous deadline.
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "stagger/v1/admin.grpc.pb.h"
#include "tests/server/rpc_helpers.h"
#include "tests/testing/blackbox_util.h"
#include "tests/testing/files.h"
#include "tests/testing/staggerd_process.h"

#ifndef STAGGERD_PATH
#error "STAGGERD_PATH must name the staggerd binary (set by CMake)"
#endif

namespace stagger::server_test {
namespace {

using stagger::testing::PollUntil;
using stagger::testing::ReadFile;
using stagger::testing::ScrapeMetric;
using stagger::testing::ScratchDir;
using stagger::testing::StaggerdProcess;
using stagger::testing::WriteFile;

constexpr char kBroken[] = "https://hooks.state.example/broken";
constexpr char kPacing[] = "https://hooks.state.example/pacing";

// Breaker: 3 consecutive failures, open 10 min (+-20%): far longer than
// the test. Retry-After honoured up to 1 h.
constexpr char kConfig[] = R"pb(
  default_policy {
    backoff { retry_after_max { seconds: 3600 } }
    breaker {
      consecutive_failures: 3
      open_base { seconds: 600 }
      open_max { seconds: 3600 }
    }
  }
)pb";

std::string Failures(const char* reason) {
  return absl::StrCat("stagger_state_load_failures_total{reason=\"", reason,
                      "\"}");
}

class StateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = dir_.path() + "/config.textproto";
    state_ = dir_.path() + "/state.snap";
    ASSERT_TRUE(WriteFile(config_, kConfig));
  }
  void TearDown() override { Stop(); }

  void Start(const std::string& config, const std::string& interval = "1h") {
    auto c = StaggerdProcess::Start(
        STAGGERD_PATH,
        {"--address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
         "--config=" + config, "--state_file=" + state_,
         "--state_save_interval=" + interval});
    ASSERT_TRUE(c.ok()) << c.status();
    d_ = *std::move(c);
    stub_ = v1::RetryCoordinator::NewStub(Channel(d_->target()));
  }
  void Start() { Start(config_); }
  // SIGTERM: drain, save, exit 0.
  void Stop() {
    if (d_ == nullptr) return;
    stub_.reset();  // an idle channel would hold up the graceful GOAWAY
    absl::StatusOr<int> code = d_->Terminate(testing::kExitTimeout);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << d_->output();
    d_.reset();
  }
  std::optional<double> Metric(const std::string& series) {
    return ScrapeMetric(d_->metrics_port(), series);
  }

  v1::EndpointState Inspect(const std::string& ep) {
    v1::EndpointState st;
    grpc::Status s = GetEndpoint(*stub_, ep, &st);
    EXPECT_TRUE(s.ok()) << ep << ": " << s.error_message();
    return st;
  }
  // Trips kBroken's breaker and has kPacing send Retry-After: 1h.
  void Teach() {
    v1::Decision d;
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(Report(*stub_, kBroken, 1, v1::RETRYABLE_FAILURE, &d).ok());
    }
    ASSERT_EQ(d.reason(), v1::CIRCUIT_OPEN) << Describe(d);
    grpc::ClientContext ctx;
    SetDeadline(ctx, kRpcDeadline);
    v1::ReportRequest req;
    req.set_endpoint(kPacing);
    req.set_attempt(1);
    req.set_outcome(v1::RATE_LIMITED);
    req.mutable_retry_after()->set_seconds(3600);
    v1::ReportResponse resp;
    ASSERT_TRUE(stub_->Report(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.decision().reason(), v1::RETRY_AFTER);
  }
  // What Teach() taught is in force, at the instants `broken` and `pacing`
  // (GetEndpoint before the restart) gave.
  void ExpectTaught(const v1::EndpointState& broken,
                    const v1::EndpointState& pacing) {
    const v1::EndpointState b = Inspect(kBroken);
    EXPECT_EQ(b.breaker_state(), v1::OPEN);
    EXPECT_EQ(b.open_until().seconds(), broken.open_until().seconds());
    EXPECT_EQ(b.open_until().nanos(), broken.open_until().nanos());
    EXPECT_EQ(b.consecutive_trips(), 1);
    v1::Decision d;
    ASSERT_TRUE(Admit(*stub_, kBroken, 2, &d).ok());
    EXPECT_EQ(d.verdict(), v1::DEFER) << Describe(d);
    EXPECT_EQ(d.reason(), v1::CIRCUIT_OPEN) << Describe(d);

    const v1::EndpointState p = Inspect(kPacing);
    EXPECT_EQ(p.retry_after_until().seconds(),
              pacing.retry_after_until().seconds());
    EXPECT_EQ(p.retry_after_until().nanos(), pacing.retry_after_until().nanos());
    ASSERT_TRUE(Admit(*stub_, kPacing, 2, &d).ok());
    EXPECT_EQ(d.verdict(), v1::DEFER) << Describe(d);
    EXPECT_EQ(d.reason(), v1::RETRY_AFTER_WINDOW) << Describe(d);
    EXPECT_GE(d.defer_until().seconds(), pacing.retry_after_until().seconds());
  }

  ScratchDir dir_;
  std::string config_;
  std::string state_;
  std::unique_ptr<StaggerdProcess> d_;
  std::unique_ptr<v1::RetryCoordinator::Stub> stub_;
};

TEST_F(StateFileTest, RestartKeepsOpenBreakerAndRetryAfterWindow) {
  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(Metric(Failures("missing")), 1) << "a first start has no file";
  ASSERT_NO_FATAL_FAILURE(Teach());
  const v1::EndpointState broken = Inspect(kBroken);
  const v1::EndpointState pacing = Inspect(kPacing);
  ASSERT_EQ(broken.breaker_state(), v1::OPEN);
  ASSERT_GT(pacing.retry_after_until().seconds(), 0);
  Stop();  // the drain saves
  struct stat st;
  ASSERT_EQ(stat(state_.c_str(), &st), 0) << "no snapshot after the drain";

  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_NE(d_->output().find("restored 2"), std::string::npos) << d_->output();
  EXPECT_EQ(Metric("stagger_state_endpoints_restored"), 2);
  for (const char* r : {"missing", "unreadable", "truncated", "corrupt",
                        "incompatible_version"}) {
    EXPECT_EQ(Metric(Failures(r)), 0) << r;
  }
  ExpectTaught(broken, pacing);
}

TEST_F(StateFileTest, CrashAfterAPeriodicSaveKeepsThatSave) {
  ASSERT_NO_FATAL_FAILURE(Start(config_, "1s"));
  ASSERT_NO_FATAL_FAILURE(Teach());
  const v1::EndpointState broken = Inspect(kBroken);
  const v1::EndpointState pacing = Inspect(kPacing);
  // A save that began after Teach() holds both endpoints.
  const absl::Time taught = absl::Now();
  ASSERT_TRUE(PollUntil([&] {
    auto at = Metric("stagger_state_last_save_timestamp_seconds");
    return at.has_value() && *at > absl::ToDoubleSeconds(taught - absl::UnixEpoch());
  })) << d_->output();
  stub_.reset();
  d_->Kill();  // no drain, no final save
  (void)d_->WaitForExit();  // killed by a signal: an error, on purpose
  d_.reset();

  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_EQ(Metric("stagger_state_endpoints_restored"), 2) << d_->output();
  ExpectTaught(broken, pacing);
}

TEST_F(StateFileTest, BadSnapshotsStartFreshAndAreCounted) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_NO_FATAL_FAILURE(Teach());
  Stop();
  const std::string good = ReadFile(state_);
  ASSERT_GT(good.size(), 32u);
  std::string other_version = good;
  other_version[8] = 7;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"corrupt", "this is not a snapshot\n"},
      {"truncated", good.substr(0, good.size() / 2)},
      {"incompatible_version", other_version},
  };
  for (const auto& [reason, bytes] : cases) {
    SCOPED_TRACE(reason);
    ASSERT_TRUE(WriteFile(state_, bytes));
    ASSERT_NO_FATAL_FAILURE(Start());  // never refuses to start
    EXPECT_EQ(Metric(Failures(reason.c_str())), 1);
    EXPECT_EQ(Metric("stagger_state_endpoints_restored"), 0);
    EXPECT_NE(d_->output().find(reason == "incompatible_version"
                                    ? "format version 7"
                                    : reason),
              std::string::npos)
        << d_->output();
    EXPECT_NE(d_->output().find("starting with fresh state"), std::string::npos);
    v1::EndpointState st;
    EXPECT_EQ(GetEndpoint(*stub_, kBroken, &st).error_code(),
              grpc::StatusCode::NOT_FOUND);
    Stop();  // the drain writes a good (empty) snapshot over the bad one
    ASSERT_NO_FATAL_FAILURE(Start());
    EXPECT_EQ(Metric(Failures(reason.c_str())), 0);
    Stop();
  }
}

TEST_F(StateFileTest, StateIdlePastTheEvictionAgeIsDropped) {
  ASSERT_NO_FATAL_FAILURE(Start());
  ASSERT_NO_FATAL_FAILURE(Teach());
  Stop();
  const std::string short_idle = dir_.path() + "/short-idle.textproto";
  ASSERT_TRUE(WriteFile(short_idle, absl::StrCat(kConfig,
                                                 "limits { idle_eviction { seconds: 1 } }\n")));
  // The endpoints were last seen before the drain; wait until that is more
  // than 1 s ago by the snapshot's own clock (this machine's).
  struct stat st;
  ASSERT_EQ(stat(state_.c_str(), &st), 0);
  const absl::Time saved = absl::FromTimeT(st.st_mtime);
  ASSERT_TRUE(PollUntil([&] { return absl::Now() > saved + absl::Seconds(2); }));
  ASSERT_NO_FATAL_FAILURE(Start(short_idle));
  EXPECT_EQ(Metric("stagger_state_endpoints_restored"), 0);
  EXPECT_NE(d_->output().find("dropped 2 idle"), std::string::npos)
      << d_->output();
  v1::EndpointState gone;
  EXPECT_EQ(GetEndpoint(*stub_, kBroken, &gone).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(StateFileTest, AnOperatorsPauseSurvivesARestart) {
  ASSERT_NO_FATAL_FAILURE(Start());
  auto admin = v1::Admin::NewStub(Channel(d_->target()));
  v1::PauseResponse paused;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, kRpcDeadline);
    v1::PauseRequest req;
    req.mutable_target()->set_prefix("https://hooks.state.example/");
    req.mutable_duration()->set_seconds(7200);
    req.set_reason("partner maintenance");
    grpc::Status s = admin->Pause(&ctx, req, &paused);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  admin.reset();
  Stop();  // the drain saves

  ASSERT_NO_FATAL_FAILURE(Start());
  EXPECT_NE(d_->output().find("1 pauses restored"), std::string::npos)
      << d_->output();
  admin = v1::Admin::NewStub(Channel(d_->target()));
  v1::ListPausesResponse listed;
  {
    grpc::ClientContext ctx;
    SetDeadline(ctx, kRpcDeadline);
    grpc::Status s = admin->ListPauses(&ctx, v1::ListPausesRequest(), &listed);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(listed.pauses_size(), 1);
  EXPECT_EQ(listed.pauses(0).SerializeAsString(),
            paused.pause().SerializeAsString());
  v1::Decision d;
  ASSERT_TRUE(Admit(*stub_, kBroken, 1, &d).ok());
  EXPECT_EQ(d.verdict(), v1::DEFER) << Describe(d);
  EXPECT_EQ(d.reason(), v1::PAUSED) << Describe(d);
}

}  // namespace
}  // namespace stagger::server_test
