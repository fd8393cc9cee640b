// WorkPool: a fixed set of threads that run the agent's calls which may
// block (a unary call to a coordinator replica, bounded by its deadline),
// so gRPC's callback threads never wait on the network.
//
// Submit() queues a task; at most `max_queued` wait at once: beyond that it
// returns false and the caller answers the call itself (UNAVAILABLE: the
// worker's library falls back). The destructor runs what is queued, then
// joins. Thread-safe.
#ifndef STAGGER_AGENT_WORK_POOL_H_
#define STAGGER_AGENT_WORK_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace stagger::agent {

class WorkPool {
 public:
  WorkPool(int threads, size_t max_queued);
  ~WorkPool();
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  bool Submit(std::function<void()> task);

 private:
  void Run();

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace stagger::agent

#endif  // STAGGER_AGENT_WORK_POOL_H_
