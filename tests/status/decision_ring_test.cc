// core/status/decision_ring: counts per second by verdict, the last 600
// seconds, on a fake clock; old seconds read as 0 once their slot is
// reused; concurrent records are all counted.
#include "core/status/decision_ring.h"

#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::status {
namespace {

using engine::Verdict;
using ::stagger::testing::FakeClock;

constexpr int kLast = DecisionRing::kSeconds - 1;

TEST(DecisionRingTest, CountsTheCurrentSecondByVerdict) {
  FakeClock clock;
  DecisionRing ring(&clock);
  ring.Record(Verdict::kProceed);
  ring.Record(Verdict::kProceed);
  ring.Record(Verdict::kDefer);
  ring.Record(Verdict::kDone);
  const DecisionRing::Window w = ring.Read();
  EXPECT_EQ(w.last_second, absl::ToUnixSeconds(clock.Now()));
  EXPECT_EQ(w.counts[0][kLast], 2);
  EXPECT_EQ(w.counts[1][kLast], 1);
  EXPECT_EQ(w.counts[2][kLast], 0);
  EXPECT_EQ(w.counts[3][kLast], 1);
  EXPECT_EQ(w.counts[0][kLast - 1], 0);
}

TEST(DecisionRingTest, SecondsMoveLeftAsTimePasses) {
  FakeClock clock;
  DecisionRing ring(&clock);
  ring.Record(Verdict::kGiveUp);
  clock.Advance(absl::Seconds(1));
  ring.Record(Verdict::kGiveUp);
  ring.Record(Verdict::kGiveUp);
  clock.Advance(absl::Seconds(10));
  const DecisionRing::Window w = ring.Read();
  EXPECT_EQ(w.counts[2][kLast - 11], 1);
  EXPECT_EQ(w.counts[2][kLast - 10], 2);
  EXPECT_EQ(w.counts[2][kLast], 0);
}

TEST(DecisionRingTest, ASecondOlderThanTheWindowReadsZeroAndItsSlotRestarts) {
  FakeClock clock;
  DecisionRing ring(&clock);
  for (int i = 0; i < 5; ++i) ring.Record(Verdict::kProceed);
  clock.Advance(absl::Seconds(DecisionRing::kSeconds - 1));
  EXPECT_EQ(ring.Read().counts[0][0], 5);  // the oldest second still shown
  clock.Advance(absl::Seconds(1));         // same slot, a new second
  DecisionRing::Window w = ring.Read();
  for (int i = 0; i < DecisionRing::kSeconds; ++i) ASSERT_EQ(w.counts[0][i], 0);
  ring.Record(Verdict::kProceed);
  EXPECT_EQ(ring.Read().counts[0][kLast], 1);  // restarted, not 6
}

TEST(DecisionRingTest, VerdictsOutOfRangeAreNotCounted) {
  FakeClock clock;
  DecisionRing ring(&clock);
  ring.Record(static_cast<Verdict>(0));
  ring.Record(static_cast<Verdict>(5));
  const DecisionRing::Window w = ring.Read();
  for (const auto& verdict : w.counts) EXPECT_EQ(verdict[kLast], 0);
}

TEST(DecisionRingTest, ConcurrentRecordsAreAllCounted) {
  FakeClock clock;
  DecisionRing ring(&clock);
  constexpr int kThreads = 4, kEach = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&ring] {
      for (int i = 0; i < kEach; ++i) ring.Record(Verdict::kDefer);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ring.Read().counts[1][kLast], kThreads * kEach);
}

TEST(DecisionRingTest, IsSmallAndFixed) {
  EXPECT_LE(sizeof(DecisionRing), 19200u + 64u);
}

}  // namespace
}  // namespace stagger::status
