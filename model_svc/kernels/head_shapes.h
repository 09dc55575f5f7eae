// The fixed shapes of the attention kernels (DotRowsHeads, AxpyRowsHeads),
// dispatched the same way by vec_avx2.cc and vec_avx512.cc.
//
// Internal linkage (an unnamed namespace), as in exp_libm.h: each kernel file
// instantiates its own copy under its own target flags.
#ifndef LLM_MODEL_SVC_KERNELS_HEAD_SHAPES_H_
#define LLM_MODEL_SVC_KERNELS_HEAD_SHAPES_H_

#include <cstdint>

namespace llm::kernels::vec_internal {
namespace {  // NOLINT(build/namespaces): one copy per kernel file, see above

// Calls kernel.template operator()<kN, G>() for head dimensions kN of 64,
// 128 and 256 (Gemma 3) and G = g heads in [kMinHeads, 4]; false (nothing called) otherwise.
template <int kMinHeads, class Kernel>
bool WithHeadShape(int64_t n, int g, Kernel kernel) {
  auto heads = [&]<int kN>() {
    switch (g) {
      case 1:
        if constexpr (kMinHeads <= 1) {
          kernel.template operator()<kN, 1>();
          return true;
        } else {
          return false;
        }
      case 2:
        kernel.template operator()<kN, 2>();
        return true;
      case 3:
        kernel.template operator()<kN, 3>();
        return true;
      case 4:
        kernel.template operator()<kN, 4>();
        return true;
      default:
        return false;
    }
  };
  if (n == 64) return heads.template operator()<64>();
  if (n == 128) return heads.template operator()<128>();
  if (n == 256) return heads.template operator()<256>();
  return false;
}

}  // namespace
}  // namespace llm::kernels::vec_internal

#endif  // LLM_MODEL_SVC_KERNELS_HEAD_SHAPES_H_
