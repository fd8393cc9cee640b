#include "agent/work_pool.h"

#include <utility>

namespace stagger::agent {

WorkPool::WorkPool(int threads, size_t max_queued) : max_queued_(max_queued) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

WorkPool::~WorkPool() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

bool WorkPool::Submit(std::function<void()> task) {
  absl::MutexLock l(&mu_);
  if (stop_ || queue_.size() >= max_queued_) return false;
  queue_.push_back(std::move(task));
  return true;
}

void WorkPool::Run() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock l(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace stagger::agent
