// The CUDA backend: weights in device memory (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K
// and Q6_K kept quantized, the other quantized GGUF types dequantized to
// fp16 at upload; F16, BF16 and F32 kept as they are), cuBLAS GEMMs with
// fp32 accumulation, hand-written kernels for the rest
// (kernels.h), a paged KV cache in device memory, top-N and log-sum-exp on
// the device, and decode steps replayed as CUDA graphs.
//
// Threads: one thread drives the backend at a time (Backend's contract); it
// may be a different thread from the one that created it.
// Memory: plain cudaMalloc for everything on the device; page-locked host
// buffers for the step's inputs and the logits read back.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_CUDA_BACKEND_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model_svc/core/backend.h"

namespace llm::cuda {

struct CudaBackendOptions {
  int device = 0;
  // Decode-only steps (every sequence adds one token) of up to
  // max_graph_batch sequences run as a CUDA graph per batch size, captured
  // the second time that size is seen.
  bool graphs = true;
  int max_graph_batch = 128;
  // Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K matrices stay quantized on the
  // device (quant_layout.h: decode through the matrix-vector kernel, prefill
  // through fp16 tiles and cuBLAS); false, or any other quantized type:
  // dequantized to fp16 at load. description() names both by type.
  bool quantized_weights = true;
};

// FailedPrecondition naming the reason when no CUDA device is usable (no
// driver, no device, `device` out of range).
absl::StatusOr<std::unique_ptr<model::Backend>> CreateCudaBackend(
    const CudaBackendOptions& options);

// Device memory that a backend made by CreateCudaBackend holds, in bytes:
// the weights as uploaded (a tied LM head counted once), the KV cache, the
// activation tensors, and scratch (cuBLAS's workspace, converted
// activations, step inputs, the logits readout). Cheap (sums the sizes).
struct CudaMemoryUse {
  int64_t weights = 0, kv_cache = 0, activations = 0, scratch = 0;
  int64_t total() const { return weights + kv_cache + activations + scratch; }
};
// `backend` must come from CreateCudaBackend.
CudaMemoryUse DeviceMemoryUse(const model::Backend& backend);

// OK when a CUDA device is present and usable; otherwise why not. Cheap
// after the first call (the answer is cached).
absl::Status CudaDeviceStatus();

}  // namespace llm::cuda

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_CUDA_BACKEND_H_
