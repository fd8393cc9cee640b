// AgentHeldCalls (server/service/agent_held_calls.h): an agent's held calls
// in staggerd's WaitRoom, as the sync stream hands them over. Each id is
// answered once (released, expired, bad, dropped); a probe released to a
// call the agent no longer holds comes back and goes to the next waiter;
// the stream's end takes every entry out of the room. The harness's fake
// clock moves the endpoint's time; a test that moves it calls Wake, as a
// report would.
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "core/lease/planted.h"
#include "server/service/agent_held_calls.h"
#include "tests/service/service_harness.h"
#include "tests/testing/staggerd_process.h"

namespace stagger::testing {
namespace {

constexpr char kEp[] = "https://down.example/hook";

ServiceHarness::Options RoomOptions() {
  ServiceHarness::Options o;
  o.max_waiting = 1;  // workers' calls: not the agents' bound
  o.max_agent_held = 3;
  SetOneProbeBreaker(o.config);
  return o;
}

v1::HeldAdmit Held(uint64_t id, absl::Duration wait = absl::Seconds(60)) {
  return HeldAdmitTo(kEp, id, wait);
}

class AgentHeldCallsTest : public ::testing::Test {
 protected:
  AgentHeldCallsTest() : h_(RoomOptions()) {
    calls_ = service::AgentHeldCalls::Make(
        &h_.engine(), h_.room(), &h_.clock(), nullptr,
        [this](v1::HeldAnswer a, absl::string_view) {
          absl::MutexLock l(&mu_);
          sent_.push_back(std::move(a));
        });
  }
  ~AgentHeldCallsTest() override {
    calls_->Close();
    h_.room()->Shutdown();
  }

  void Trip() {
    for (int i = 0; i < 3; ++i) {
      v1::ReportRequest r;
      r.set_endpoint(kEp);
      r.set_attempt(1);
      r.set_outcome(v1::RETRYABLE_FAILURE);
      ASSERT_TRUE(h_.Report(r).ok());
    }
  }
  std::vector<v1::HeldAnswer> Sent() {
    absl::MutexLock l(&mu_);
    return sent_;
  }
  size_t SentCount() { return Sent().size(); }
  // The breaker's open period ends; the room looks at the line.
  void HalfOpen() {
    h_.clock().Advance(absl::Seconds(11));
    h_.room()->Wake(kEp);
  }

  ServiceHarness h_;
  std::shared_ptr<service::AgentHeldCalls> calls_;
  absl::Mutex mu_;
  std::vector<v1::HeldAnswer> sent_ ABSL_GUARDED_BY(mu_);
};

TEST_F(AgentHeldCallsTest, AHeldCallWaitsInTheRoomAndGetsTheProbe) {
  Trip();
  ASSERT_TRUE(calls_->Hold(Held(7)).ok());
  ASSERT_TRUE(calls_->Hold(Held(8)).ok());
  EXPECT_EQ(h_.room()->waiting(), 2);
  EXPECT_EQ(calls_->held(), 2u);
  EXPECT_EQ(SentCount(), 0u);

  HalfOpen();
  ASSERT_TRUE(PollUntil([&] { return SentCount() == 1; }));
  const v1::HeldAnswer a = Sent()[0];
  EXPECT_EQ(a.id(), 7u);  // the same deadline: first come
  EXPECT_EQ(a.code(), 0);
  EXPECT_EQ(a.response().decision().verdict(), v1::PROCEED);
  EXPECT_EQ(a.response().decision().reason(), v1::HALF_OPEN_PROBE);
  EXPECT_TRUE(a.response().decision().wait_supported());
  EXPECT_EQ(h_.room()->waiting(), 1);
}

TEST_F(AgentHeldCallsTest, AtItsWaitsEndACallIsAnsweredAsAnAdmitThen) {
  Trip();
  ASSERT_TRUE(calls_->Hold(Held(1, absl::Seconds(5))).ok());
  h_.clock().Advance(absl::Seconds(6));
  h_.room()->Wake(kEp);
  ASSERT_TRUE(PollUntil([&] { return SentCount() == 1; }));
  EXPECT_EQ(Sent()[0].response().decision().verdict(), v1::DEFER);
  EXPECT_EQ(Sent()[0].response().decision().reason(), v1::CIRCUIT_OPEN);
  EXPECT_EQ(calls_->held(), 0u);
}

TEST_F(AgentHeldCallsTest, AFirstAttemptToAClearEndpointIsAnsweredAtOnce) {
  v1::HeldAdmit first = Held(3);
  first.mutable_request()->set_attempt(1);
  ASSERT_TRUE(calls_->Hold(first).ok());
  ASSERT_EQ(SentCount(), 1u);
  EXPECT_EQ(Sent()[0].id(), 3u);
  EXPECT_EQ(Sent()[0].response().decision().verdict(), v1::PROCEED);
  EXPECT_EQ(h_.room()->waiting(), 0);
}

// As staggerd answers the same Admit: the worker sees it as its answer.
TEST_F(AgentHeldCallsTest, ABadRequestIsAnsweredWithTheFieldNamed) {
  v1::HeldAdmit bad = Held(4);
  bad.mutable_request()->clear_endpoint();
  ASSERT_TRUE(calls_->Hold(bad).ok());
  v1::HeldAdmit no_wait = Held(5);
  no_wait.mutable_request()->clear_wait();
  ASSERT_TRUE(calls_->Hold(no_wait).ok());
  const std::vector<v1::HeldAnswer> sent = Sent();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0].code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(sent[0].message().rfind("endpoint: ", 0), 0u)
      << sent[0].message();
  EXPECT_EQ(sent[1].code(), static_cast<int>(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(sent[1].message(), "wait: must be > 0 for a held call");
}

// Agents' calls have their own bound (--max_agent_held_calls): beyond it a
// call is answered as an Admit now, and counted.
TEST_F(AgentHeldCallsTest, BeyondTheAgentsBoundACallIsAnsweredAtOnce) {
  Trip();
  for (uint64_t id = 1; id <= 3; ++id) ASSERT_TRUE(calls_->Hold(Held(id)).ok());
  EXPECT_EQ(h_.room()->held_for_agents(), 3);
  EXPECT_EQ(SentCount(), 0u);
  ASSERT_TRUE(calls_->Hold(Held(4)).ok());
  ASSERT_EQ(SentCount(), 1u);
  EXPECT_EQ(Sent()[0].id(), 4u);
  EXPECT_EQ(Sent()[0].response().decision().verdict(), v1::DEFER);
  EXPECT_EQ(Sent()[0].response().decision().reason(), v1::CIRCUIT_OPEN);
  EXPECT_EQ(h_.room()->overflows(), 1);
  EXPECT_EQ(h_.room()->waiting(), 3);
  EXPECT_TRUE(h_.room()->HasRoom());  // workers' calls are bounded apart
}

TEST_F(AgentHeldCallsTest, IdZeroOrAnIdAlreadyHeldIsABadMessage) {
  Trip();
  EXPECT_EQ(calls_->Hold(Held(0)).message(), "holds.id: must not be 0");
  ASSERT_TRUE(calls_->Hold(Held(9)).ok());
  EXPECT_EQ(calls_->Hold(Held(9)).message(), "holds.id: 9 is already held");
}

TEST_F(AgentHeldCallsTest, ADroppedCallLeavesTheRoomAndIsAnsweredCancelled) {
  Trip();
  ASSERT_TRUE(calls_->Hold(Held(11)).ok());
  calls_->Drop(11);
  EXPECT_EQ(h_.room()->waiting(), 0);
  ASSERT_EQ(SentCount(), 1u);
  EXPECT_EQ(Sent()[0].id(), 11u);
  EXPECT_EQ(Sent()[0].code(), static_cast<int>(absl::StatusCode::kCancelled));
  calls_->Drop(11);  // answered already: nothing more
  EXPECT_EQ(SentCount(), 1u);
}

TEST_F(AgentHeldCallsTest, AReturnedProbeGoesToTheNextWaiter) {
  Trip();
  ASSERT_TRUE(calls_->Hold(Held(1)).ok());
  ASSERT_TRUE(calls_->Hold(Held(2)).ok());
  HalfOpen();
  ASSERT_TRUE(PollUntil([&] { return SentCount() == 1; }));
  const v1::Decision probe = Sent()[0].response().decision();
  ASSERT_EQ(probe.reason(), v1::HALF_OPEN_PROBE);
  // The agent's worker for id 1 had gone: the probe comes back, and the
  // next call gets one at once, not after the probe's timeout.
  calls_->Return(kEp, probe.admission());
  ASSERT_TRUE(PollUntil([&] { return SentCount() == 2; }));
  EXPECT_EQ(Sent()[1].id(), 2u);
  EXPECT_EQ(Sent()[1].response().decision().reason(), v1::HALF_OPEN_PROBE);
}

// The stream ended before it wrote an answer (sync_service.cc): the
// answer's probe goes back at once, to the next waiter.
TEST_F(AgentHeldCallsTest, AnAnswerTheStreamNeverWroteGivesItsProbeBack) {
  Trip();
  ASSERT_TRUE(calls_->Hold(Held(1)).ok());
  ASSERT_TRUE(calls_->Hold(Held(2)).ok());
  HalfOpen();
  ASSERT_TRUE(PollUntil([&] { return SentCount() == 1; }));
  calls_->Unsent(Sent()[0], kEp);
  ASSERT_TRUE(PollUntil([&] { return SentCount() == 2; }));
  EXPECT_EQ(Sent()[1].id(), 2u);
  EXPECT_EQ(Sent()[1].response().decision().reason(), v1::HALF_OPEN_PROBE);
}

// Planted drop_answers_at_stream_end (issue 27, item 1): the unsent
// answer's probe keeps its slot.
TEST_F(AgentHeldCallsTest, PlantedAnUnsentAnswerKeepsItsProbe) {
  Trip();
  ASSERT_TRUE(calls_->Hold(Held(1)).ok());
  HalfOpen();
  ASSERT_TRUE(PollUntil([&] { return SentCount() == 1; }));
  lease::Planted().drop_answers_at_stream_end = true;
  calls_->Unsent(Sent()[0], kEp);
  lease::Planted() = {};
  absl::StatusOr<engine::EndpointSnapshot> s = h_.engine().Inspect(kEp);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->probes_in_flight, 1);
  calls_->Unsent(Sent()[0], kEp);  // unplanted: the slot is free
  s = h_.engine().Inspect(kEp);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->probes_in_flight, 0);
}

TEST_F(AgentHeldCallsTest, TheStreamsEndTakesEveryEntryOutAndSendsNothing) {
  Trip();
  ASSERT_TRUE(calls_->Hold(Held(1)).ok());
  ASSERT_TRUE(calls_->Hold(Held(2)).ok());
  calls_->Close();
  EXPECT_EQ(h_.room()->waiting(), 0);
  EXPECT_EQ(calls_->held(), 0u);
  EXPECT_EQ(SentCount(), 0u);
  // A later hold is not taken, and the probe of the next half-open period
  // is not spent on a closed stream.
  ASSERT_TRUE(calls_->Hold(Held(3)).ok());
  EXPECT_EQ(h_.room()->waiting(), 0);
  EXPECT_EQ(SentCount(), 0u);
}

// One agent may not take every slot: each agent (its bound id) holds at
// most a tenth of --max_agent_held_calls (WaitRoom::AgentShare). At its
// share, its next call is answered at once as an Admit (counted); other
// agents still hold theirs, and a slot it frees is its own again.
TEST(AgentShareTest, EachAgentHoldsAtMostItsShare) {
  ServiceHarness::Options o = RoomOptions();
  o.max_agent_held = 20;  // share: 2 per agent
  ServiceHarness h(o);
  ASSERT_EQ(h.room()->AgentShare(), 2u);
  for (int i = 0; i < 3; ++i) {
    v1::ReportRequest r;
    r.set_endpoint(kEp);
    r.set_attempt(1);
    r.set_outcome(v1::RETRYABLE_FAILURE);
    ASSERT_TRUE(h.Report(r).ok());
  }
  absl::Mutex mu;
  std::vector<uint64_t> answered;
  const auto make = [&](const std::string& agent) {
    return service::AgentHeldCalls::Make(
        &h.engine(), h.room(), &h.clock(), nullptr,
        [&](v1::HeldAnswer a, absl::string_view) {
          absl::MutexLock l(&mu);
          answered.push_back(a.id());
        },
        agent);
  };
  auto a = make("spiffe://t/agent|node-1");
  auto b = make("spiffe://t/agent|node-2");
  ASSERT_TRUE(a->Hold(Held(1)).ok());
  ASSERT_TRUE(a->Hold(Held(2)).ok());
  EXPECT_EQ(h.room()->held_for(a->agent()), 2);
  EXPECT_EQ(h.room()->overflows(), 0);
  ASSERT_TRUE(a->Hold(Held(3)).ok());  // beyond its share
  {
    absl::MutexLock l(&mu);
    EXPECT_EQ(answered, std::vector<uint64_t>{3});
  }
  EXPECT_EQ(h.room()->overflows(), 1);
  ASSERT_TRUE(b->Hold(Held(1)).ok());
  ASSERT_TRUE(b->Hold(Held(2)).ok());
  EXPECT_EQ(h.room()->held_for(b->agent()), 2);
  EXPECT_EQ(h.room()->held_for_agents(), 4);
  a->Drop(1);
  EXPECT_EQ(h.room()->held_for(a->agent()), 1);
  ASSERT_TRUE(a->Hold(Held(4)).ok());
  EXPECT_EQ(h.room()->held_for(a->agent()), 2);
  EXPECT_EQ(h.room()->overflows(), 1);
  a->Close();
  b->Close();
  EXPECT_EQ(h.room()->held_for(a->agent()), 0);
  h.room()->Shutdown();
}

}  // namespace
}  // namespace stagger::testing
