// The CPU backend: quantized weights (copied onto huge pages, or used in
// place from the mapped GGUF file), SIMD kernels (quant.h), a thread pool, and
// a paged KV cache (fp16 or fp32) in host memory. Ops that feed a MatMul
// quantize their output as they write it (RmsNorm, AddRmsNorm, SiluMul,
// Attention).
#ifndef LLM_MODEL_SVC_BACKEND_CPU_CPU_BACKEND_H_
#define LLM_MODEL_SVC_BACKEND_CPU_CPU_BACKEND_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "model_svc/core/backend.h"

namespace llm::cpu {

struct CpuBackendOptions {
  int threads = 0;  // 0: one per core the process may use
  // The CPUs of the pool's workers (thread_pool.h); empty: their creator's.
  // The thread that runs the steps (worker 0) is its owner's to place.
  std::vector<int> cpus;
  // false (default): UploadWeight copies each weight into memory allocated on
  // transparent huge pages (decode streams every weight once a token, and
  // with the file's 4 KiB pages that cost a TLB miss every 4 KiB: ~15%
  // slower). true: compute from the caller's bytes (the GGUF mapping), which
  // must outlive the backend; no copy, no extra memory.
  bool mmap_weights = false;
  // true: ReadLogits applies token masks (Backend::AppliesTokenMasks).
  // false: it says it does not and ignores them, as a backend without them
  // would, so that the model masks on the host (that path's tests).
  bool apply_token_masks = true;
};

// `placement` (may be null) receives ThreadPool::placement(): whether the
// workers are on options.cpus.
std::unique_ptr<model::Backend> CreateCpuBackend(const CpuBackendOptions& options,
                                                 absl::Status* placement = nullptr);

// Threads the process may run on (sched_getaffinity), at least 1.
int AvailableCores();

}  // namespace llm::cpu

#endif  // LLM_MODEL_SVC_BACKEND_CPU_CPU_BACKEND_H_
