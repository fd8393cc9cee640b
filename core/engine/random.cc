#include "core/engine/random.h"

#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <optional>
#include <random>

#include "absl/time/clock.h"

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

// A generator seeded from the kernel (getrandom). Not absl::BitGen's
// default seeding: that draws from a process-wide pool seeded once per
// process, which a forked child inherits, so sibling children (and the
// threads they start) would all seed identically. The pid, thread and
// clock are mixed in as well, in case getrandom is unavailable.
void SeedFresh(ThreadGen& tg) {
  uint32_t words[12] = {};
  constexpr size_t kEntropyBytes = 8 * sizeof(uint32_t);
  char* p = reinterpret_cast<char*>(words);
  size_t got = 0;
  while (got < kEntropyBytes) {
    const ssize_t n = getrandom(p + got, kEntropyBytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += static_cast<size_t>(n);
  }
  const uint64_t now = static_cast<uint64_t>(absl::GetCurrentTimeNanos());
  const uint64_t self = reinterpret_cast<uintptr_t>(&tg);
  words[8] = static_cast<uint32_t>(getpid());
  words[9] = static_cast<uint32_t>(self ^ (self >> 32));
  words[10] = static_cast<uint32_t>(now);
  words[11] = static_cast<uint32_t>(now >> 32);
  std::seed_seq seq(std::begin(words), std::end(words));
  tg.gen.emplace(seq);
}

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
    SeedFresh(tg);  // fresh kernel entropy, never inherited state
    tg.generation = g;
  }
  return absl::BitGenRef(*tg.gen);
}

}  // namespace stagger::engine
