// PauseTable (core/engine/pause_table.h), narrated on a fake timeline:
// exact and prefix pauses, the latest covering pause wins, expiry at
// `until`, replace, Remove, and every refusal.
#include "core/engine/pause_table.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stagger::engine {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1'800'000'000);

TEST(PauseTableTest, NothingPausedByDefault) {
  PauseTable t;
  EXPECT_EQ(t.PausedUntil("https://a.example", kT0), absl::InfinitePast());
  EXPECT_FALSE(t.Find("https://a.example", kT0).has_value());
  EXPECT_TRUE(t.List(kT0).empty());
}

TEST(PauseTableTest, ExactPauseCoversOnlyItsKeyUntilItEnds) {
  PauseTable t;
  auto p = t.Set("https://a.example/x", false, absl::Minutes(10), "maint",
                 "spiffe://t/admin", kT0);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->since, kT0);
  EXPECT_EQ(p->until, kT0 + absl::Minutes(10));
  EXPECT_EQ(t.PausedUntil("https://a.example/x", kT0 + absl::Minutes(9)),
            kT0 + absl::Minutes(10));
  EXPECT_EQ(t.PausedUntil("https://a.example/xy", kT0), absl::InfinitePast());
  EXPECT_EQ(t.PausedUntil("https://a.example", kT0), absl::InfinitePast());
  // Ends at `until`, exclusive.
  EXPECT_EQ(t.PausedUntil("https://a.example/x", kT0 + absl::Minutes(10)),
            absl::InfinitePast());
  EXPECT_TRUE(t.List(kT0 + absl::Minutes(10)).empty());
}

TEST(PauseTableTest, PrefixPauseCoversEveryKeyUnderItAndTheLatestWins) {
  PauseTable t;
  ASSERT_TRUE(t.Set("https://partner.example/", true, absl::Minutes(30),
                    "partner maintenance", "admin", kT0)
                  .ok());
  ASSERT_TRUE(t.Set("https://partner.example/orders", false, absl::Hours(2),
                    "longer", "admin", kT0)
                  .ok());
  EXPECT_EQ(t.PausedUntil("https://partner.example/refunds", kT0),
            kT0 + absl::Minutes(30));
  EXPECT_EQ(t.PausedUntil("https://partner.example/orders", kT0),
            kT0 + absl::Hours(2));
  EXPECT_EQ(t.PausedUntil("https://other.example/", kT0), absl::InfinitePast());
  auto found = t.Find("https://partner.example/refunds", kT0);
  ASSERT_TRUE(found.has_value());
  EXPECT_TRUE(found->prefix);
  EXPECT_EQ(found->target, "https://partner.example/");
  EXPECT_EQ(found->reason, "partner maintenance");
  // After the prefix pause ends the exact one still holds its key.
  EXPECT_EQ(t.PausedUntil("https://partner.example/refunds",
                          kT0 + absl::Minutes(31)),
            absl::InfinitePast());
  EXPECT_EQ(t.PausedUntil("https://partner.example/orders",
                          kT0 + absl::Minutes(31)),
            kT0 + absl::Hours(2));
  const auto list = t.List(kT0);
  ASSERT_EQ(list.size(), 2u);
  EXPECT_FALSE(list[0].prefix);  // endpoints first, then prefixes
  EXPECT_TRUE(list[1].prefix);
}

TEST(PauseTableTest, SetReplacesAndRemoveEndsNow) {
  PauseTable t;
  ASSERT_TRUE(t.Set("k", false, absl::Hours(1), "a", "x", kT0).ok());
  ASSERT_TRUE(t.Set("k", false, absl::Minutes(5), "b", "y", kT0).ok());
  ASSERT_EQ(t.List(kT0).size(), 1u);
  EXPECT_EQ(t.Find("k", kT0)->reason, "b");
  EXPECT_EQ(t.PausedUntil("k", kT0), kT0 + absl::Minutes(5));
  // The same text as a prefix is another target.
  EXPECT_EQ(t.Remove("k", true, kT0).status().code(),
            absl::StatusCode::kNotFound);
  auto removed = t.Remove("k", false, kT0 + absl::Minutes(1));
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->reason, "b");
  EXPECT_EQ(t.PausedUntil("k", kT0 + absl::Minutes(1)), absl::InfinitePast());
  // An expired pause cannot be removed: it is already over.
  ASSERT_TRUE(t.Set("k", false, absl::Minutes(1), "c", "z", kT0).ok());
  EXPECT_EQ(t.Remove("k", false, kT0 + absl::Minutes(2)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(PauseTableTest, RefusalsNameTheField) {
  PauseTable t;
  struct Case {
    std::string target;
    bool prefix;
    absl::Duration d;
    std::string reason;
    const char* error;
  };
  const Case cases[] = {
      {"", false, absl::Minutes(1), "r", "target.endpoint: must be 1..4096"},
      {"", true, absl::Minutes(1), "r", "target.prefix: must be 1..4096"},
      {std::string(4097, 'k'), false, absl::Minutes(1), "r", "got 4097"},
      {"k", false, absl::ZeroDuration(), "r", "duration: must be > 0"},
      {"k", false, absl::Hours(24 * 30) + absl::Seconds(1), "r",
       "duration: must be > 0 and <= 720h"},
      {"k", false, absl::Minutes(1), "", "reason: must be 1..256 bytes"},
      {"k", false, absl::Minutes(1), std::string(257, 'r'), "got 257"},
  };
  for (const Case& c : cases) {
    auto p = t.Set(c.target, c.prefix, c.d, c.reason, "x", kT0);
    ASSERT_FALSE(p.ok()) << c.error;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(c.error));
  }
  EXPECT_TRUE(t.List(kT0).empty());
}

TEST(PauseTableTest, RestoreKeepsTheSavedInstantsAndRefusesWhatSetRefuses) {
  PauseTable t;
  const Pause saved{"https://a.example/hook", false, kT0 - absl::Hours(1),
                    kT0 + absl::Hours(1), "maintenance", "alice"};
  ASSERT_TRUE(t.Restore(saved, kT0).ok());
  EXPECT_EQ(t.PausedUntil("https://a.example/hook", kT0), kT0 + absl::Hours(1));
  EXPECT_EQ(t.Find("https://a.example/hook", kT0)->since, kT0 - absl::Hours(1));

  Pause ended = saved;
  ended.target = "https://b.example/hook";
  ended.until = kT0;  // exclusive: over at kT0
  EXPECT_EQ(t.Restore(ended, kT0).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(t.PausedUntil("https://b.example/hook", kT0), absl::InfinitePast());

  Pause no_reason = saved;
  no_reason.reason.clear();
  EXPECT_THAT(std::string(t.Restore(no_reason, kT0).message()),
              HasSubstr("reason: must be 1..256 bytes"));
  Pause too_long = saved;
  too_long.since = kT0 - absl::Hours(24 * 31);
  EXPECT_THAT(std::string(t.Restore(too_long, kT0).message()),
              HasSubstr("duration: must be > 0 and <= 720h"));
  Pause no_since = saved;
  no_since.since = absl::InfinitePast();
  EXPECT_EQ(t.Restore(no_since, kT0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.List(kT0).size(), 1u);
}

TEST(PauseTableTest, AtMostMaxPausesExpiredOnesSweptFirst) {
  PauseTable t;
  for (int i = 0; i < PauseTable::kMaxPauses; ++i) {
    ASSERT_TRUE(t.Set("k" + std::to_string(i), false, absl::Minutes(1), "r",
                      "x", kT0)
                    .ok());
  }
  auto full = t.Set("one-more", false, absl::Minutes(1), "r", "x", kT0);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  // Replacing an existing target is still allowed when full.
  EXPECT_TRUE(t.Set("k0", false, absl::Minutes(2), "r", "x", kT0).ok());
  // Once they have expired there is room again.
  EXPECT_TRUE(
      t.Set("one-more", false, absl::Minutes(1), "r", "x", kT0 + absl::Minutes(1))
          .ok());
}

}  // namespace
}  // namespace stagger::engine
