// LeaseBook, narrated on a fake clock: what an agent answers itself under a
// lease (first attempts, successes), when it asks the coordinator instead,
// how it asks for and renews leases, obeys revokes, and keeps its counts
// until the replica has applied them.
#include "core/lease/lease_book.h"

#include <random>

#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::lease {
namespace {

using engine::AdmitInput;
using engine::Decision;
using engine::Outcome;
using engine::ReportInput;
using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://hooks.example/a";

class LeaseBookTest : public ::testing::Test {
 protected:
  std::optional<Decision> Admit(int attempt = 1) {
    AdmitInput in;
    in.endpoint = kEp;
    in.attempt = attempt;
    return book_.Admit(in, clock_.Now(), gen_);
  }
  std::optional<Decision> Succeeded(uint64_t admission = engine::kLocalAdmission) {
    ReportInput in;
    in.endpoint = kEp;
    in.attempt = 1;
    in.outcome = Outcome::kSuccess;
    in.admission = admission;
    return book_.Report(in, clock_.Now());
  }
  void Grant(uint64_t epoch, uint32_t allowance = 100,
             absl::Duration ttl = absl::Seconds(10)) {
    book_.OnGrant({kEp, epoch, ttl, allowance, absl::Milliseconds(200)},
                  clock_.Now());
  }

  FakeClock clock_;
  std::mt19937_64 gen_{3};
  LeaseBook book_;
};

TEST_F(LeaseBookTest, WithoutALeaseEverythingGoesToTheCoordinatorAndALeaseIsAsked) {
  EXPECT_FALSE(Admit().has_value());
  EXPECT_FALSE(Succeeded().has_value());
  LeaseBook::Outgoing out = book_.TakeOutgoing(clock_.Now(), true);
  EXPECT_EQ(out.asks, std::vector<std::string>{kEp});
  EXPECT_FALSE(out.counts.has_value());
  // Asked once per interval, however many first attempts come.
  Admit();
  EXPECT_TRUE(book_.TakeOutgoing(clock_.Now(), true).asks.empty());
  clock_.Advance(LeaseBook::kAskInterval);
  Admit();
  EXPECT_EQ(book_.TakeOutgoing(clock_.Now(), true).asks.size(), 1u);
}

TEST_F(LeaseBookTest, UnderALeaseFirstAttemptsAndSuccessesAreAnsweredHere) {
  Grant(7);
  std::optional<Decision> d = Admit();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->verdict, engine::Verdict::kProceed);
  EXPECT_EQ(d->reason, engine::Reason::kInitialJitter);
  EXPECT_LT(d->delay, absl::Milliseconds(200));
  EXPECT_EQ(d->admission, engine::kLocalAdmission);
  std::optional<Decision> done = Succeeded();
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->verdict, engine::Verdict::kDone);
  // Retries, failures and probes' successes are the coordinator's.
  EXPECT_FALSE(Admit(2).has_value());
  ReportInput failure;
  failure.endpoint = kEp;
  failure.outcome = Outcome::kRetryableFailure;
  EXPECT_FALSE(book_.Report(failure, clock_.Now()).has_value());
  EXPECT_FALSE(Succeeded(engine::kProbeAdmissionBit | 5).has_value());
}

TEST_F(LeaseBookTest, CountsGoUpInBucketsByWhenTheyHappened) {
  Grant(7);
  Admit();
  Succeeded();
  clock_.Advance(absl::Milliseconds(250));
  Admit();
  LeaseBook::Outgoing out = book_.TakeOutgoing(clock_.Now(), true);
  ASSERT_TRUE(out.counts.has_value());
  EXPECT_EQ(out.counts->seq, 1u);
  ASSERT_EQ(out.counts->endpoints.size(), 1u);
  const auto& b = out.counts->endpoints[0].buckets;
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].first_attempts, 1u);
  EXPECT_EQ(b[0].successes, 1u);
  EXPECT_EQ(b[1].first_attempts, 1u);
  EXPECT_EQ(b[1].at - b[0].at, absl::Milliseconds(200));
  // Nothing new: nothing numbered.
  EXPECT_FALSE(book_.TakeOutgoing(clock_.Now(), true).counts.has_value());
}

TEST_F(LeaseBookTest, CountsStayUntilAppliedAndAreResentInOrder) {
  Grant(7);
  Admit();
  book_.TakeOutgoing(clock_.Now(), true);  // seq 1
  Succeeded();
  std::optional<CountReport> mine = book_.TakeCountsFor(kEp);  // seq 2
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(mine->seq, 2u);
  EXPECT_FALSE(book_.TakeCountsFor(kEp).has_value()) << "nothing pending";
  std::vector<CountReport> unacked = book_.Unacked();
  ASSERT_EQ(unacked.size(), 2u);
  EXPECT_EQ(unacked[0].seq, 1u);
  book_.OnApplied(1);
  ASSERT_EQ(book_.Unacked().size(), 1u);
  EXPECT_EQ(book_.Unacked()[0].seq, 2u);
  book_.OnApplied(2);
  EXPECT_TRUE(book_.Unacked().empty());
}

TEST_F(LeaseBookTest, AllowanceAndTtlBoundTheLease) {
  Grant(7, /*allowance=*/2, absl::Seconds(4));
  EXPECT_TRUE(Admit().has_value());
  EXPECT_TRUE(Admit().has_value());
  EXPECT_FALSE(Admit().has_value()) << "allowance spent";
  EXPECT_TRUE(Succeeded().has_value()) << "successes are not rationed";
  Grant(7, 2, absl::Seconds(4));  // renewed
  EXPECT_TRUE(Admit().has_value());
  clock_.Advance(absl::Seconds(4));
  EXPECT_FALSE(Admit().has_value()) << "expired";
  EXPECT_EQ(book_.LeasesHeld(clock_.Now()), 0);
}

TEST_F(LeaseBookTest, AHalfUsedLeaseIsRenewed) {
  Grant(7, 100, absl::Seconds(10));
  Admit();
  EXPECT_TRUE(book_.TakeOutgoing(clock_.Now(), false).asks.empty());
  clock_.Advance(absl::Seconds(5));
  Admit();
  EXPECT_EQ(book_.TakeOutgoing(clock_.Now(), false).asks.size(), 1u);
}

TEST_F(LeaseBookTest, ARevokeEndsOlderLeasesAndIsAcknowledged) {
  Grant(7);
  book_.OnRevoke({kEp, 9});
  EXPECT_FALSE(Admit().has_value());
  EXPECT_FALSE(Succeeded().has_value());
  LeaseBook::Outgoing out = book_.TakeOutgoing(clock_.Now(), false);
  ASSERT_EQ(out.acks.size(), 1u);
  EXPECT_EQ(out.acks[0].epoch, 9u);
  // A stale grant (older epoch) does not come back; a newer one does.
  Grant(8);
  Grant(5);
  EXPECT_TRUE(Admit().has_value()) << "epoch 8 stands";
  book_.OnRevoke({kEp, 6});
  EXPECT_TRUE(Admit().has_value()) << "a revoke of older epochs only";
}

TEST_F(LeaseBookTest, PastItsDeadlineAFirstAttemptIsTheCoordinatorsToRefuse) {
  Grant(7);
  AdmitInput in;
  in.endpoint = kEp;
  in.deadline = clock_.Now() - absl::Seconds(1);
  EXPECT_FALSE(book_.Admit(in, clock_.Now(), gen_).has_value());
}

}  // namespace
}  // namespace stagger::lease
