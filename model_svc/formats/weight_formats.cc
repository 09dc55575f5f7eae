#include "model_svc/formats/weight_formats.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "model_svc/formats/blocks.h"

namespace llm::formats {

bool IsSupportedWeightType(TensorType type) {
  switch (type) {
#define LLM_CASE(name, ...) case TensorType::k##name:
    LLM_FLOAT_WEIGHT_FORMATS(LLM_CASE)
    LLM_QUANT_WEIGHT_FORMATS(LLM_CASE)
#undef LLM_CASE
    return true;
    default:
      return false;
  }
}

namespace {

std::string TypeName(TensorType type) {
  const gguf::TensorTypeTraits* traits = gguf::FindTensorTypeTraits(static_cast<uint32_t>(type));
  if (traits != nullptr) return std::string(traits->name);
  return absl::StrCat("type id ", static_cast<uint32_t>(type));
}

}  // namespace

absl::Status CheckWeightShape(TensorType type, int64_t cols) {
  if (!IsSupportedWeightType(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CPU kernels do not support weight type ", TypeName(type)));
  }
  const int64_t block = BlockElements(type);
  const int64_t multiple = std::max<int64_t>(block, kSubBlock);
  if (cols <= 0 || cols % multiple != 0) {
    return absl::InvalidArgumentError(absl::StrCat("weight type ", TypeName(type), ": row length ",
                                                   cols, " is not a positive multiple of ",
                                                   multiple));
  }
  return absl::OkStatus();
}

size_t RowBytes(TensorType type, int64_t cols) {
  const gguf::TensorTypeTraits* traits = gguf::FindTensorTypeTraits(static_cast<uint32_t>(type));
  if (traits == nullptr) internal::Fatal("RowBytes: unknown tensor type");
  return static_cast<size_t>(cols) / traits->block_elements * traits->block_bytes;
}

int64_t BlockElements(TensorType type) {
  switch (type) {
#define LLM_FLOAT_CASE(name) case TensorType::k##name:
    LLM_FLOAT_WEIGHT_FORMATS(LLM_FLOAT_CASE)
#undef LLM_FLOAT_CASE
    return 1;
#define LLM_QUANT_CASE(name, block_elements) \
  case TensorType::k##name:                  \
    return block_elements;
    LLM_QUANT_WEIGHT_FORMATS(LLM_QUANT_CASE)
#undef LLM_QUANT_CASE
    default:
      internal::Fatal("unsupported weight type");
  }
}

namespace internal {

[[noreturn]] void Fatal(const char* what) {
  std::fprintf(stderr, "llm::formats: %s\n", what);
  std::abort();
}

}  // namespace internal
}  // namespace llm::formats
