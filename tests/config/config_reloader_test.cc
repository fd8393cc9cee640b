// Tests of server/config/config_reloader: a good new file is applied to the
// engine with endpoint state kept; a bad one is refused with its field path
// and the old config kept; in-place rewrites, renames over the path and
// Kubernetes' ConfigMap symlink swap are all noticed; ReloadNow (SIGHUP)
// reloads on demand. Files live in a fresh temporary directory per test.
//
// Most tests drive the reloader with PollOnce() (what the thread does each
// poll_interval), so they are deterministic; the thread itself is exercised
// with a 10ms interval and waits on the on_result callback with a generous
// 10s deadline (no sleeps).
#include "server/config/config_reloader.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/config/config_loader.h"
#include "core/engine/decision.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/files.h"
#include "tests/testing/kubelet_volume.h"

namespace stagger::config {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kV1[] = "default_policy { backoff { max_attempts: 5 } }\n";
constexpr char kV2[] = R"pb(
  default_policy { backoff { max_attempts: 7 } }
  overrides {
    prefix: "https://slow.example/"
    policy { backoff { cap { seconds: 120 } } }
  }
)pb";
// Same length as kV1, different bytes.
constexpr char kV3[] = "default_policy { backoff { max_attempts: 9 } }\n";
constexpr char kBad[] =
    "default_policy { backoff { base { seconds: 2 } cap { seconds: 1 } } }\n";
constexpr char kEndpoint[] = "https://hooks.example/a";
constexpr char kConfigName[] = "config.textproto";

// One on_result call.
struct Result {
  bool ok;
  absl::Status status;
};

class ConfigReloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.ok());
    path_ = dir_ / kConfigName;
  }
  void TearDown() override {
    reloader_.reset();  // stops the thread before the files go
    engine_.reset();
  }

  // An engine running `path`'s config, and a reloader watching `path`.
  void StartWith(const std::string& path,
                 absl::Duration poll_interval = absl::Seconds(1)) {
    absl::StatusOr<engine::EngineConfig> config = LoadConfigFile(path);
    ASSERT_TRUE(config.ok()) << config.status();
    engine_ = std::make_unique<engine::Engine>(*config, &clock_, &random_);
    ConfigReloader::Options options;
    options.poll_interval = poll_interval;
    options.on_result = [this](bool ok, const absl::Status& status) {
      absl::MutexLock l(&mu_);
      results_.push_back({ok, status});
    };
    reloader_ = std::make_unique<ConfigReloader>(path, engine_.get(),
                                                 std::move(options));
  }

  std::vector<Result> Results() {
    absl::MutexLock l(&mu_);
    return results_;
  }

  // Waits (up to 10s) until on_result has been called `n` times in all.
  bool WaitForResults(size_t n) {
    absl::MutexLock l(&mu_);
    auto enough = [this, n]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
      return results_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
  }

  int MaxAttempts() {
    return engine_->config().default_policy.backoff.max_attempts;
  }

  // One failed attempt on kEndpoint: the endpoint now has state.
  void FailOnce() {
    engine::ReportInput in;
    in.endpoint = kEndpoint;
    in.attempt = 1;
    in.outcome = engine::Outcome::kRetryableFailure;
    ASSERT_TRUE(engine_->Report(in).ok());
  }

  int ConsecutiveFailures() {
    absl::StatusOr<engine::EndpointSnapshot> s = engine_->Inspect(kEndpoint);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->consecutive_failures : -1;
  }

  testing::ScratchDir dir_;
  std::string path_;
  testing::FakeClock clock_;
  engine::SeededRandom random_{42};
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<ConfigReloader> reloader_;
  absl::Mutex mu_;
  std::vector<Result> results_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ConfigReloaderTest, GoodFileIsAppliedAndEndpointStateKept) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_);
  // max_attempts=5; one failure recorded on the endpoint.
  ASSERT_EQ(MaxAttempts(), 5);
  FailOnce();
  ASSERT_EQ(ConsecutiveFailures(), 1);
  const absl::Duration delay_before =
      engine_->Inspect(kEndpoint)->previous_delay;

  // Nothing changed yet: a poll does nothing.
  EXPECT_FALSE(reloader_->PollOnce());
  EXPECT_TRUE(Results().empty());

  // The file is rewritten in place with v2: max_attempts=7 plus an override.
  ASSERT_TRUE(testing::WriteFile(path_, kV2));
  EXPECT_TRUE(reloader_->PollOnce());
  EXPECT_EQ(MaxAttempts(), 7);
  ASSERT_EQ(engine_->config().overrides.size(), 1u);
  EXPECT_EQ(engine_->config().overrides[0].Name(),
            "prefix:https://slow.example/");
  // The endpoint's state survived the reload.
  EXPECT_EQ(ConsecutiveFailures(), 1);
  EXPECT_EQ(engine_->Inspect(kEndpoint)->previous_delay, delay_before);
  ASSERT_EQ(Results().size(), 1u);
  EXPECT_TRUE(Results()[0].ok);
  EXPECT_TRUE(Results()[0].status.ok());
  EXPECT_EQ(reloader_->reloads_succeeded(), 1);
  EXPECT_EQ(reloader_->reloads_failed(), 0);
}

// Same size, same inode, written right after the first: a stat-only check
// can miss it when both writes share a timestamp tick; the byte comparison
// does not.
TEST_F(ConfigReloaderTest, SameSizeRewriteIsNoticed) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_);
  ASSERT_EQ(sizeof(kV1), sizeof(kV3));
  ASSERT_TRUE(testing::WriteFile(path_, kV3));
  EXPECT_TRUE(reloader_->PollOnce());
  EXPECT_EQ(MaxAttempts(), 9);
}

TEST_F(ConfigReloaderTest, RewriteWithTheSameBytesDoesNotReload) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_);
  // A touch, then a rename of identical bytes over the file.
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  EXPECT_FALSE(reloader_->PollOnce());
  ASSERT_TRUE(testing::ReplaceFile(path_, kV1));
  EXPECT_FALSE(reloader_->PollOnce());
  EXPECT_TRUE(Results().empty());
  EXPECT_EQ(reloader_->reloads_succeeded(), 0);
}

TEST_F(ConfigReloaderTest, BadFileIsRefusedAndTheOldConfigKept) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_);
  FailOnce();

  // cap < base: refused.
  ASSERT_TRUE(testing::WriteFile(path_, kBad));
  EXPECT_TRUE(reloader_->PollOnce());
  EXPECT_EQ(MaxAttempts(), 5);  // still v1
  EXPECT_EQ(ConsecutiveFailures(), 1);
  ASSERT_EQ(Results().size(), 1u);
  EXPECT_FALSE(Results()[0].ok);
  EXPECT_EQ(Results()[0].status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Results()[0].status.message(),
            path_ +
                ": default_policy.backoff.cap: must be >= base (2s), got "
                "1s");
  EXPECT_EQ(reloader_->reloads_failed(), 1);

  // The same bad bytes are not reported again at every poll.
  EXPECT_FALSE(reloader_->PollOnce());
  EXPECT_EQ(Results().size(), 1u);

  // A fixed file is then applied.
  ASSERT_TRUE(testing::WriteFile(path_, kV2));
  EXPECT_TRUE(reloader_->PollOnce());
  EXPECT_EQ(MaxAttempts(), 7);
  ASSERT_EQ(Results().size(), 2u);
  EXPECT_TRUE(Results()[1].ok);
}

TEST_F(ConfigReloaderTest, UnparsableFileIsRefusedWithLineAndColumn) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_);
  // Line 2 misspells backoff; the text parser points at the token after
  // the name (the '{', column 10).
  ASSERT_TRUE(testing::WriteFile(path_, "default_policy {\n  backof { }\n}\n"));
  EXPECT_TRUE(reloader_->PollOnce());
  EXPECT_EQ(MaxAttempts(), 5);
  ASSERT_EQ(Results().size(), 1u);
  EXPECT_THAT(std::string(Results()[0].status.message()),
              StartsWith(path_ + ":2:10: "));
}

TEST_F(ConfigReloaderTest, RenameOverThePathIsNoticed) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_);
  ASSERT_TRUE(testing::ReplaceFile(path_, kV2));
  EXPECT_TRUE(reloader_->PollOnce());
  EXPECT_EQ(MaxAttempts(), 7);
}

TEST_F(ConfigReloaderTest, MissingFileIsReportedOnceAndOldConfigKept) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_);
  fs::remove(path_);
  EXPECT_TRUE(reloader_->PollOnce());
  ASSERT_EQ(Results().size(), 1u);
  EXPECT_FALSE(Results()[0].ok);
  EXPECT_EQ(Results()[0].status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(Results()[0].status.message()),
              StartsWith(path_ + ": "));
  EXPECT_EQ(MaxAttempts(), 5);
  // Still missing: not reported again.
  EXPECT_FALSE(reloader_->PollOnce());
  EXPECT_EQ(Results().size(), 1u);
  // Back, with new content: applied.
  ASSERT_TRUE(testing::WriteFile(path_, kV2));
  EXPECT_TRUE(reloader_->PollOnce());
  EXPECT_EQ(MaxAttempts(), 7);
}

TEST_F(ConfigReloaderTest, KubernetesSymlinkSwapIsNoticedByThePoller) {
  // A ConfigMap volume mounted at dir_, updated the kubelet's way.
  testing::KubeletVolume k8s(dir_.path());
  ASSERT_TRUE(k8s.Update({{kConfigName, kV1}}));
  StartWith(k8s.path(kConfigName), /*poll_interval=*/absl::Milliseconds(10));
  FailOnce();
  ASSERT_TRUE(reloader_->Start().ok());

  // kubelet swaps ..data to a new directory holding v2.
  ASSERT_TRUE(k8s.Update({{kConfigName, kV2}}));
  ASSERT_TRUE(WaitForResults(1)) << "no reload within 10s";
  EXPECT_TRUE(Results()[0].ok) << Results()[0].status;
  EXPECT_EQ(MaxAttempts(), 7);
  EXPECT_EQ(ConsecutiveFailures(), 1);

  // And again, to a bad version: refused, v2 kept.
  ASSERT_TRUE(k8s.Update({{kConfigName, kBad}}));
  ASSERT_TRUE(WaitForResults(2)) << "no reload within 10s";
  EXPECT_FALSE(Results()[1].ok);
  EXPECT_THAT(std::string(Results()[1].status.message()),
              HasSubstr("default_policy.backoff.cap: must be >= base"));
  EXPECT_EQ(MaxAttempts(), 7);
  reloader_->Stop();
}

TEST_F(ConfigReloaderTest, PollerNoticesAnInPlaceRewrite) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_, /*poll_interval=*/absl::Milliseconds(10));
  ASSERT_TRUE(reloader_->Start().ok());
  ASSERT_TRUE(testing::WriteFile(path_, kV2));
  ASSERT_TRUE(WaitForResults(1)) << "no reload within 10s";
  EXPECT_TRUE(Results()[0].ok) << Results()[0].status;
  EXPECT_EQ(MaxAttempts(), 7);
  reloader_->Stop();
  reloader_->Stop();  // idempotent
}

TEST_F(ConfigReloaderTest, ReloadNowReloadsEvenUnchangedBytes) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_);
  // SIGHUP with an unchanged file: reloaded anyway.
  EXPECT_TRUE(reloader_->ReloadNow().ok());
  ASSERT_EQ(Results().size(), 1u);
  EXPECT_TRUE(Results()[0].ok);
  EXPECT_EQ(MaxAttempts(), 5);
  // SIGHUP after an edit: the edit is applied at once, and the next poll
  // has nothing left to do.
  ASSERT_TRUE(testing::WriteFile(path_, kV2));
  EXPECT_TRUE(reloader_->ReloadNow().ok());
  EXPECT_EQ(MaxAttempts(), 7);
  EXPECT_FALSE(reloader_->PollOnce());
  EXPECT_EQ(reloader_->reloads_succeeded(), 2);
}

TEST_F(ConfigReloaderTest, ReloadNowReturnsTheErrorOfABadFile) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  StartWith(path_);
  ASSERT_TRUE(testing::WriteFile(path_, kBad));
  const absl::Status s = reloader_->ReloadNow();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              StartsWith(path_ + ": default_policy.backoff.cap: "));
  EXPECT_EQ(MaxAttempts(), 5);
  ASSERT_EQ(Results().size(), 1u);
  EXPECT_FALSE(Results()[0].ok);
  EXPECT_EQ(Results()[0].status, s);
}

// Several threads calling ReloadNow while the poller runs: every call is a
// complete reload (they are serialized), none is lost.
TEST_F(ConfigReloaderTest, ReloadNowIsThreadSafe) {
  ASSERT_TRUE(testing::WriteFile(path_, kV2));
  StartWith(path_, /*poll_interval=*/absl::Milliseconds(1));
  ASSERT_TRUE(reloader_->Start().ok());
  constexpr int kThreads = 4;
  constexpr int kCalls = 10;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([this] {
      for (int i = 0; i < kCalls; ++i) EXPECT_TRUE(reloader_->ReloadNow().ok());
    });
  }
  for (std::thread& t : threads) t.join();
  reloader_->Stop();
  // The file never changed, so the poller added nothing.
  EXPECT_EQ(reloader_->reloads_succeeded(), kThreads * kCalls);
  EXPECT_EQ(Results().size(), static_cast<size_t>(kThreads * kCalls));
  EXPECT_EQ(MaxAttempts(), 7);
}

// With applied_content, a change made between the caller's load and the
// reloader's construction is caught by the first poll.
TEST_F(ConfigReloaderTest, AppliedContentClosesTheStartupWindow) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  absl::StatusOr<std::string> bytes = ReadConfigFile(path_);
  ASSERT_TRUE(bytes.ok());
  absl::StatusOr<engine::EngineConfig> config = LoadConfigText(*bytes, path_);
  ASSERT_TRUE(config.ok());
  engine_ = std::make_unique<engine::Engine>(*config, &clock_, &random_);
  // The file changes before the reloader exists.
  ASSERT_TRUE(testing::WriteFile(path_, kV2));
  ConfigReloader::Options options;
  options.applied_content = *bytes;
  reloader_ = std::make_unique<ConfigReloader>(path_, engine_.get(),
                                               std::move(options));
  EXPECT_TRUE(reloader_->PollOnce());
  EXPECT_EQ(MaxAttempts(), 7);
}

TEST_F(ConfigReloaderTest, StartChecksItsPreconditions) {
  ASSERT_TRUE(testing::WriteFile(path_, kV1));
  absl::StatusOr<engine::EngineConfig> config = LoadConfigFile(path_);
  ASSERT_TRUE(config.ok());
  engine_ = std::make_unique<engine::Engine>(*config, &clock_, &random_);

  ConfigReloader::Options zero;
  zero.poll_interval = absl::ZeroDuration();
  ConfigReloader bad(path_, engine_.get(), std::move(zero));
  EXPECT_EQ(bad.Start().code(), absl::StatusCode::kInvalidArgument);

  ConfigReloader::Options options;
  options.poll_interval = absl::Milliseconds(10);
  ConfigReloader good(path_, engine_.get(), std::move(options));
  EXPECT_TRUE(good.Start().ok());
  EXPECT_EQ(good.Start().code(), absl::StatusCode::kFailedPrecondition);
  good.Stop();
  // Restartable after Stop; the destructor stops it again.
  EXPECT_TRUE(good.Start().ok());
}

}  // namespace
}  // namespace stagger::config
