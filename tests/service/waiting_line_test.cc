// WaitingLine (server/service/waiting_line.h): one endpoint's waiting calls
// in three orders. Gated calls line up by deadline; backoff calls wait
// apart, by arrival, until evidence after their arrival moves them into
// the line; every call expires in expiry order; removal works from either
// set. Plain code: calls are ints, times are offsets from one instant.
#include "server/service/waiting_line.h"

#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace stagger::service {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);
absl::Time At(int seconds) { return kT0 + absl::Seconds(seconds); }

// Calls are pointers; these stand for them.
int calls[8];
int* C(int i) { return &calls[i]; }

using Line = WaitingLine<int*>;

Line::Position Gated(int deadline, int since, int expiry = 100) {
  return {At(deadline), At(since), At(expiry), /*backoff=*/false};
}
Line::Position Backoff(int since, int deadline = 50, int expiry = 100) {
  return {At(deadline), At(since), At(expiry), /*backoff=*/true};
}

std::vector<int*> GatedLine(const Line& line) {
  std::vector<int*> out;
  for (int* c = line.FirstGated(); c != nullptr; c = line.GatedAfter(c)) {
    out.push_back(c);
  }
  return out;
}

TEST(WaitingLineTest, GatedCallsLineUpByDeadlineThenArrival) {
  Line line;
  line.Add(C(0), Gated(30, 1));
  line.Add(C(1), Gated(10, 2));
  line.Add(C(2), Gated(30, 3));  // same deadline as C(0), came later
  EXPECT_EQ(GatedLine(line), (std::vector<int*>{C(1), C(0), C(2)}));
  EXPECT_EQ(line.gated(), 3u);
  EXPECT_EQ(line.in_backoff(), 0u);
}

TEST(WaitingLineTest, BackoffCallsStayOutOfTheLineUntilEvidenceAfterThem) {
  Line line;
  line.Add(C(0), Gated(40, 1));
  line.Add(C(1), Backoff(/*since=*/2, /*deadline=*/10));
  line.Add(C(2), Backoff(/*since=*/5, /*deadline=*/20));
  line.Add(C(3), Backoff(/*since=*/8, /*deadline=*/5));
  EXPECT_EQ(GatedLine(line), (std::vector<int*>{C(0)}));
  EXPECT_EQ(line.in_backoff(), 3u);

  // Evidence older than every arrival moves nothing.
  EXPECT_EQ(line.TakeEvidence(At(2)), 0u);
  EXPECT_EQ(line.TakeEvidence(absl::InfinitePast()), 0u);
  // Evidence at 6 came after C(1) and C(2) arrived, not C(3).
  EXPECT_EQ(line.TakeEvidence(At(6)), 2u);
  EXPECT_EQ(GatedLine(line), (std::vector<int*>{C(1), C(2), C(0)}));
  EXPECT_EQ(line.in_backoff(), 1u);
  // Later evidence moves the last one, by its deadline: the head.
  EXPECT_EQ(line.TakeEvidence(At(9)), 1u);
  EXPECT_EQ(GatedLine(line), (std::vector<int*>{C(3), C(1), C(2), C(0)}));
  EXPECT_EQ(line.in_backoff(), 0u);
}

TEST(WaitingLineTest, ACallMovedBackWaitsForNewEvidence) {
  Line line;
  line.Add(C(0), Backoff(/*since=*/3));
  EXPECT_EQ(line.TakeEvidence(At(4)), 1u);
  line.MoveToBackoff(C(0));  // the evidence went away
  EXPECT_EQ(line.FirstGated(), nullptr);
  EXPECT_EQ(line.GatedAfter(C(0)), nullptr);  // not in the gated line
  EXPECT_EQ(line.in_backoff(), 1u);
  EXPECT_EQ(line.TakeEvidence(At(4)), 1u);
  EXPECT_EQ(line.FirstGated(), C(0));
  line.MoveToBackoff(C(5));  // not in the line: nothing
  EXPECT_EQ(line.size(), 1u);
}

TEST(WaitingLineTest, EveryCallExpiresInOrderWhereverItWaits) {
  Line line;
  line.Add(C(0), Gated(10, 1, /*expiry=*/30));
  line.Add(C(1), Backoff(2, 10, /*expiry=*/20));
  line.Add(C(2), Gated(10, 3, /*expiry=*/25));
  EXPECT_EQ(line.next_expiry(), At(20));
  std::vector<int*> order;
  while (!line.empty()) {
    int* c = line.FirstToExpire();
    order.push_back(c);
    EXPECT_TRUE(line.Remove(c));
  }
  EXPECT_EQ(order, (std::vector<int*>{C(1), C(2), C(0)}));
  EXPECT_EQ(line.next_expiry(), absl::InfiniteFuture());
  EXPECT_EQ(line.FirstToExpire(), nullptr);
}

TEST(WaitingLineTest, RemoveTakesACallFromEitherSetOnce) {
  Line line;
  line.Add(C(0), Gated(10, 1));
  line.Add(C(1), Backoff(2));
  line.Add(C(2), Gated(20, 3));
  EXPECT_TRUE(line.Remove(C(1)));
  EXPECT_FALSE(line.Remove(C(1)));
  EXPECT_EQ(line.in_backoff(), 0u);
  EXPECT_EQ(line.TakeEvidence(At(99)), 0u);
  // A walk that removes the call it stands on goes on from the next one.
  int* next = line.GatedAfter(C(0));
  EXPECT_TRUE(line.Remove(C(0)));
  EXPECT_EQ(next, C(2));
  EXPECT_EQ(GatedLine(line), (std::vector<int*>{C(2)}));
  EXPECT_EQ(line.size(), 1u);
}

}  // namespace
}  // namespace stagger::service
