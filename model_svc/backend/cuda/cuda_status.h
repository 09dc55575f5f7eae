// CUDA runtime and cuBLAS errors as absl::Status. The CUDA backend checks
// every runtime and cuBLAS call with these; nothing here aborts.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_CUDA_STATUS_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_CUDA_STATUS_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string_view>

#include "absl/status/status.h"

namespace llm::cuda {

// OK for cudaSuccess; otherwise an error naming `what` and CUDA's message:
// ResourceExhausted for out-of-memory, FailedPrecondition when no device or
// driver is usable, Internal for the rest.
absl::Status CudaStatus(cudaError_t error, std::string_view what);

// OK for CUBLAS_STATUS_SUCCESS; otherwise Internal (ResourceExhausted for
// allocation failures) naming `what` and the cuBLAS status.
absl::Status CublasStatus(cublasStatus_t status, std::string_view what);

}  // namespace llm::cuda

#define LLM_CUDA_RETURN_IF_ERROR(call, what)                                   \
  do {                                                                         \
    ::absl::Status llm_cuda_status_ = ::llm::cuda::CudaStatus((call), (what)); \
    if (!llm_cuda_status_.ok()) return llm_cuda_status_;                       \
  } while (0)

#define LLM_CUBLAS_RETURN_IF_ERROR(call, what)                                   \
  do {                                                                           \
    ::absl::Status llm_cuda_status_ = ::llm::cuda::CublasStatus((call), (what)); \
    if (!llm_cuda_status_.ok()) return llm_cuda_status_;                         \
  } while (0)

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_CUDA_STATUS_H_
