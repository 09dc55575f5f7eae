// Which GGUF tensor types can be matrix weights, and their row shapes: the
// rules the model loader checks a file against and every backend takes as
// given.
//
// Supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS (their blocks: blocks.h), the lists below.
//
// Thread safety: pure functions. Errors: absl::Status for what a file can get
// wrong; a broken precondition (an unknown type where a supported one is
// required) aborts.
#ifndef LLM_MODEL_SVC_FORMATS_WEIGHT_FORMATS_H_
#define LLM_MODEL_SVC_FORMATS_WEIGHT_FORMATS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "common/gguf/gguf.h"

// The weight formats, written once. Every switch over them is generated from
// these lists: IsSupportedWeightType and BlockElements here, and each
// instruction set's dispatch in kernels/ (quant_avx2.cc, quant_avx512.cc). A
// new format is one line here, plus its block layout (blocks.h), reference
// decoding (block_decode.h, dequantize.cc, the scalar DotRow) and SIMD format
// struct (kernels/quant_x86_formats.h).
//
// LLM_FLOAT_WEIGHT_FORMATS(X): X(Name) for each float type: TensorType::kName,
//   one element per block.
// LLM_QUANT_WEIGHT_FORMATS(X): X(Name, block_elements) for each quantized
//   type: TensorType::kName and the kernels' format struct Name, and the
//   elements of one block (32, or 256 for a K-quant super-block).
#define LLM_FLOAT_WEIGHT_FORMATS(X) X(F32) X(F16) X(BF16)
#define LLM_QUANT_WEIGHT_FORMATS(X) \
  X(Q4_0, 32)                       \
  X(Q4_1, 32)                       \
  X(Q5_0, 32)                       \
  X(Q5_1, 32)                       \
  X(Q8_0, 32)                       \
  X(Q2_K, 256)                      \
  X(Q3_K, 256)                      \
  X(Q4_K, 256)                      \
  X(Q5_K, 256)                      \
  X(Q6_K, 256)                      \
  X(IQ4_NL, 32)                     \
  X(IQ4_XS, 256)

namespace llm::formats {

using gguf::TensorType;

// True when `type` is a supported matrix weight type (above).
bool IsSupportedWeightType(TensorType type);

// OK when a matrix of `type` with rows of `cols` elements can be used:
// the type is supported and `cols` is a multiple of its block size (and of 32,
// the sub-block every format's scales and the kernels' activation blocks
// cover). Otherwise InvalidArgument naming the type.
absl::Status CheckWeightShape(TensorType type, int64_t cols);

// Bytes of one row of `cols` elements (any GGUF type; `cols` a multiple of
// its block size).
size_t RowBytes(TensorType type, int64_t cols);

// Elements per weight block of a supported type (1 for the float types).
int64_t BlockElements(TensorType type);

namespace internal {
// Aborts with `what` (a broken precondition, e.g. an unsupported type).
[[noreturn]] void Fatal(const char* what);
}  // namespace internal

}  // namespace llm::formats

#endif  // LLM_MODEL_SVC_FORMATS_WEIGHT_FORMATS_H_
