// The replica's not-clear set, narrated on a fake clock: entries come in at
// once with a version, leave only after a hold, changes within not clear
// are not pushed, and deltas and snapshots say the same thing.
#include "core/lease/not_clear_set.h"

#include <algorithm>
#include <memory>

#include "gtest/gtest.h"
#include "tests/testing/fake_clock.h"

namespace stagger::lease {
namespace {

using ::stagger::testing::FakeClock;

const EntryKey kA{"https://a.example/in", Scope::kEndpoint};
const EntryKey kB{"https://b.example/in", Scope::kEndpoint};
const EntryKey kShop{"https://shop.", Scope::kPrefix};

class NotClearSetTest : public ::testing::Test {
 protected:
  NotClearSet set_{/*incarnation=*/7, /*hold=*/absl::Seconds(5),
                   /*stand_in_idle=*/absl::Seconds(30)};
  FakeClock clock_;
};

TEST_F(NotClearSetTest, AKeyEntersAtOnceWithANewVersion) {
  EXPECT_EQ(set_.version(), 1u) << "the empty set";
  const uint64_t v = set_.Enter(kA, Why::kNearTrip, absl::InfinitePast(),
                                clock_.Now());
  EXPECT_EQ(v, 2u);
  ASSERT_NE(set_.Find(kA), nullptr);
  EXPECT_EQ(set_.Find(kA)->entry.why, Why::kNearTrip);
  std::optional<SetDelta> d = set_.TakeDelta();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->incarnation, 7u);
  EXPECT_EQ(d->from_version, 1u);
  EXPECT_EQ(d->to_version, 2u);
  ASSERT_EQ(d->added.size(), 1u);
  EXPECT_EQ(d->added[0].key, kA);
  EXPECT_FALSE(set_.TakeDelta().has_value()) << "nothing new";
}

TEST_F(NotClearSetTest, ChangesWithinNotClearAreNotPushed) {
  const uint64_t v =
      set_.Enter(kA, Why::kNearTrip, absl::InfinitePast(), clock_.Now());
  set_.TakeDelta();
  // The breaker trips: same entry, same version, nothing to push.
  EXPECT_EQ(set_.Enter(kA, Why::kBreaker, absl::InfinitePast(), clock_.Now()),
            v);
  set_.Exit(kA, Why::kNearTrip, clock_.Now());
  EXPECT_FALSE(set_.TakeDelta().has_value());
  EXPECT_EQ(set_.Find(kA)->entry.why, Why::kNearTrip) << "its first why";
}

TEST_F(NotClearSetTest, AKeyLeavesOnlyAfterStayingClearForTheHold) {
  set_.Enter(kA, Why::kBreaker, absl::InfinitePast(), clock_.Now());
  set_.TakeDelta();
  set_.Exit(kA, Why::kBreaker, clock_.Now());  // t=0: clear again
  clock_.Advance(absl::Seconds(4));
  set_.Sweep(clock_.Now());
  EXPECT_NE(set_.Find(kA), nullptr) << "4 s of 5";
  // t=4 s: it fails again, then recovers at t=6 s: the hold starts over.
  set_.Enter(kA, Why::kNearTrip, absl::InfinitePast(), clock_.Now());
  clock_.Advance(absl::Seconds(2));
  set_.Exit(kA, Why::kNearTrip, clock_.Now());
  EXPECT_FALSE(set_.TakeDelta().has_value()) << "it never left";
  clock_.Advance(absl::Seconds(4));
  set_.Sweep(clock_.Now());
  EXPECT_NE(set_.Find(kA), nullptr);
  clock_.Advance(absl::Seconds(1));
  set_.Sweep(clock_.Now());
  EXPECT_EQ(set_.Find(kA), nullptr) << "5 s clear";
  std::optional<SetDelta> d = set_.TakeDelta();
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(d->removed.size(), 1u);
  EXPECT_EQ(d->removed[0], kA);
}

TEST_F(NotClearSetTest, APauseEndsAtItsUntilThenHolds) {
  set_.Enter(kShop, Why::kPaused, clock_.Now() + absl::Minutes(1),
             clock_.Now());
  clock_.Advance(absl::Minutes(1));
  set_.Sweep(clock_.Now());
  EXPECT_NE(set_.Find(kShop), nullptr) << "clear from now, held 5 s";
  clock_.Advance(absl::Seconds(5));
  set_.Sweep(clock_.Now());
  EXPECT_EQ(set_.Find(kShop), nullptr);
}

TEST_F(NotClearSetTest, APausedKeyThatTripsStaysUntilBothEnd) {
  set_.Enter(kA, Why::kPaused, clock_.Now() + absl::Seconds(10),
             clock_.Now());
  set_.Enter(kA, Why::kBreaker, absl::InfinitePast(), clock_.Now());
  clock_.Advance(absl::Seconds(20));
  set_.Sweep(clock_.Now());  // the pause ended; the breaker has not
  EXPECT_NE(set_.Find(kA), nullptr);
  set_.Exit(kA, Why::kBreaker, clock_.Now());
  clock_.Advance(absl::Seconds(5));
  set_.Sweep(clock_.Now());
  EXPECT_EQ(set_.Find(kA), nullptr);
}

TEST_F(NotClearSetTest, AForgottenKeyLeavesAtOnce) {
  set_.Enter(kA, Why::kRetryAfter, clock_.Now() + absl::Seconds(3),
             clock_.Now());
  set_.TakeDelta();
  const uint64_t before = set_.version();
  set_.Forget(kA);
  EXPECT_EQ(set_.version(), before + 1);
  std::optional<SetDelta> d = set_.TakeDelta();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->removed.size(), 1u);
}

TEST_F(NotClearSetTest, AStandInEndsWhenUnusedForItsIdleTime) {
  const EntryKey member{"stagger-1", Scope::kMember};
  set_.Enter(member, Why::kStandingIn, absl::InfinitePast(), clock_.Now());
  const absl::Time since = set_.Find(member)->stand_in_since;
  clock_.Advance(absl::Seconds(20));
  set_.Enter(member, Why::kStandingIn, absl::InfinitePast(), clock_.Now());
  EXPECT_EQ(set_.Find(member)->stand_in_since, since) << "first use kept";
  clock_.Advance(absl::Seconds(30));
  set_.Sweep(clock_.Now());  // idle 30 s: standing in no more, hold 5 s
  EXPECT_NE(set_.Find(member), nullptr);
  clock_.Advance(absl::Seconds(5));
  set_.Sweep(clock_.Now());
  EXPECT_EQ(set_.Find(member), nullptr);
}

TEST_F(NotClearSetTest, ASnapshotThenTheNextDeltaGiveTheSameSetAsAllDeltas) {
  set_.Enter(kA, Why::kNearTrip, absl::InfinitePast(), clock_.Now());
  set_.TakeDelta();  // pushed at version 2
  set_.Enter(kB, Why::kBreaker, absl::InfinitePast(), clock_.Now());
  // A stream opens now: its snapshot is at version 3, ahead of the pushes.
  const SetSnapshot snap = set_.Snapshot();
  EXPECT_EQ(snap.version, 3u);
  EXPECT_EQ(snap.entries.size(), 2u);
  set_.Forget(kA);
  std::optional<SetDelta> d = set_.TakeDelta();
  ASSERT_TRUE(d.has_value());
  // The delta starts before the snapshot's version and restates B: applied
  // to the snapshot it gives the set at version 4.
  EXPECT_EQ(d->from_version, 2u);
  EXPECT_EQ(d->to_version, 4u);
  EXPECT_EQ(d->added.size(), 1u);
  EXPECT_EQ(d->removed.size(), 1u);
}

TEST_F(NotClearSetTest, AConfigurationIsAVersionOfItsOwn) {
  auto config = std::make_shared<const engine::EngineConfig>();
  set_.SetConfig(config);
  std::optional<SetDelta> d = set_.TakeDelta();
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->config, config);
  EXPECT_EQ(d->to_version, 2u);
  EXPECT_EQ(set_.Snapshot().config, config);
}

}  // namespace
}  // namespace stagger::lease
