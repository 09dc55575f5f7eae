// The CUDA emulator's build of attention.cu: the same source, compiled by the host
// compiler against emu/device.h (through launch.h).
#include "model_svc/backend/cuda/attention.cu"
