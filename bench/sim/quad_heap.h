// QuadHeap: a 4-ary min-heap, for the simulator's large queues (every
// pending event of a 100,000-delivery run). With 16-byte entries a node's
// four children share one 64-byte cache line and the heap is half as deep
// as a binary one, which is most of what a pop costs once the heap no
// longer fits in the cache. `Less` must be a strict weak order; with keys
// that are unique (as the simulator's are: time, then insertion order),
// pops come in one order whatever the heap's shape.
#ifndef STAGGER_BENCH_SIM_QUAD_HEAP_H_
#define STAGGER_BENCH_SIM_QUAD_HEAP_H_

#include <cstddef>
#include <utility>
#include <vector>

namespace stagger::sim {

template <typename T, typename Less>
class QuadHeap {
 public:
  static constexpr size_t kArity = 4;
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const T& top() const { return heap_.front(); }

  void push(const T& v) {
    size_t i = heap_.size();
    heap_.push_back(v);
    while (i > 0) {
      const size_t parent = (i - 1) / kArity;
      if (!less_(v, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = v;
  }

  void pop() {
    const T last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return;
    size_t i = 0;
    while (true) {
      const size_t first = kArity * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < end; ++c) {
        if (less_(heap_[c], heap_[best])) best = c;
      }
      if (!less_(heap_[best], last)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
  }

 private:
  std::vector<T> heap_;
  Less less_;
};

}  // namespace stagger::sim

#endif  // STAGGER_BENCH_SIM_QUAD_HEAP_H_
