// The CUDA emulator's <cublas_v2.h>: the cuBLAS calls the CUDA backend
// makes, with cuBLAS's names, status codes and column-major definition
// (emu/cublas.cc): C = alpha op(A) op(B) + beta C, op(X) = X or X^T, each
// matrix column-major with its leading dimension; the inputs are read in
// their declared types (fp16, bf16, fp32) and accumulated in fp32. Invalid
// arguments give cuBLAS's status; an operand that its leading dimension
// and shape take beyond its device allocation fails the call with
// CUBLAS_STATUS_EXECUTION_FAILED, the detail on stderr (on a GPU it would
// read other memory or fault).
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_EMU_INCLUDE_CUBLAS_V2_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_EMU_INCLUDE_CUBLAS_V2_H_

#include <cuda_runtime_api.h>

#include <cstddef>

enum cublasStatus_t : int {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};

enum cublasOperation_t : int { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 };
enum cublasComputeType_t : int { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_16F = 74 };
enum cublasGemmAlgo_t : int { CUBLAS_GEMM_DEFAULT = -1 };

using cublasHandle_t = struct cublasContext*;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes);
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C,
                            cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_EMU_INCLUDE_CUBLAS_V2_H_
