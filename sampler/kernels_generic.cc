// Baseline kernels (4-wide GCC vectors: SSE2 on x86-64) and the run-time
// choice between them and the AVX2 build in kernels_avx2.cc.
#include "sampler/kernels_impl.h"

namespace llm::sampler::internal {

const Kernels& BaselineKernels() {
  static constexpr Kernels kKernels = MakeKernels<F4>("baseline");
  return kKernels;
}

const Kernels* Avx2Kernels() {
#if defined(LLM_SAMPLER_HAVE_AVX2)
  if (__builtin_cpu_supports("avx2")) return &Avx2KernelsUnchecked();
#endif
  return nullptr;
}

const Kernels& BestKernels() {
  const Kernels* avx2 = Avx2Kernels();
  return avx2 != nullptr ? *avx2 : BaselineKernels();
}

}  // namespace llm::sampler::internal
