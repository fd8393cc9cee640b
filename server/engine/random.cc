#include "server/engine/random.h"

#include <pthread.h>

#include <atomic>
#include <optional>

namespace stagger::engine {
namespace {

// Bumped in the child of every fork(); a thread's generator from an older
// generation is replaced before its next draw.
std::atomic<uint64_t> fork_generation{0};

void OnForkChild() { fork_generation.fetch_add(1, std::memory_order_relaxed); }

struct ThreadGen {
  uint64_t generation = ~uint64_t{0};
  std::optional<absl::BitGen> gen;
};

}  // namespace

PerThreadRandom* PerThreadRandom::Instance() {
  static PerThreadRandom* instance = [] {
    pthread_atfork(nullptr, nullptr, &OnForkChild);
    return new PerThreadRandom;
  }();
  return instance;
}

absl::BitGenRef PerThreadRandom::Get() {
  thread_local ThreadGen tg;
  const uint64_t g = fork_generation.load(std::memory_order_relaxed);
  if (tg.generation != g || !tg.gen.has_value()) {
    tg.gen.emplace();  // fresh OS-entropy seed
    tg.generation = g;
  }
  return absl::BitGenRef(*tg.gen);
}

}  // namespace stagger::engine
