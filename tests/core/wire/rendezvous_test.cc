// core/wire/rendezvous: the owner of every key, as client and server
// compute it.
#include "core/wire/rendezvous.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace stagger::wire {
namespace {

std::vector<std::string> Names(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(absl::StrCat("stagger-", i));
  return out;
}

std::string Key(int k) { return absl::StrCat("https://tenant-", k, ".example/"); }

TEST(StableHash, IsPinned) {
  // Every client and server build must agree: these values are the
  // contract (changing the hash moves keys between replicas).
  // (FNV-1a 64, then splitmix64's finalizer; computed independently.)
  EXPECT_EQ(StableHash(""), 0xc3817c016ba4ff30ULL);
  EXPECT_EQ(StableHash("stagger-0"), 0x5e631a97c9afcf2eULL);
  EXPECT_NE(StableHash("stagger-0"), StableHash("stagger-1"));
}

TEST(Rendezvous, RefusesEmptyAndRepeatedNames) {
  EXPECT_EQ(Rendezvous::Create({}).status().message(),
            "replicas: at least one is needed");
  EXPECT_EQ(Rendezvous::Create({"a", ""}).status().message(),
            "replicas[1]: the name is empty");
  EXPECT_EQ(Rendezvous::Create({"a", "b", "a"}).status().message(),
            "replicas[2]: the name \"a\" is given twice");
}

TEST(Rendezvous, TheOwnerIsFirstInTheRankAndOrderOfNamesDoesNotMatter) {
  const Rendezvous r = *Rendezvous::Create(Names(3));
  const Rendezvous reversed =
      *Rendezvous::Create({"stagger-2", "stagger-1", "stagger-0"});
  for (int k = 0; k < 1000; ++k) {
    const std::vector<size_t> rank = r.Rank(Key(k));
    ASSERT_EQ(rank.size(), 3u);
    EXPECT_EQ(rank[0], r.Owner(Key(k)));
    EXPECT_EQ(r.names()[r.Owner(Key(k))],
              reversed.names()[reversed.Owner(Key(k))]);
  }
}

TEST(Rendezvous, TenThousandKeysSpreadWithinTenPercent) {
  for (int n : {2, 3, 5, 8}) {
    const Rendezvous r = *Rendezvous::Create(Names(n));
    std::map<size_t, int> count;
    for (int k = 0; k < 10000; ++k) ++count[r.Owner(Key(k))];
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
      EXPECT_NEAR(count[i], 10000.0 / n, 1000.0 / n)
          << n << " replicas, " << r.names()[i];
    }
  }
}

TEST(Rendezvous, LosingAReplicaMovesOnlyItsKeysEachToItsNextChoice) {
  const Rendezvous all = *Rendezvous::Create(Names(4));
  const Rendezvous without_2 =
      *Rendezvous::Create({"stagger-0", "stagger-1", "stagger-3"});
  for (int k = 0; k < 5000; ++k) {
    const std::vector<size_t> rank = all.Rank(Key(k));
    const std::string& before = all.names()[rank[0]];
    const std::string& after = without_2.names()[without_2.Owner(Key(k))];
    if (before != "stagger-2") {
      EXPECT_EQ(after, before) << Key(k) << " moved";
    } else {
      EXPECT_EQ(after, all.names()[rank[1]]) << Key(k);
    }
    // Skipping it (as the client does while it is down) is the same thing.
    EXPECT_EQ(all.names()[all.FirstUsable(
                  Key(k), [&](size_t i) { return all.names()[i] != "stagger-2"; })],
              after);
  }
  EXPECT_EQ(all.FirstUsable(Key(1), [](size_t) { return false; }), all.size());
}

}  // namespace
}  // namespace stagger::wire
