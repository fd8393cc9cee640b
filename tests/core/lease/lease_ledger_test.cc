// LeaseLedger, narrated on a fake clock: a coordinator replica grants
// leases only on clear endpoints, not in its learning mode nor for keys it
// took over until one ttl has passed, raises epochs and names the holders
// to revoke, holds half-open probes back until holders acknowledge or run
// out, and applies each count report once.
#include "core/lease/lease_ledger.h"

#include "absl/strings/match.h"

#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::lease {
namespace {

using ::stagger::testing::FakeClock;

constexpr char kEp[] = "https://hooks.example/a";
const AgentKey kA{"node-a", 11};
const AgentKey kB{"node-b", 22};

engine::LeaseTerms Clear(double served = 0) {
  engine::LeaseTerms t;
  t.clear = true;
  t.initial_jitter = absl::Milliseconds(100);
  t.served_per_second = served;
  return t;
}

class LeaseLedgerTest : public ::testing::Test {
 protected:
  LeaseLedgerTest() : ledger_({absl::Seconds(5)}, clock_.Now()) {
    clock_.Advance(absl::Seconds(5));  // past learning mode
  }
  FakeClock clock_;
  LeaseLedger ledger_;
};

TEST(LeaseLedgerLearningTest, NoLeaseUntilOneTtlAfterStart) {
  FakeClock clock;
  LeaseLedger ledger({absl::Seconds(5)}, clock.Now());
  EXPECT_FALSE(ledger.Grant(kA, kEp, Clear(), true, clock.Now()));
  clock.Advance(absl::Seconds(5));
  EXPECT_TRUE(ledger.Grant(kA, kEp, Clear(), true, clock.Now()));
}

TEST_F(LeaseLedgerTest, GrantsOnlyClearEndpointsWithAnAllowanceFromTheServedRate) {
  engine::LeaseTerms troubled = Clear();
  troubled.clear = false;
  EXPECT_FALSE(ledger_.Grant(kA, kEp, troubled, true, clock_.Now()));
  std::optional<LeaseGrant> g = ledger_.Grant(kA, kEp, Clear(), true, clock_.Now());
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->ttl, absl::Seconds(5));
  EXPECT_EQ(g->allowance, LeaseLedger::kMinAllowance);
  EXPECT_EQ(g->initial_jitter, absl::Milliseconds(100));
  // 2,000 served per second: two seconds' worth.
  g = ledger_.Grant(kA, kEp, Clear(2000), true, clock_.Now());
  EXPECT_EQ(g->allowance, 4000u);
  EXPECT_TRUE(ledger_.HasHolders(kEp));
}

TEST_F(LeaseLedgerTest, AKeyTakenOverByFailoverWaitsOneTtl) {
  EXPECT_FALSE(ledger_.Grant(kA, kEp, Clear(), /*owned=*/false, clock_.Now()));
  clock_.Advance(absl::Seconds(4));
  EXPECT_FALSE(ledger_.Grant(kA, kEp, Clear(), false, clock_.Now()));
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(ledger_.Grant(kA, kEp, Clear(), false, clock_.Now()));
}

TEST_F(LeaseLedgerTest, RevokeRaisesTheEpochAndNamesEveryHolder) {
  const uint64_t e1 = ledger_.Grant(kA, kEp, Clear(), true, clock_.Now())->epoch;
  EXPECT_EQ(ledger_.Grant(kB, kEp, Clear(), true, clock_.Now())->epoch, e1);
  std::vector<LeaseLedger::Notice> n = ledger_.Revoke(kEp, clock_.Now());
  ASSERT_EQ(n.size(), 2u);
  EXPECT_GT(n[0].revoke.epoch, e1);
  EXPECT_EQ(n[0].revoke.epoch, n[1].revoke.epoch);
  EXPECT_TRUE(ledger_.AnyRevoking());
  // Until they acknowledge, a probe waits; B is told again on reconnect.
  EXPECT_TRUE(ledger_.ProbeBlocked(kEp, clock_.Now()));
  ledger_.Ack(kA, {kEp, n[0].revoke.epoch});
  EXPECT_TRUE(ledger_.ProbeBlocked(kEp, clock_.Now()));
  EXPECT_EQ(ledger_.PendingRevokes(kB).size(), 1u);
  ledger_.Ack(kB, {kEp, n[0].revoke.epoch});
  EXPECT_FALSE(ledger_.ProbeBlocked(kEp, clock_.Now()));
  EXPECT_FALSE(ledger_.AnyRevoking());
  // Clear again: a new lease carries the new epoch.
  EXPECT_EQ(ledger_.Grant(kA, kEp, Clear(), true, clock_.Now())->epoch,
            n[0].revoke.epoch);
}

TEST_F(LeaseLedgerTest, AnAgentThatNeverAcknowledgesHoldsAProbeBackOneTtlAtMost) {
  ledger_.Grant(kA, kEp, Clear(), true, clock_.Now());
  ledger_.Revoke(kEp, clock_.Now());
  clock_.Advance(absl::Seconds(5));
  EXPECT_TRUE(ledger_.ProbeBlocked(kEp, clock_.Now())) << "within the grace";
  clock_.Advance(LeaseLedger::kExpiryGrace);
  EXPECT_FALSE(ledger_.ProbeBlocked(kEp, clock_.Now()));
  EXPECT_EQ(ledger_.Sweep(clock_.Now()), 0u);
  EXPECT_FALSE(ledger_.AnyRevoking());
}

TEST_F(LeaseLedgerTest, RevokeIfReachesEveryMatchingEndpoint) {
  ledger_.Grant(kA, "https://p.example/1", Clear(), true, clock_.Now());
  ledger_.Grant(kA, "https://p.example/2", Clear(), true, clock_.Now());
  ledger_.Grant(kA, "https://q.example/1", Clear(), true, clock_.Now());
  auto n = ledger_.RevokeIf(
      [](absl::string_view k) { return absl::StartsWith(k, "https://p."); },
      clock_.Now());
  EXPECT_EQ(n.size(), 2u);
}

TEST_F(LeaseLedgerTest, EachCountReportIsAppliedOnce) {
  EXPECT_TRUE(ledger_.ShouldApply(kA, 1));
  EXPECT_TRUE(ledger_.ShouldApply(kA, 2));
  EXPECT_FALSE(ledger_.ShouldApply(kA, 1)) << "re-sent after a reconnect";
  EXPECT_FALSE(ledger_.ShouldApply(kA, 2));
  EXPECT_TRUE(ledger_.ShouldApply(kA, 3));
  // Another incarnation of the same agent starts afresh.
  EXPECT_TRUE(ledger_.ShouldApply({"node-a", 12}, 1));
}

TEST_F(LeaseLedgerTest, ExpiredHoldersAreForgotten) {
  ledger_.Grant(kA, kEp, Clear(), true, clock_.Now());
  EXPECT_EQ(ledger_.Sweep(clock_.Now()), 1u);
  clock_.Advance(absl::Seconds(5) + LeaseLedger::kExpiryGrace);
  EXPECT_EQ(ledger_.Sweep(clock_.Now()), 0u);
  EXPECT_FALSE(ledger_.HasHolders(kEp));
}

}  // namespace
}  // namespace stagger::lease
