// WaitRoom (server/service/wait_room.h) driven by its caller
// (Driver::kCaller), as the protocol simulator drives it: no thread, a
// fake clock, and RunDue() at NextDue(). An agent's held calls
// (AgentHeldCalls) are the room's calls here: plain code, no gRPC.
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "core/engine/engine.h"
#include "core/engine/random.h"
#include "gtest/gtest.h"
#include "server/service/agent_held_calls.h"
#include "server/service/wait_room.h"
#include "tests/service/service_harness.h"
#include "tests/testing/fake_clock.h"

namespace stagger::testing {
namespace {

constexpr char kEp[] = "https://down.example/hook";

engine::EngineConfig OneProbe() {
  engine::EngineConfig c;
  SetOneProbeBreaker(c);  // 3 failures open it for 10 s
  return c;
}

v1::HeldAdmit Held(uint64_t id, absl::Duration wait) {
  return HeldAdmitTo(kEp, id, wait);
}

class DrivenWaitRoomTest : public ::testing::Test {
 protected:
  DrivenWaitRoomTest()
      : random_(1),
        engine_(OneProbe(), &clock_, &random_),
        room_(&engine_, &clock_,
              service::WaitRoom::Options{
                  10, 10, service::WaitRoom::Driver::kCaller},
              nullptr) {
    calls_ = service::AgentHeldCalls::Make(
        &engine_, &room_, &clock_, nullptr,
        [this](v1::HeldAnswer a, absl::string_view) {
          sent_.push_back(std::move(a));
        });
  }
  ~DrivenWaitRoomTest() override { calls_->Close(); }

  void Trip() {
    for (int i = 0; i < 3; ++i) {
      engine::ReportInput r;
      r.endpoint = kEp;
      r.outcome = engine::Outcome::kRetryableFailure;
      ASSERT_TRUE(engine_.Report(r).ok());
    }
  }

  FakeClock clock_;
  engine::SeededRandom random_;
  engine::Engine engine_;
  service::WaitRoom room_;
  std::shared_ptr<service::AgentHeldCalls> calls_;
  std::vector<v1::HeldAnswer> sent_;
};

TEST_F(DrivenWaitRoomTest, NothingMovesUntilTheCallerRunsWhatIsDue) {
  Trip();
  const absl::Time start = clock_.Now();
  ASSERT_TRUE(calls_->Hold(Held(1, absl::Seconds(60))).ok());
  ASSERT_TRUE(calls_->Hold(Held(2, absl::Seconds(60))).ok());
  EXPECT_EQ(room_.waiting(), 2);
  // The next look: the engine's recheck, by the time the breaker
  // half-opens (10 s on).
  EXPECT_GT(room_.NextDue(), start);
  EXPECT_LE(room_.NextDue(), start + absl::Seconds(10));

  // Time passes, but no thread looks: the calls stay held.
  clock_.Advance(absl::Seconds(11));
  EXPECT_EQ(room_.waiting(), 2);
  EXPECT_TRUE(sent_.empty());

  // The caller runs what is due: the first call gets the probe.
  room_.RunDue();
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].id(), 1u);
  EXPECT_EQ(sent_[0].response().decision().reason(), v1::HALF_OPEN_PROBE);
  EXPECT_EQ(room_.waiting(), 1);
  // The other waits for the probe's outcome (or its timeout).
  EXPECT_GT(room_.NextDue(), clock_.Now());
}

TEST_F(DrivenWaitRoomTest, AtItsWaitsEndACallIsAnsweredWhenTheCallerLooks) {
  Trip();
  const absl::Time start = clock_.Now();
  ASSERT_TRUE(calls_->Hold(Held(7, absl::Seconds(5))).ok());
  EXPECT_EQ(room_.NextDue(), start + absl::Seconds(5));

  clock_.Advance(absl::Seconds(4));
  room_.RunDue();  // nothing due yet
  EXPECT_TRUE(sent_.empty());

  clock_.Advance(absl::Seconds(1));
  room_.RunDue();
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].id(), 7u);
  EXPECT_EQ(sent_[0].response().decision().verdict(), v1::DEFER);
  EXPECT_EQ(room_.waiting(), 0);
  EXPECT_EQ(room_.NextDue(), absl::InfiniteFuture());
}

TEST_F(DrivenWaitRoomTest, AReturnedProbeGoesToTheNextCallAtTheNextRun) {
  Trip();
  ASSERT_TRUE(calls_->Hold(Held(1, absl::Seconds(60))).ok());
  ASSERT_TRUE(calls_->Hold(Held(2, absl::Seconds(60))).ok());
  clock_.Advance(absl::Seconds(10));
  room_.RunDue();
  ASSERT_EQ(sent_.size(), 1u);
  const uint64_t probe = sent_[0].response().decision().admission();

  // The agent could not use it (its worker had gone): it comes back, and
  // the line is due at once.
  calls_->Return(kEp, probe);
  EXPECT_LE(room_.NextDue(), clock_.Now());
  room_.RunDue();
  ASSERT_EQ(sent_.size(), 2u);
  EXPECT_EQ(sent_[1].id(), 2u);
  EXPECT_EQ(sent_[1].response().decision().reason(), v1::HALF_OPEN_PROBE);
}

TEST_F(DrivenWaitRoomTest, ShutdownAnswersEveryCallWithoutAThreadToJoin) {
  Trip();
  ASSERT_TRUE(calls_->Hold(Held(1, absl::Seconds(60))).ok());
  room_.Shutdown();
  ASSERT_EQ(sent_.size(), 1u);
  EXPECT_EQ(sent_[0].response().decision().verdict(), v1::DEFER);
  EXPECT_EQ(room_.waiting(), 0);
  room_.RunDue();  // after the end: does nothing
  EXPECT_EQ(sent_.size(), 1u);
}

}  // namespace
}  // namespace stagger::testing
