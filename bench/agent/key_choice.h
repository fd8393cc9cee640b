// How stagger-agent-load's workers choose background keys, and whether an
// attempt fails: deterministic, from a seed.
//
//   * Uniform: the workers of one target together cycle over every key
//     (worker w of a target starts at its index and strides by the
//     target's worker count), so every key is visited equally often and
//     every agent sees every key.
//   * Zipf(s): key rank r (0 .. n-1) is drawn with probability
//     (1 / (r + 1)^s) / H(n, s), by inverting the cumulative table
//     (ZipfTable, shared read-only by every worker). Rank r is bench key r
//     (bench_keys.h): key 0 is the most popular.
// Each worker draws from its own generator, seeded with WorkerSeed(seed,
// worker): a run with the same flags draws the same keys, and the same
// failing attempts, in the same order on each worker.
//
//   ZipfTable zipf(100000, 1.0);
//   WorkerRandom rng(WorkerSeed(1, worker_index));
//   uint64_t key = zipf.Rank(rng.Unit());
#ifndef STAGGER_BENCH_AGENT_KEY_CHOICE_H_
#define STAGGER_BENCH_AGENT_KEY_CHOICE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace stagger::bench {

// SplitMix64's finalizer: distinct, well-mixed seeds for neighbouring
// (seed, worker) pairs.
inline uint64_t WorkerSeed(uint64_t seed, uint64_t worker) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + worker + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** seeded through SplitMix64: the same numbers on every
// platform (std::mt19937_64's distributions are not portable).
class WorkerRandom {
 public:
  explicit WorkerRandom(uint64_t seed) {
    for (uint64_t& w : s_) {
      seed += 0x9E3779B97F4A7C15ull;
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      w = z ^ (z >> 31);
    }
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1), 53 bits.
  double Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

// The cumulative distribution of Zipf(s) over n ranks: Rank(u) is the
// smallest r with P(rank <= r) > u. n >= 1, s >= 0 (0: uniform).
class ZipfTable {
 public:
  ZipfTable(int64_t n, double s) : cdf_(static_cast<size_t>(n)) {
    double sum = 0;
    for (int64_t r = 0; r < n; ++r) {
      sum += std::pow(static_cast<double>(r + 1), -s);
      cdf_[static_cast<size_t>(r)] = sum;
    }
    for (double& c : cdf_) c /= sum;
    cdf_.back() = 1.0;  // no rounding gap at the top
  }
  int64_t size() const { return static_cast<int64_t>(cdf_.size()); }
  // u in [0, 1).
  int64_t Rank(double u) const {
    const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
    return std::min<int64_t>(it - cdf_.begin(), size() - 1);
  }
  // P(rank == r).
  double Probability(int64_t r) const {
    const size_t i = static_cast<size_t>(r);
    return i == 0 ? cdf_[0] : cdf_[i] - cdf_[i - 1];
  }

 private:
  std::vector<double> cdf_;
};

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_AGENT_KEY_CHOICE_H_
