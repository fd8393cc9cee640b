// LatencyHistogram: a fixed-size log-linear histogram of durations in
// nanoseconds (HdrHistogram's layout: 64 linear sub-buckets per power of
// two, so any recorded value is reported within 1/64 = 1.6% of itself).
// Covers 0 .. 2^40 ns (~18 minutes); larger values land in the last bucket.
// Not thread-safe: the load generator keeps one per closed loop and merges
// them at the end. ~18 KiB each, no allocation after construction.
#ifndef STAGGER_BENCH_LOAD_LATENCY_HISTOGRAM_H_
#define STAGGER_BENCH_LOAD_LATENCY_HISTOGRAM_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace stagger::bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;                 // 64 sub-buckets
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kMaxExponent = 40 - kSubBits;  // values < 2^40 ns
  static constexpr int kBuckets = (kMaxExponent + 2) * kSub;

  void Record(int64_t ns) {
    if (ns < 0) ns = 0;
    ++counts_[Index(static_cast<uint64_t>(ns))];
    ++total_;
    max_ns_ = std::max(max_ns_, ns);
  }

  void Merge(const LatencyHistogram& o) {
    for (int i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
    max_ns_ = std::max(max_ns_, o.max_ns_);
  }

  int64_t count() const { return total_; }
  int64_t max_ns() const { return max_ns_; }

  // The value at quantile q in [0, 1] (the smallest recorded value with at
  // least q of the samples at or below it), as its bucket's midpoint, ns.
  // 0 if empty.
  int64_t Quantile(double q) const {
    if (total_ == 0) return 0;
    const int64_t rank = std::max<int64_t>(
        1, static_cast<int64_t>(std::ceil(q * static_cast<double>(total_))));
    int64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) return std::min(Mid(i), max_ns_);
    }
    return max_ns_;
  }

 private:
  // Buckets 0..127 hold the values 0..127 ns exactly. Above, each power of
  // two [2^k, 2^(k+1)), k >= 7, is split into 64 equal buckets of 2^(k-6)
  // ns: value v goes to (e + 1) * 64 + (v >> e) - 64 with e = k - 6.
  static int Index(uint64_t v) {
    if (v < 2 * kSub) return static_cast<int>(v);
    const int k = 63 - __builtin_clzll(v);  // 2^k <= v < 2^(k+1), k >= 7
    const int e = std::min(k - kSubBits, kMaxExponent);  // shift, >= 1
    const uint64_t s = std::min<uint64_t>(v >> e, 2 * kSub - 1);  // [64,128)
    return (e + 1) * kSub + static_cast<int>(s - kSub);
  }
  static int64_t Mid(int i) {
    if (i < 2 * kSub) return i;
    const int e = i / kSub - 1;
    const int64_t s = kSub + i % kSub;
    return (s << e) + ((int64_t{1} << e) >> 1);
  }

  std::array<int64_t, kBuckets> counts_{};
  int64_t total_ = 0;
  int64_t max_ns_ = 0;
};

}  // namespace stagger::bench

#endif  // STAGGER_BENCH_LOAD_LATENCY_HISTOGRAM_H_
