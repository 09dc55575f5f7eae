// The CPU backend: quantized weights used in place from the mapped GGUF file,
// SIMD kernels (quant.h), a thread pool, and an fp32 paged KV cache in host
// memory.
#ifndef LLM_MODEL_SVC_BACKEND_CPU_CPU_BACKEND_H_
#define LLM_MODEL_SVC_BACKEND_CPU_CPU_BACKEND_H_

#include <memory>

#include "model_svc/backend/backend.h"

namespace llm::cpu {

struct CpuBackendOptions {
  int threads = 0;  // 0: one per core the process may use
};

std::unique_ptr<model::Backend> CreateCpuBackend(const CpuBackendOptions& options);

// Threads the process may run on (sched_getaffinity), at least 1.
int AvailableCores();

}  // namespace llm::cpu

#endif  // LLM_MODEL_SVC_BACKEND_CPU_CPU_BACKEND_H_
