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
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ8_0:
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_NL:
    case TensorType::kIQ4_XS:
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
    case TensorType::kF32:
    case TensorType::kF16:
    case TensorType::kBF16:
      return 1;
    case TensorType::kQ4_0:
    case TensorType::kQ4_1:
    case TensorType::kQ5_0:
    case TensorType::kQ5_1:
    case TensorType::kQ8_0:
    case TensorType::kIQ4_NL:
      return 32;
    case TensorType::kQ2_K:
    case TensorType::kQ3_K:
    case TensorType::kQ4_K:
    case TensorType::kQ5_K:
    case TensorType::kQ6_K:
    case TensorType::kIQ4_XS:
      return kSuperBlock;
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
