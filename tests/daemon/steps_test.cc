// The start-up steps' contracts that need no port: where the start-up
// config comes from and what its errors name, the state file's interval
// check, and the config watch's start (nothing to watch without a file; a
// bad poll interval named by its flag).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/config/config_loader.h"
#include "server/daemon/config_watch.h"
#include "server/daemon/startup_config.h"
#include "server/daemon/state_file.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "tests/testing/fake_clock.h"
#include "tests/testing/files.h"

namespace stagger::daemon {
namespace {

using ::testing::HasSubstr;

TEST(LoadStartupConfig, WithoutAPathRunsOnTheEmbeddedDefaults) {
  absl::StatusOr<StartupConfig> startup = LoadStartupConfig("");
  ASSERT_TRUE(startup.ok()) << startup.status();
  EXPECT_EQ(startup->path, "");
  EXPECT_FALSE(startup->bytes.has_value());
  EXPECT_EQ(startup->config.limits.idle_eviction,
            config::DefaultEngineConfig().limits.idle_eviction);
}

TEST(LoadStartupConfig, KeepsTheBytesItLoaded) {
  const std::string text = "limits { idle_eviction { seconds: 120 } }\n";
  testing::ScratchDir dir;
  const std::string path = dir / "startup.textproto";
  ASSERT_TRUE(dir.ok() && testing::WriteFile(path, text));
  absl::StatusOr<StartupConfig> startup = LoadStartupConfig(path);
  ASSERT_TRUE(startup.ok()) << startup.status();
  EXPECT_EQ(startup->path, path);
  EXPECT_EQ(startup->bytes, text);
  EXPECT_EQ(startup->config.limits.idle_eviction, absl::Seconds(120));
}

TEST(LoadStartupConfig, AnInvalidFileIsRefusedNamingTheFileAndField) {
  testing::ScratchDir dir;
  const std::string path = dir / "bad.textproto";
  ASSERT_TRUE(dir.ok() && testing::WriteFile(
                              path, "limits { idle_eviction { seconds: 0 } }\n"));
  absl::StatusOr<StartupConfig> startup = LoadStartupConfig(path);
  ASSERT_FALSE(startup.ok());
  EXPECT_THAT(startup.status().message(), HasSubstr(path));
  EXPECT_THAT(startup.status().message(), HasSubstr("limits.idle_eviction"));
}

TEST(LoadStartupConfig, AMissingFileIsRefusedNamingIt) {
  testing::ScratchDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir / "no-such-config.textproto";
  absl::StatusOr<StartupConfig> startup = LoadStartupConfig(path);
  ASSERT_FALSE(startup.ok());
  EXPECT_THAT(startup.status().message(), HasSubstr(path));
}

TEST(CheckStateFile, TheSaveIntervalIsAtLeastOneSecondNamingTheFlag) {
  EXPECT_TRUE(CheckStateFile({"", absl::Seconds(1)}).ok());
  EXPECT_TRUE(CheckStateFile({"/x/state.snap", absl::Seconds(30)}).ok());
  absl::Status s = CheckStateFile({"", absl::Milliseconds(999)});
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(s.message(), "--state_save_interval must be >= 1s, got 999ms");
}

TEST(StartStateKeeper, WithoutAPathThereIsNoKeeper) {
  testing::FakeClock clock;
  engine::SeededRandom random(1);
  engine::Engine engine(engine::EngineConfig(), &clock, &random);
  EXPECT_EQ(StartStateKeeper({"", absl::Seconds(30)}, &engine, nullptr),
            nullptr);
}

TEST(StartConfigWatch, WithoutAFileThereIsNothingToWatch) {
  testing::FakeClock clock;
  engine::SeededRandom random(1);
  engine::Engine engine(engine::EngineConfig(), &clock, &random);
  absl::StatusOr<StartupConfig> startup = LoadStartupConfig("");
  ASSERT_TRUE(startup.ok());
  auto reloader = StartConfigWatch(*startup, absl::Seconds(1), &engine, nullptr);
  ASSERT_TRUE(reloader.ok()) << reloader.status();
  EXPECT_EQ(*reloader, nullptr);
}

TEST(StartConfigWatch, ABadPollIntervalIsNamedByItsFlag) {
  testing::ScratchDir dir;
  const std::string path = dir / "watched.textproto";
  ASSERT_TRUE(dir.ok() && testing::WriteFile(path, ""));
  absl::StatusOr<StartupConfig> startup = LoadStartupConfig(path);
  ASSERT_TRUE(startup.ok()) << startup.status();
  testing::FakeClock clock;
  engine::SeededRandom random(1);
  engine::Engine engine(startup->config, &clock, &random);
  auto reloader =
      StartConfigWatch(*startup, absl::ZeroDuration(), &engine, nullptr);
  ASSERT_FALSE(reloader.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(reloader.status()));
  EXPECT_THAT(reloader.status().message(),
              HasSubstr("--config_poll_interval: "));
}

TEST(CheckConfigPollInterval, AcceptsUpToAnHourAndNamesTheFlag) {
  EXPECT_TRUE(CheckConfigPollInterval(absl::Milliseconds(1)).ok());
  EXPECT_TRUE(CheckConfigPollInterval(absl::Hours(1)).ok());
  for (absl::Duration bad : {absl::ZeroDuration(), absl::Seconds(-1),
                             absl::Hours(1) + absl::Seconds(1)}) {
    const absl::Status s = CheckConfigPollInterval(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--config_poll_interval: must be in"));
  }
}

}  // namespace
}  // namespace stagger::daemon
