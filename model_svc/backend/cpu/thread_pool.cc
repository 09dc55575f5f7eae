#include "model_svc/backend/cpu/thread_pool.h"

#include <pthread.h>

#include <algorithm>
#include <string>
#include <utility>

#include "common/cpu_set.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace llm::cpu {
namespace {

// Spin iterations before a worker sleeps: a few tens of microseconds, enough
// to bridge the serial ops between two parallel loops of one step.
constexpr int kSpinIterations = 20000;

inline void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int num_threads, const std::vector<int>& cpus)
    : num_threads_(std::max(1, num_threads)) {
  workers_.reserve(num_threads_ - 1);
  for (int i = 1; i < num_threads_; ++i) {
    workers_.emplace_back([this, i] { WorkerLoop(i); });
    // It only waits until the first Run, after the constructor.
    if (cpus.empty()) continue;
    absl::Status pinned = PinThread(workers_.back().native_handle(), cpus);
    if (placement_.ok()) placement_ = std::move(pinned);
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  wake_.fetch_add(1, std::memory_order_acq_rel);
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::Run(absl::FunctionRef<void(int, int)> fn) {
  if (num_threads_ == 1) {
    fn(0, 1);
    return;
  }
  task_ = &fn;
  idle_.store(false, std::memory_order_relaxed);
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_all();
  fn(0, num_threads_);
  // Spin while the workers finish; yield now and then in case one of them was
  // descheduled (an oversubscribed machine).
  for (int spin = 1; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin % 1024 == 0) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }
  task_ = nullptr;
}

void ThreadPool::Idle() { idle_.store(true, std::memory_order_relaxed); }

void ThreadPool::Wake() {
  if (num_threads_ == 1) return;
  idle_.store(false, std::memory_order_relaxed);
  wake_.fetch_add(1, std::memory_order_release);
  wake_.notify_all();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (num_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  const int64_t chunks = (n + grain - 1) / grain;
  Run([&](int index, int count) {
    const int64_t begin = chunks * index / count * grain;
    const int64_t end = std::min(n, chunks * (index + 1) / count * grain);
    if (begin < end) fn(begin, end);
  });
}

void ThreadPool::WorkerLoop(int index) {
  // Named for operators (top -H); names are at most 15 characters.
  const std::string name = "llm-pool-" + std::to_string(index % 100000);
  pthread_setname_np(pthread_self(), name.c_str());
  uint64_t seen = 0;
  for (;;) {
    uint64_t now = generation_.load(std::memory_order_acquire);
    for (int spin = 0; now == seen && spin < kSpinIterations; ++spin) {
      if (idle_.load(std::memory_order_relaxed)) break;
      CpuRelax();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      // Sleep until Run() or Wake() bumps wake_ (read before the last look
      // at generation_, so that a bump in between is not missed).
      const uint32_t w = wake_.load(std::memory_order_acquire);
      if (generation_.load(std::memory_order_acquire) == seen) {
        wake_.wait(w, std::memory_order_acquire);
      }
      continue;
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    (*task_)(index, num_threads_);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace llm::cpu
