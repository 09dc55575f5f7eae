// A row-major fp32 matrix in a backend's memory (core/backend.h).
#ifndef LLM_MODEL_SVC_CORE_TENSOR_H_
#define LLM_MODEL_SVC_CORE_TENSOR_H_

#include <cstdint>

namespace llm::model {

// Host memory for the CPU backend, device memory for CUDA; the backend that
// allocated it owns it (Backend::AllocTensor).
struct Tensor {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  // The first `n` rows (n <= rows).
  Tensor Rows(int64_t n) const { return Tensor{data, n, cols}; }
};

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_CORE_TENSOR_H_
