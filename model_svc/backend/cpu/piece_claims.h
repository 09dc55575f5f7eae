// The pieces of one parallel loop shared out among its threads, with
// stealing.
//
// Thread i owns a contiguous run of the pieces and takes them from its front;
// once its run is empty it takes pieces from the back of the other runs.
// Contiguous pieces keep a thread's weight stream sequential (a matmul tile
// prefetches the rows after its own, so the owner's next piece is already on
// its way), and stealing lets a thread that the OS or the hypervisor slowed
// hand the end of its run to the others instead of stalling the loop.
//
// Threads: Reset() from one thread while no Next() runs (before the loop);
// Next() from the loop's threads at once. Cost: one compare-and-swap on the
// owner's run (its own cache line) per piece, a few more when stealing.
#ifndef LLM_MODEL_SVC_BACKEND_CPU_PIECE_CLAIMS_H_
#define LLM_MODEL_SVC_BACKEND_CPU_PIECE_CLAIMS_H_

#include <atomic>
#include <cstdint>
#include <memory>

namespace llm::cpu {

class PieceClaims {
 public:
  // For loops of up to `max_threads` threads.
  explicit PieceClaims(int max_threads)
      : max_threads_(max_threads), runs_(std::make_unique<Run[]>(max_threads)) {}

  int max_threads() const { return max_threads_; }

  // Shares pieces [0, num_pieces) (< 2^32) among `threads` (<= max_threads)
  // runs of near-equal length, thread i's before thread i + 1's.
  void Reset(int64_t num_pieces, int threads) {
    threads_ = threads;
    for (int i = 0; i < threads; ++i) {
      runs_[i].bounds.store(Pack(num_pieces * i / threads, num_pieces * (i + 1) / threads),
                            std::memory_order_relaxed);
    }
  }

  // The next piece for `thread`: the front of its own run, else the back of
  // the next non-empty run after it; -1 once every run is empty. Each piece
  // is handed out exactly once.
  int64_t Next(int thread) {
    if (const int64_t p = Take(runs_[thread].bounds, /*front=*/true); p >= 0) return p;
    for (int k = 1; k < threads_; ++k) {
      if (const int64_t p = Take(runs_[(thread + k) % threads_].bounds, false); p >= 0) return p;
    }
    return -1;
  }

 private:
  // A run [front, back), as front | back << 32.
  struct alignas(64) Run {
    std::atomic<uint64_t> bounds{0};
  };
  static uint64_t Pack(int64_t front, int64_t back) {
    return static_cast<uint64_t>(front) | static_cast<uint64_t>(back) << 32;
  }

  // Takes the run's first (or last) piece; -1 when it is empty.
  static int64_t Take(std::atomic<uint64_t>& bounds, bool front) {
    uint64_t b = bounds.load(std::memory_order_relaxed);
    for (;;) {
      const int64_t lo = static_cast<int64_t>(b & 0xffffffffu), hi = static_cast<int64_t>(b >> 32);
      if (lo >= hi) return -1;
      const uint64_t next = front ? Pack(lo + 1, hi) : Pack(lo, hi - 1);
      if (bounds.compare_exchange_weak(b, next, std::memory_order_relaxed)) {
        return front ? lo : hi - 1;
      }
    }
  }

  const int max_threads_;
  int threads_ = 0;
  std::unique_ptr<Run[]> runs_;
};

}  // namespace llm::cpu

#endif  // LLM_MODEL_SVC_BACKEND_CPU_PIECE_CLAIMS_H_
