// One way to launch a kernel from the .cu files, for both compilers:
//
//   LaunchKernel<MyKernel<T>>(grid, block, stream, args...);
//
// nvcc: MyKernel<<<grid, block, 0, stream>>>(args...). The host compiler
// (the CUDA emulator's build, emu/): the grid runs on the host. Shared
// arrays are declared with LLM_SHARED_ARRAY(T, name, n) and
// LLM_SHARED_ARRAY2(T, name, n, m) (__shared__ T name[n] / [n][m] under
// nvcc), so that the emulator's race check sees their elements.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_LAUNCH_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_LAUNCH_H_

#if defined(__CUDACC__)

#include <cuda_runtime.h>

#define LLM_SHARED_ARRAY(T, name, n) __shared__ T name[n]
#define LLM_SHARED_ARRAY2(T, name, n, m) __shared__ T name[n][m]

namespace llm::cuda {

template <auto Kernel, typename... Args>
void LaunchKernel(dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
  Kernel<<<grid, block, 0, stream>>>(args...);
}

}  // namespace llm::cuda

#else

#include "model_svc/backend/cuda/emu/launch.h"

#endif

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_LAUNCH_H_
