// Included by the files of AVX-512 VNNI weight kernels (quant_avx512.cc,
// quant_avx512_decode.cc): fails the build when the file is not compiled for
// that target (model_svc/CMakeLists.txt sets the flags), and silences GCC
// 12's false warnings on its intrinsics.
#ifndef LLM_MODEL_SVC_KERNELS_AVX512_VNNI_TARGET_H_
#define LLM_MODEL_SVC_KERNELS_AVX512_VNNI_TARGET_H_

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512VNNI__)
#error "AVX-512 VNNI kernels must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

// GCC 12 warns that the _mm512_undefined_*() inside many unmasked AVX-512
// intrinsics "may be used uninitialized" once they are inlined (GCC bug
// 105593, fixed in GCC 13). The pragmas hold for the rest of the including
// file.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#endif  // LLM_MODEL_SVC_KERNELS_AVX512_VNNI_TARGET_H_
