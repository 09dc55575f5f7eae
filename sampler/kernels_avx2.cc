// AVX2 build of the kernels (8-wide vectors). Compiled with -mavx2 (no FMA);
// nothing here may run before Avx2Kernels() has checked the CPU.
#include "sampler/kernels_impl.h"

#if !defined(__AVX2__)
#error "kernels_avx2.cc must be compiled with -mavx2"
#endif

namespace llm::sampler::internal {

const Kernels& Avx2KernelsUnchecked() {
  static constexpr Kernels kKernels = MakeKernels<F8>("avx2");
  return kKernels;
}

}  // namespace llm::sampler::internal
