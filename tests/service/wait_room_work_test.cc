// The work a look at a waiting line costs (server/service/wait_room.h):
// counted in engine calls (WaitRoom::engine_calls), never in time. A wake
// must not walk the whole line: backoff waiters wait apart until evidence
// after their arrival moves them in (waiting_line.h), and a gated line
// stops at its head. The calls are an agent's held calls
// (agent_held_calls.h), which need no gRPC call each; the harness's fake
// clock stands still unless a test moves it.
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/engine/lease_terms.h"
#include "gtest/gtest.h"
#include "server/service/agent_held_calls.h"
#include "tests/service/service_harness.h"

namespace stagger::testing {
namespace {

constexpr char kEp[] = "https://line.example/hook";
constexpr int kLine = 400;
// A look asks the engine for the evidence once, and rechecks the head.
constexpr int64_t kLookBound = 2;

ServiceHarness::Options RoomOptions() {
  ServiceHarness::Options o;
  o.max_waiting = 1;
  o.max_agent_held = 100 * kLine;  // the per-agent share is a tenth
  SetOneProbeBreaker(o.config);
  return o;
}

// Polls (real time, 5 ms steps) until `done`; false after 30 s.
bool Eventually(const std::function<bool()>& done) {
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

class WaitRoomWorkTest : public ::testing::Test {
 protected:
  WaitRoomWorkTest() : h_(RoomOptions()) {
    calls_ = service::AgentHeldCalls::Make(
        &h_.engine(), h_.room(), &h_.clock(), nullptr,
        [this](v1::HeldAnswer a, absl::string_view) {
          absl::MutexLock l(&mu_);
          sent_.push_back(std::move(a));
        });
  }
  ~WaitRoomWorkTest() override {
    calls_->Close();
    h_.room()->Shutdown();
  }

  service::WaitRoom& room() { return *h_.room(); }
  size_t Sent() {
    absl::MutexLock l(&mu_);
    return sent_.size();
  }
  // `n` waiting retries (attempt 2), held in the room.
  void HoldRetries(int n) {
    for (int i = 0; i < n; ++i) {
      v1::HeldAdmit held;
      held.set_id(++next_id_);
      held.mutable_request()->set_endpoint(kEp);
      held.mutable_request()->set_attempt(2);
      held.mutable_request()->mutable_wait()->set_seconds(60);
      ASSERT_TRUE(calls_->Hold(held).ok());
    }
    ASSERT_EQ(room().waiting(), n);
    ASSERT_EQ(Sent(), 0u) << "every call held, none answered";
  }
  void ReportOutcome(v1::Outcome outcome) {
    v1::ReportRequest r;
    r.set_endpoint(kEp);
    r.set_attempt(1);
    r.set_outcome(outcome);
    v1::ReportResponse resp;
    ASSERT_TRUE(h_.Report(r, &resp).ok());
  }
  // Wakes the line and waits for the look; the engine calls it made.
  int64_t OneLook() {
    const int64_t looks = room().looks();
    const int64_t calls = room().engine_calls();
    room().Wake(kEp);
    EXPECT_TRUE(Eventually([&] { return room().looks() > looks; }));
    return room().engine_calls() - calls;
  }

  ServiceHarness h_;
  std::shared_ptr<service::AgentHeldCalls> calls_;
  uint64_t next_id_ = 0;
  absl::Mutex mu_;
  std::vector<v1::HeldAnswer> sent_ ABSL_GUARDED_BY(mu_);
};

// Retries asked during their backoff on a healthy endpoint: each waits for
// evidence of recovery after it arrived. Wakes without such evidence (a
// failure report, counts, an operator) cost a look one question, however
// long the line; counts of successes and a plain success are no evidence
// either; when the backoffs run out every one goes, at one engine call
// each.
TEST_F(WaitRoomWorkTest, WakesDoNotWalkALineOfBackoffWaiters) {
  HoldRetries(kLine);
  for (int i = 0; i < 5; ++i) {
    EXPECT_LE(OneLook(), kLookBound) << "look " << i;
  }
  h_.clock().Advance(absl::Seconds(1));
  ReportOutcome(v1::RETRYABLE_FAILURE);  // wakes the line: no evidence
  EXPECT_LE(OneLook(), kLookBound);
  EXPECT_EQ(Sent(), 0u);
  // An agent's counts of successes, even after every arrival, are not
  // evidence of recovery: made up, they would release the line.
  h_.clock().Advance(absl::Seconds(1));
  const absl::Time now = h_.clock().Now();
  ASSERT_TRUE(h_.engine().ApplyLateCounts(
      kEp, {engine::LateCounts{now, 0, 100000, now}}));
  EXPECT_LE(OneLook(), kLookBound);
  EXPECT_EQ(Sent(), 0u) << "counts released backoff waiters";

  // A success on an endpoint that never went down is no recovery either
  // (docs/API.md, "Learned release pace"): the retries wait out their
  // waits (each worker's backoff), then every one is answered, at one
  // engine call each.
  h_.clock().Advance(absl::Seconds(1));
  ReportOutcome(v1::SUCCESS);
  EXPECT_LE(OneLook(), kLookBound);
  EXPECT_EQ(Sent(), 0u) << "a plain success released backoff waiters";
  const int64_t before = room().engine_calls();
  h_.clock().Advance(absl::Seconds(60));  // past every call's 60 s wait
  room().Wake(kEp);
  ASSERT_TRUE(Eventually([&] { return Sent() == static_cast<size_t>(kLine); }))
      << Sent() << " of " << kLine << " answered";
  EXPECT_EQ(room().waiting(), 0);
  EXPECT_LE(room().engine_calls() - before, kLine + kLookBound)
      << "one engine call per call released";
}

// The breaker is open: the gates hold the whole line, and a look stops at
// its head.
TEST_F(WaitRoomWorkTest, AGatedLineCostsALookItsHeadOnly) {
  for (int i = 0; i < 3; ++i) ReportOutcome(v1::RETRYABLE_FAILURE);
  HoldRetries(kLine);
  for (int i = 0; i < 5; ++i) {
    EXPECT_LE(OneLook(), kLookBound) << "look " << i;
  }
  EXPECT_EQ(Sent(), 0u);
}

}  // namespace
}  // namespace stagger::testing
