// A fixed pool of threads for data-parallel loops with microsecond dispatch.
//
// A decode step of a small model runs ~150 parallel loops of a few
// microseconds each, so dispatch latency matters more than fairness: workers
// spin briefly on an atomic generation counter after each loop, then sleep
// (std::atomic::wait, a futex on Linux) until the next one, or at once after
// Idle(). The calling thread takes part as worker 0.
//
// Placement: a pool made with a CPU set puts its workers there as it starts
// them (as ggml's thread pool takes a cpumask); the calling thread, worker
// 0, is its owner's to place (the engine places its step loop).
//
// Threads: Run() may be called from one thread at a time (the step loop).
#ifndef LLM_MODEL_SVC_BACKEND_CPU_THREAD_POOL_H_
#define LLM_MODEL_SVC_BACKEND_CPU_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace llm::cpu {

class ThreadPool {
 public:
  // `num_threads` >= 1, the caller included. `cpus`: the CPUs the workers
  // run on (every worker on all of them); empty: where their creator runs.
  explicit ThreadPool(int num_threads, const std::vector<int>& cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  // OK, or why a worker could not be put on the CPUs (it runs where its
  // creator does): the first refusal.
  const absl::Status& placement() const { return placement_; }

  // Calls fn(thread_index, num_threads) once on every thread and returns when
  // all calls have returned.
  void Run(absl::FunctionRef<void(int, int)> fn);

  // Tells the workers that no loop follows soon (the end of a step): they
  // sleep at once instead of spinning, leaving the cores to other threads
  // (the gRPC threads that deliver this step's results). The next Run()
  // wakes them.
  void Idle();

  // Tells the workers that a loop follows soon (a step is about to start):
  // sleeping ones wake and spin, so that the first Run() finds them awake.
  // The wake-up's latency then overlaps the caller's work before that Run().
  void Wake();

  // Splits [0, n) into contiguous ranges, one per thread, each a multiple of
  // `grain` long (except the last), and calls fn(begin, end) for the
  // non-empty ones. Runs inline when n <= grain.
  void ParallelFor(int64_t n, int64_t grain, absl::FunctionRef<void(int64_t, int64_t)> fn);

 private:
  void WorkerLoop(int index);

  const int num_threads_;
  absl::Status placement_;
  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> idle_{false};
  std::atomic<uint32_t> wake_{0};  // bumped by Run() and Wake(); sleepers wait on it
  const absl::FunctionRef<void(int, int)>* task_ = nullptr;
};

}  // namespace llm::cpu

#endif  // LLM_MODEL_SVC_BACKEND_CPU_THREAD_POOL_H_
