// The CUDA emulator's side of model_svc/backend/cuda/launch.h: a launch
// runs the kernel's grid on the host (or is recorded by a capturing
// stream), with the kernel's name for the emulator's reports.
#ifndef LLM_MODEL_SVC_BACKEND_CUDA_EMU_LAUNCH_H_
#define LLM_MODEL_SVC_BACKEND_CUDA_EMU_LAUNCH_H_

#include <string>
#include <string_view>

#include "model_svc/backend/cuda/emu/device.h"
#include "model_svc/backend/cuda/emu/emulator.h"

namespace llm::cuda::emu {

template <auto Kernel>
const char* KernelName() {
  static const std::string name = KernelNameFrom(__PRETTY_FUNCTION__);
  return name.c_str();
}

}  // namespace llm::cuda::emu

namespace llm::cuda {

template <auto Kernel, typename... Args>
void LaunchKernel(dim3 grid, dim3 block, cudaStream_t stream, Args... args) {
  const char* name = emu::KernelName<Kernel>();
  if (emu::CheckLaunch(name, grid, block) != cudaSuccess) return;
  emu::Enqueue(stream, [=] { return emu::RunGrid(name, grid, block, [&] { Kernel(args...); }); });
}

}  // namespace llm::cuda

#endif  // LLM_MODEL_SVC_BACKEND_CUDA_EMU_LAUNCH_H_
