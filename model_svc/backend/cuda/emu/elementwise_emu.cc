// The CUDA emulator's build of elementwise.cu: the same source, compiled by the host
// compiler against emu/device.h (through launch.h).
#include "model_svc/backend/cuda/elementwise.cu"
