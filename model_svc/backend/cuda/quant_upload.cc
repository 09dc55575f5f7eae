#include "model_svc/backend/cuda/quant_upload.h"

#include <cstring>

namespace llm::cuda {

std::optional<QuantKind> QuantKindOf(gguf::TensorType type) {
  switch (type) {
    case gguf::TensorType::kQ8_0:
      return QuantKind::kQ8_0;
    case gguf::TensorType::kQ4_0:
      return QuantKind::kQ4_0;
    case gguf::TensorType::kQ4_1:
      return QuantKind::kQ4_1;
    default:
      return std::nullopt;
  }
}

void RepackQuant(const uint8_t* src, int64_t row_bytes, const QuantMatrix& layout, uint8_t* dst) {
  const int32_t qb = layout.quant_bytes(), sb = layout.scale_bytes();
  const int64_t block_bytes = qb + sb;  // GGUF: the scales (d, then m) first
  std::memset(dst, 0, static_cast<size_t>(layout.bytes()));
  uint8_t* scales = dst + layout.scales_offset();
  for (int64_t r = 0; r < layout.rows; ++r) {
    for (int64_t b = 0; b < layout.blocks(); ++b) {
      const uint8_t* block = src + r * row_bytes + b * block_bytes;
      const int64_t s = layout.slot(r, b);
      std::memcpy(scales + s * sb, block, sb);
      std::memcpy(dst + s * qb, block + sb, qb);
    }
  }
}

}  // namespace llm::cuda
