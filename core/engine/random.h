// RandomSource: where the engine draws its jitter. Injected so that tests use
// fixed seeds.
//
// PerThreadRandom (production) hands each thread its own absl::BitGen, seeded
// independently from OS entropy, and reseeds it in a child after fork(): a
// fleet of processes forked from one parent must not draw identical delay
// sequences (they would retry in lockstep, the herd jitter exists to break).
#ifndef STAGGER_CORE_ENGINE_RANDOM_H_
#define STAGGER_CORE_ENGINE_RANDOM_H_

#include <cstdint>
#include <random>

#include "absl/base/thread_annotations.h"
#include "absl/random/bit_gen_ref.h"
#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"

namespace stagger::engine {

class RandomSource {
 public:
  virtual ~RandomSource() = default;
  // A generator for the calling thread, valid until the thread's next call.
  // Calls from one thread are never concurrent with each other.
  virtual absl::BitGenRef Get() = 0;
};

// Thread-safe, fork-safe; independently seeded per thread.
class PerThreadRandom final : public RandomSource {
 public:
  static PerThreadRandom* Instance();
  absl::BitGenRef Get() override;
};

// One deterministic generator for single-threaded use (tests, the
// simulator): the same seed gives the same sequence. Not thread-safe.
class SeededRandom final : public RandomSource {
 public:
  explicit SeededRandom(uint64_t seed) : gen_(seed) {}
  absl::BitGenRef Get() override { return absl::BitGenRef(gen_); }

 private:
  std::mt19937_64 gen_;
};

}  // namespace stagger::engine

#endif  // STAGGER_CORE_ENGINE_RANDOM_H_
