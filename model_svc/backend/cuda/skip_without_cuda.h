// Test support: GTEST_SKIP, with CUDA's reason, where no device is usable.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_SKIP_WITHOUT_CUDA_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_SKIP_WITHOUT_CUDA_H_

#include "gtest/gtest.h"
#include "model_svc/backend/cuda/cuda_backend.h"

#define SKIP_WITHOUT_CUDA()                                                                     \
  do {                                                                                          \
    if (absl::Status s = ::llm::cuda::CudaDeviceStatus(); !s.ok()) GTEST_SKIP() << s.message(); \
  } while (0)

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_SKIP_WITHOUT_CUDA_H_
