// RandomSource: PerThreadRandom gives every thread, and every process forked
// from another, its own sequence (a fleet forked from one parent must not
// draw the same delays); SeededRandom is reproducible. The fork tests fork
// for real: each child writes its draws to a pipe and _exit()s; the parent
// compares.
#include "core/engine/random.h"

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace stagger::engine {
namespace {

constexpr int kDraws = 16;
using Draws = std::array<uint64_t, kDraws>;

Draws DrawFrom(RandomSource& r) {
  Draws d;
  for (uint64_t& x : d) {
    absl::BitGenRef g = r.Get();
    x = g();
  }
  return d;
}

Draws DrawPerThread() { return DrawFrom(*PerThreadRandom::Instance()); }

// Forks; the child runs `draw` (on its main thread, or on a new thread when
// `in_new_thread`) and writes the result to a pipe. Returns the child's
// draws. Fails the test if the child does not deliver them.
template <typename F>
Draws DrawInChild(F draw, bool in_new_thread = false) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Draws d;
    if (in_new_thread) {
      std::thread t([&] { d = draw(); });
      t.join();
    } else {
      d = draw();
    }
    const char* p = reinterpret_cast<const char*>(d.data());
    size_t left = sizeof(d);
    while (left > 0) {
      const ssize_t n = write(fds[1], p, left);
      if (n <= 0) _exit(2);
      p += n;
      left -= static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  Draws d{};
  char* p = reinterpret_cast<char*>(d.data());
  size_t got = 0;
  while (got < sizeof(d)) {
    const ssize_t n = read(fds[0], p + got, sizeof(d) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fds[0]);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(got, sizeof(d));
  return d;
}

// No draw of `a` appears in `b`: two independent 64-bit sequences share a
// value with negligible probability; a shared or re-used seed shares all.
void ExpectDisjoint(const Draws& a, const Draws& b) {
  const std::set<uint64_t> sa(a.begin(), a.end());
  int shared = 0;
  for (uint64_t x : b) shared += sa.count(x);
  EXPECT_EQ(shared, 0);
}

TEST(PerThreadRandomTest, ThreadsGetDifferentSequences) {
  constexpr int kThreads = 8;
  std::vector<Draws> draws(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&draws, i] { draws[i] = DrawPerThread(); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    for (int j = i + 1; j < kThreads; ++j) {
      SCOPED_TRACE(testing::Message() << i << " vs " << j);
      ExpectDisjoint(draws[i], draws[j]);
    }
  }
}

TEST(PerThreadRandomTest, AThreadKeepsItsSequenceAcrossCalls) {
  // Not reseeded on every call: consecutive draws are not repeats of the
  // first draw of a fresh generator.
  const Draws a = DrawPerThread();
  const Draws b = DrawPerThread();
  ExpectDisjoint(a, b);
  std::set<uint64_t> s(a.begin(), a.end());
  EXPECT_EQ(s.size(), a.size());
}

TEST(PerThreadRandomTest, ForkedChildDiffersFromParent) {
  // The parent has a generator before the fork; the child inherits its
  // memory. The child's draws must not be the parent's next draws.
  DrawPerThread();
  const Draws child = DrawInChild(DrawPerThread);
  const Draws parent = DrawPerThread();
  ExpectDisjoint(parent, child);
}

TEST(PerThreadRandomTest, SiblingChildrenDiffer) {
  // A pool of workers forked from one parent (the parent draws nothing in
  // between): no two children may share a sequence.
  DrawPerThread();
  std::vector<Draws> children;
  for (int i = 0; i < 4; ++i) children.push_back(DrawInChild(DrawPerThread));
  for (size_t i = 0; i < children.size(); ++i) {
    for (size_t j = i + 1; j < children.size(); ++j) {
      SCOPED_TRACE(testing::Message() << i << " vs " << j);
      ExpectDisjoint(children[i], children[j]);
    }
  }
}

TEST(PerThreadRandomTest, NewThreadsInSiblingChildrenDiffer) {
  // Threads started after the fork (a forked server starts its pool) seed
  // themselves: they must not derive the same seed from inherited state.
  DrawPerThread();
  const Draws a = DrawInChild(DrawPerThread, /*in_new_thread=*/true);
  const Draws b = DrawInChild(DrawPerThread, /*in_new_thread=*/true);
  ExpectDisjoint(a, b);
}

TEST(PerThreadRandomTest, ChildWithoutParentGeneratorDiffersFromSibling) {
  // A thread of the parent that never drew: its children still differ.
  std::thread t([] {
    const Draws a = DrawInChild(DrawPerThread);
    const Draws b = DrawInChild(DrawPerThread);
    ExpectDisjoint(a, b);
  });
  t.join();
}

TEST(SeededRandomTest, SameSeedSameSequence) {
  SeededRandom a(123), b(123), c(124);
  const Draws da = DrawFrom(a);
  EXPECT_EQ(da, DrawFrom(b));
  ExpectDisjoint(da, DrawFrom(c));
}

}  // namespace
}  // namespace stagger::engine
