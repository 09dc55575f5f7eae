// The CUDA emulator's <cuda_runtime.h>: the runtime API (emu/include/cuda_runtime_api.h).
#include <cuda_runtime_api.h>
