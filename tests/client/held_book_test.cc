// HeldBook (client/internal/held_book.h): the held calls of one lease
// stream, on a clock the test moves by hand. Each call ends exactly once:
// answered, given up at min(now + wait + grace, answer_by), dropped, or
// ended with the stream. An answer that comes after its call ended, and
// that let a delivery go, goes back up.
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/internal/held_book.h"
#include "core/lease/planted.h"
#include "gtest/gtest.h"

namespace stagger::client {
namespace {

constexpr char kEp[] = "https://down.example/hook";
const absl::Time kStart = absl::FromUnixSeconds(1767225600);

v1::AdmitRequest Request() {
  v1::AdmitRequest r;
  r.set_endpoint(kEp);
  r.set_attempt(2);
  r.mutable_wait()->set_seconds(5);
  return r;
}

v1::HeldAnswer Probe(uint64_t id) {
  v1::HeldAnswer a;
  a.set_id(id);
  a.mutable_response()->mutable_decision()->set_verdict(v1::PROCEED);
  a.mutable_response()->mutable_decision()->set_admission(77);
  return a;
}

class HeldBookTest : public ::testing::Test {
 protected:
  ~HeldBookTest() override { lease::Planted() = {}; }
  // A call of 5 s, answered by `answer_by` at the latest; its results.
  uint64_t Hold(absl::Time answer_by = absl::InfiniteFuture()) {
    return book_.Hold(Request(), absl::Seconds(5), kStart, answer_by,
                      [this](absl::StatusOr<v1::AdmitResponse> r) {
                        results_.push_back(std::move(r));
                      });
  }
  void RunFinished() {
    for (HeldBook::Finished& f : book_.TakeFinished()) {
      f.done(std::move(f.result));
    }
  }
  v1::SyncUp Up() {
    v1::SyncUp up;
    book_.FillUp(&up);
    return up;
  }

  HeldBook book_;
  std::vector<absl::StatusOr<v1::AdmitResponse>> results_;
};

TEST_F(HeldBookTest, AHeldCallGoesUpOnceAndItsAnswerEndsIt) {
  const uint64_t id = Hold();
  v1::SyncUp up = Up();
  ASSERT_EQ(up.holds_size(), 1);
  EXPECT_EQ(up.holds(0).id(), id);
  EXPECT_EQ(up.holds(0).request().endpoint(), kEp);
  EXPECT_FALSE(book_.HasOutgoing());

  book_.Answer(Probe(id));
  book_.Answer(Probe(id));  // a second answer finds nothing
  RunFinished();
  ASSERT_EQ(results_.size(), 1u);
  ASSERT_TRUE(results_[0].ok());
  EXPECT_EQ(results_[0]->decision().admission(), 77u);
  EXPECT_EQ(book_.size(), 0u);
  EXPECT_FALSE(book_.HasOutgoing());  // nothing goes back
}

TEST_F(HeldBookTest, AtItsGiveUpTimeACallEndsAndALateProbeGoesBack) {
  const uint64_t id = Hold();
  Up();  // sent
  const absl::Time give_up = kStart + absl::Seconds(5) + HeldBook::kHeldGrace;
  EXPECT_EQ(book_.NextGiveUp(), give_up);
  book_.GiveUp(give_up - absl::Nanoseconds(1));
  EXPECT_FALSE(book_.HasFinished());

  book_.GiveUp(give_up);
  RunFinished();
  ASSERT_EQ(results_.size(), 1u);
  EXPECT_EQ(results_[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  v1::SyncUp drop = Up();  // the replica is told to drop it
  ASSERT_EQ(drop.drops_size(), 1);
  EXPECT_EQ(drop.drops(0), id);

  // Its probe arrives after all: it goes back, for the next waiter.
  book_.Answer(Probe(id));
  v1::SyncUp back = Up();
  ASSERT_EQ(back.returns_size(), 1);
  EXPECT_EQ(back.returns(0).endpoint(), kEp);
  EXPECT_EQ(back.returns(0).admission(), 77u);
  EXPECT_EQ(results_.size(), 1u);
}

TEST_F(HeldBookTest, TheWorkersDeadlineBoundsTheGiveUp) {
  Hold(kStart + absl::Seconds(2));
  EXPECT_EQ(book_.NextGiveUp(), kStart + absl::Seconds(2));
}

TEST_F(HeldBookTest, ACallDroppedBeforeItWentUpIsNeverSent) {
  const uint64_t id = Hold();
  book_.Drop(id);
  RunFinished();
  ASSERT_EQ(results_.size(), 1u);
  EXPECT_EQ(results_[0].status().code(), absl::StatusCode::kCancelled);
  v1::SyncUp up;
  EXPECT_FALSE(book_.FillUp(&up));
}

TEST_F(HeldBookTest, AStreamsEndEndsEveryCallOnce) {
  const uint64_t a = Hold();
  Hold();
  Up();
  book_.EndAll(absl::UnavailableError("broke"));
  book_.Answer(Probe(a));  // too late: nothing, nothing goes back
  RunFinished();
  ASSERT_EQ(results_.size(), 2u);
  for (const auto& r : results_) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_FALSE(book_.HasOutgoing());
  EXPECT_EQ(book_.NextGiveUp(), absl::InfiniteFuture());
}

TEST_F(HeldBookTest, AReplicaThatLeftTheMembersHandsItsCallsOn) {
  Hold();
  book_.EndAllLeft();
  RunFinished();
  ASSERT_EQ(results_.size(), 1u);
  // UNAVAILABLE: the caller re-routes it to the key's new owner.
  EXPECT_EQ(results_[0].status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(NextStep(results_[0]), HeldNext::kResend);
}

TEST_F(HeldBookTest, EachEndTellsTheCallerItsNextStep) {
  EXPECT_EQ(NextStep(v1::AdmitResponse()), HeldNext::kFollow);
  EXPECT_EQ(NextStep(absl::DeadlineExceededError("gave up")),
            HeldNext::kFallback);
  EXPECT_EQ(NextStep(absl::UnavailableError("stream ended")),
            HeldNext::kResend);
  // A cancelled call is given back to its worker, never sent on.
  EXPECT_EQ(NextStep(absl::CancelledError("dropped")), HeldNext::kFail);
  EXPECT_EQ(NextStep(absl::InvalidArgumentError("endpoint")), HeldNext::kFail);
}

TEST_F(HeldBookTest, PlantedAReplicaThatLeftCancelsItsCalls) {
  lease::Planted().cancel_on_membership_change = true;
  Hold();
  book_.EndAllLeft();
  RunFinished();
  ASSERT_EQ(results_.size(), 1u);
  EXPECT_EQ(results_[0].status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(NextStep(results_[0]), HeldNext::kFail) << "not re-routed";
}

}  // namespace
}  // namespace stagger::client
