// The CUDA emulator's build of quant.cu: the same source, compiled by the host
// compiler against emu/device.h (through launch.h).
#include "model_svc/backend/cuda/quant.cu"
