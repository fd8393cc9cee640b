// The four backoff policies (core/engine/backoff.h) as pure functions, and
// UniformDuration. Fixed seeds; every statistical bound below is one that a
// broken implementation (no jitter, jitter over part of the interval,
// integer halving, a missing cap) would violate.
#include "core/engine/backoff.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "core/engine/engine_config.h"
#include "core/engine/random.h"

namespace stagger::engine {
namespace {

BackoffParams Params(BackoffKind kind, absl::Duration base,
                     absl::Duration cap) {
  BackoffParams p;
  p.kind = kind;
  p.base = base;
  p.cap = cap;
  return p;
}

// Draws `n` delays for one (kind, retry, previous) in seconds.
std::vector<double> Draw(const BackoffParams& p, int retry,
                         absl::Duration previous, int n, uint64_t seed) {
  SeededRandom random(seed);
  std::vector<double> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    out.push_back(
        absl::ToDoubleSeconds(NextBackoff(p, retry, previous, random.Get())));
  }
  return out;
}

struct Summary {
  double min, max, mean;
};
Summary Summarize(const std::vector<double>& v) {
  Summary s{v[0], v[0], 0};
  for (double x : v) {
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    s.mean += x;
  }
  s.mean /= v.size();
  return s;
}

// Counts of `v` in `kBins` equal bins over [lo, hi] (hi goes in the last).
template <int kBins>
std::array<int, kBins> Histogram(const std::vector<double>& v, double lo,
                                 double hi) {
  std::array<int, kBins> bins{};
  for (double x : v) {
    int b = static_cast<int>((x - lo) / (hi - lo) * kBins);
    bins[std::clamp(b, 0, kBins - 1)]++;
  }
  return bins;
}

// ---------------------------------------------------------------------------
// Plain exponential: exact values.

struct ExponentialCase {
  int retry;
  absl::Duration want;
};

TEST(ExponentialIntervalTest, DoublesFromBaseUntilTheCap) {
  // base 200ms, cap 30s: 0.2, 0.4, 0.8, ... 25.6, then 30 for ever.
  const BackoffParams p = Params(BackoffKind::kExponential,
                                 absl::Milliseconds(200), absl::Seconds(30));
  const ExponentialCase cases[] = {
      {1, absl::Milliseconds(200)},   {2, absl::Milliseconds(400)},
      {3, absl::Milliseconds(800)},   {4, absl::Milliseconds(1600)},
      {5, absl::Milliseconds(3200)},  {6, absl::Milliseconds(6400)},
      {7, absl::Milliseconds(12800)}, {8, absl::Milliseconds(25600)},
      {9, absl::Seconds(30)},         {10, absl::Seconds(30)},
      {64, absl::Seconds(30)},        {1000, absl::Seconds(30)},
      {1000000, absl::Seconds(30)},
  };
  SeededRandom random(1);
  for (const ExponentialCase& c : cases) {
    SCOPED_TRACE(c.retry);
    EXPECT_EQ(ExponentialInterval(p, c.retry), c.want);
    // The plain policy is the interval itself, whatever the rng.
    EXPECT_EQ(NextBackoff(p, c.retry, absl::ZeroDuration(), random.Get()),
              c.want);
  }
}

TEST(ExponentialIntervalTest, NoOverflowAtHugeRetryNumbers) {
  // 2^999 overflows every integer type; the interval must still be the cap,
  // never negative, zero or infinite.
  const BackoffParams p =
      Params(BackoffKind::kExponential, absl::Seconds(1), absl::Hours(1));
  for (int retry : {31, 32, 63, 64, 65, 1000, 1023, 1024, 1025, 5000,
                    std::numeric_limits<int>::max()}) {
    SCOPED_TRACE(retry);
    EXPECT_EQ(ExponentialInterval(p, retry), absl::Hours(1));
  }
}

TEST(ExponentialIntervalTest, RetryBelowOneIsTheBase) {
  const BackoffParams p = Params(BackoffKind::kExponential,
                                 absl::Milliseconds(200), absl::Seconds(30));
  EXPECT_EQ(ExponentialInterval(p, 0), absl::Milliseconds(200));
  EXPECT_EQ(ExponentialInterval(p, -5), absl::Milliseconds(200));
}

TEST(ExponentialIntervalTest, CapBindsFromTheFirstRetryWhenBelowBase) {
  // A cap equal to the base: every interval is the base.
  const BackoffParams p = Params(BackoffKind::kExponential, absl::Seconds(2),
                                 absl::Seconds(2));
  for (int retry = 1; retry <= 20; ++retry) {
    EXPECT_EQ(ExponentialInterval(p, retry), absl::Seconds(2));
  }
}

// ---------------------------------------------------------------------------
// Equal jitter: v/2 + uniform[0, v/2].

TEST(EqualJitterTest, NeverBelowHalfAndFillsTheUpperHalf) {
  // base 1s, retry 3: v = 4s; draws in [2s, 4s], mean ~3s.
  const BackoffParams p =
      Params(BackoffKind::kEqualJitter, absl::Seconds(1), absl::Seconds(60));
  const std::vector<double> d = Draw(p, 3, absl::ZeroDuration(), 20000, 7);
  const Summary s = Summarize(d);
  EXPECT_GE(s.min, 2.0);
  EXPECT_LT(s.min, 2.01);  // the floor is reached, not a higher one
  EXPECT_LE(s.max, 4.0);
  EXPECT_GT(s.max, 3.99);  // the top is reached: the random half is v/2 wide
  EXPECT_NEAR(s.mean, 3.0, 0.03);
  // Roughly uniform over [2, 4]: 10 bins of 2000 expected each.
  for (int count : Histogram<10>(d, 2.0, 4.0)) {
    EXPECT_GT(count, 1700);
    EXPECT_LT(count, 2300);
  }
}

TEST(EqualJitterTest, HalvesInFloatingPointNotIntegers) {
  // v = 3s: the floor is 1.5s. Integer halving of seconds would floor at 1s
  // (and draw below 1.5s); of milliseconds, the same with v = 3ms.
  for (absl::Duration v : {absl::Seconds(3), absl::Milliseconds(3),
                           absl::Nanoseconds(3001)}) {
    SCOPED_TRACE(v);
    const BackoffParams p = Params(BackoffKind::kEqualJitter, v, v);
    const std::vector<double> d = Draw(p, 1, absl::ZeroDuration(), 5000, 11);
    const Summary s = Summarize(d);
    const double vs = absl::ToDoubleSeconds(v);
    // Within a nanosecond of the exact half (Duration rounds to 1/4 ns).
    EXPECT_GE(s.min, vs / 2 - 1e-9);
    EXPECT_LT(s.min, vs / 2 * 1.01);
    EXPECT_LE(s.max, vs + 1e-9);
    EXPECT_GT(s.max, vs * 0.99);
  }
}

TEST(EqualJitterTest, CapBinds) {
  // retry 20: base * 2^19 is far above the cap of 10s: draws in [5s, 10s].
  const BackoffParams p = Params(BackoffKind::kEqualJitter,
                                 absl::Milliseconds(100), absl::Seconds(10));
  const Summary s = Summarize(Draw(p, 20, absl::ZeroDuration(), 5000, 3));
  EXPECT_GE(s.min, 5.0);
  EXPECT_LE(s.max, 10.0);
  EXPECT_GT(s.max, 9.9);
}

// ---------------------------------------------------------------------------
// Full jitter: uniform[0, v].

struct FullJitterCase {
  int retry;
  double v;  // expected interval, seconds
};

class FullJitterTest : public ::testing::TestWithParam<FullJitterCase> {};

TEST_P(FullJitterTest, SpreadsUniformlyOverTheWholeInterval) {
  const FullJitterCase c = GetParam();
  const BackoffParams p = Params(BackoffKind::kFullJitter,
                                 absl::Milliseconds(200), absl::Seconds(30));
  const std::vector<double> d = Draw(p, c.retry, absl::ZeroDuration(), 20000,
                                     100 + c.retry);
  const Summary s = Summarize(d);
  EXPECT_GE(s.min, 0.0);
  EXPECT_LT(s.min, c.v * 0.005);  // reaches down to ~0 (not v/2, not base)
  EXPECT_LE(s.max, c.v);
  EXPECT_GT(s.max, c.v * 0.995);  // reaches up to ~v
  EXPECT_NEAR(s.mean, c.v / 2, c.v * 0.01);
  for (int count : Histogram<10>(d, 0, c.v)) {
    EXPECT_GT(count, 1700);
    EXPECT_LT(count, 2300);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Retries, FullJitterTest,
    ::testing::Values(FullJitterCase{1, 0.2}, FullJitterCase{2, 0.4},
                      FullJitterCase{5, 3.2}, FullJitterCase{8, 25.6},
                      // cap binding from retry 9 on
                      FullJitterCase{9, 30.0}, FullJitterCase{1000, 30.0}));

TEST(FullJitterTest, SameSeedSameSequence) {
  const BackoffParams p = Params(BackoffKind::kFullJitter,
                                 absl::Milliseconds(200), absl::Seconds(30));
  EXPECT_EQ(Draw(p, 4, absl::ZeroDuration(), 100, 42),
            Draw(p, 4, absl::ZeroDuration(), 100, 42));
  EXPECT_NE(Draw(p, 4, absl::ZeroDuration(), 100, 42),
            Draw(p, 4, absl::ZeroDuration(), 100, 43));
}

// ---------------------------------------------------------------------------
// Decorrelated jitter: min(cap, uniform[base, max(base, prev) * 3]).

struct DecorrelatedCase {
  absl::Duration previous;
  double lo, hi;  // expected range of draws, seconds
};

class DecorrelatedJitterTest
    : public ::testing::TestWithParam<DecorrelatedCase> {};

TEST_P(DecorrelatedJitterTest, WithinBaseAndThreeTimesPrevious) {
  const DecorrelatedCase c = GetParam();
  // base 200ms, cap 30s. The retry number is irrelevant to this policy.
  const BackoffParams p = Params(BackoffKind::kDecorrelatedJitter,
                                 absl::Milliseconds(200), absl::Seconds(30));
  for (int retry : {1, 7}) {
    const std::vector<double> d = Draw(p, retry, c.previous, 20000, 5);
    const Summary s = Summarize(d);
    const double width = c.hi - c.lo;
    EXPECT_GE(s.min, c.lo);
    EXPECT_LT(s.min, c.lo + width * 0.005);
    EXPECT_LE(s.max, c.hi);
    EXPECT_GT(s.max, c.hi - width * 0.005);
    EXPECT_NEAR(s.mean, (c.lo + c.hi) / 2, width * 0.01);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Previous, DecorrelatedJitterTest,
    ::testing::Values(
        // no previous delay yet: prev = base -> [0.2, 0.6]
        DecorrelatedCase{absl::ZeroDuration(), 0.2, 0.6},
        // previous below base is treated as base
        DecorrelatedCase{absl::Milliseconds(50), 0.2, 0.6},
        DecorrelatedCase{absl::Milliseconds(200), 0.2, 0.6},
        // prev 1s -> [0.2, 3]
        DecorrelatedCase{absl::Seconds(1), 0.2, 3.0},
        // prev 9s -> [0.2, 27]
        DecorrelatedCase{absl::Seconds(9), 0.2, 27.0},
        // prev 10s -> 3 * prev = 30 = cap
        DecorrelatedCase{absl::Seconds(10), 0.2, 30.0}));

TEST(DecorrelatedJitterTest2, CapBindsAndTheMultiplicationIsGuarded) {
  const BackoffParams p = Params(BackoffKind::kDecorrelatedJitter,
                                 absl::Milliseconds(200), absl::Seconds(30));
  SeededRandom random(9);
  // prev 20s: uniform[0.2, 60] capped at 30: never above 30, and the cap is
  // reached by a large share of the draws (those above 30 before the min).
  int at_cap = 0;
  for (int i = 0; i < 10000; ++i) {
    const absl::Duration d =
        NextBackoff(p, 3, absl::Seconds(20), random.Get());
    ASSERT_GE(d, absl::Milliseconds(200));
    ASSERT_LE(d, absl::Seconds(30));
    if (d == absl::Seconds(30)) ++at_cap;
  }
  // P(draw >= 30) = 30 / 59.8 ~ 0.50.
  EXPECT_GT(at_cap, 4500);
  EXPECT_LT(at_cap, 5500);
  // Absurd previous values: still within [base, cap].
  for (absl::Duration prev :
       {absl::Hours(1000000), absl::InfiniteDuration(), -absl::Seconds(5),
        -absl::InfiniteDuration()}) {
    SCOPED_TRACE(prev);
    const absl::Duration d = NextBackoff(p, 3, prev, random.Get());
    EXPECT_GE(d, absl::Milliseconds(200));
    EXPECT_LE(d, absl::Seconds(30));
  }
}

TEST(DecorrelatedJitterTest2, ChainGrowsFromThePreviousDelay) {
  // Fed its own output, the chain stays within [base, min(cap, 3 * prev)]
  // at every step, grows past the exponential's early values and eventually
  // touches the cap.
  const BackoffParams p = Params(BackoffKind::kDecorrelatedJitter,
                                 absl::Milliseconds(200), absl::Seconds(30));
  SeededRandom random(13);
  absl::Duration prev = absl::ZeroDuration();
  absl::Duration max_seen = absl::ZeroDuration();
  for (int i = 1; i <= 200; ++i) {
    const absl::Duration next = NextBackoff(p, i, prev, random.Get());
    const absl::Duration hi =
        std::min(absl::Seconds(30), std::max(prev, p.base) * 3);
    ASSERT_GE(next, p.base) << "step " << i;
    ASSERT_LE(next, hi) << "step " << i;
    max_seen = std::max(max_seen, next);
    prev = next;
  }
  EXPECT_EQ(max_seen, absl::Seconds(30));
}

// ---------------------------------------------------------------------------
// Every policy: within [0, cap] for every retry, including absurd ones.

TEST(NextBackoffTest, EveryPolicyWithinZeroAndCap) {
  SeededRandom random(21);
  for (BackoffKind kind :
       {BackoffKind::kExponential, BackoffKind::kEqualJitter,
        BackoffKind::kFullJitter, BackoffKind::kDecorrelatedJitter}) {
    SCOPED_TRACE(BackoffKindName(kind));
    const BackoffParams p =
        Params(kind, absl::Milliseconds(1), absl::Seconds(5));
    absl::Duration prev = absl::ZeroDuration();
    for (int retry : {1, 2, 10, 13, 14, 100, 1000, 100000}) {
      for (int i = 0; i < 50; ++i) {
        const absl::Duration d = NextBackoff(p, retry, prev, random.Get());
        ASSERT_GE(d, absl::ZeroDuration()) << retry;
        ASSERT_LE(d, absl::Seconds(5)) << retry;
        prev = d;
      }
    }
  }
}

// ---------------------------------------------------------------------------
// UniformDuration: uniform in [0, d).

TEST(UniformDurationTest, ZeroOrNegativeIsZero) {
  SeededRandom random(1);
  EXPECT_EQ(UniformDuration(random.Get(), absl::ZeroDuration()),
            absl::ZeroDuration());
  EXPECT_EQ(UniformDuration(random.Get(), -absl::Seconds(1)),
            absl::ZeroDuration());
  EXPECT_EQ(UniformDuration(random.Get(), -absl::InfiniteDuration()),
            absl::ZeroDuration());
}

TEST(UniformDurationTest, HalfOpenAndUniform) {
  SeededRandom random(2);
  // d = 1ns: [0, 1ns) holds only 0.
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(UniformDuration(random.Get(), absl::Nanoseconds(1)),
              absl::ZeroDuration());
  }
  // d = 50ms: [0, 50ms), spread over the whole range.
  std::vector<double> d;
  for (int i = 0; i < 20000; ++i) {
    const absl::Duration x = UniformDuration(random.Get(), absl::Milliseconds(50));
    ASSERT_GE(x, absl::ZeroDuration());
    ASSERT_LT(x, absl::Milliseconds(50));
    d.push_back(absl::ToDoubleMilliseconds(x));
  }
  const Summary s = Summarize(d);
  EXPECT_LT(s.min, 0.5);
  EXPECT_GT(s.max, 49.5);
  EXPECT_NEAR(s.mean, 25.0, 0.5);
  for (int count : Histogram<10>(d, 0, 50)) {
    EXPECT_GT(count, 1700);
    EXPECT_LT(count, 2300);
  }
}

TEST(UniformDurationTest, NanosecondResolution) {
  // Sub-millisecond ranges are not rounded to zero.
  SeededRandom random(3);
  int nonzero = 0;
  for (int i = 0; i < 100; ++i) {
    const absl::Duration x =
        UniformDuration(random.Get(), absl::Microseconds(10));
    ASSERT_LT(x, absl::Microseconds(10));
    if (x > absl::ZeroDuration()) ++nonzero;
  }
  EXPECT_GT(nonzero, 95);
}

}  // namespace
}  // namespace stagger::engine
