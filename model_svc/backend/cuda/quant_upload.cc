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
    case gguf::TensorType::kQ4_K:
      return QuantKind::kQ4_K;
    case gguf::TensorType::kQ5_K:
      return QuantKind::kQ5_K;
    case gguf::TensorType::kQ6_K:
      return QuantKind::kQ6_K;
    default:
      return std::nullopt;
  }
}

void RepackQuant(const uint8_t* src, int64_t row_bytes, const QuantMatrix& layout, uint8_t* dst) {
  const int32_t qb = layout.quant_bytes(), sb = layout.scale_bytes();
  const int64_t block_bytes = qb + sb;
  // GGUF's block: the scale bytes first (d, then m or dmin and the packed
  // scales), but Q6_K's last (ql, qh, then scales and d).
  const int32_t scales_at = layout.kind == QuantKind::kQ6_K ? qb : 0;
  const int32_t quants_at = layout.kind == QuantKind::kQ6_K ? 0 : sb;
  std::memset(dst, 0, static_cast<size_t>(layout.bytes()));
  uint8_t* scales = dst + layout.scales_offset();
  for (int64_t r = 0; r < layout.rows; ++r) {
    for (int64_t b = 0; b < layout.blocks(); ++b) {
      const uint8_t* block = src + r * row_bytes + b * block_bytes;
      std::memcpy(scales + layout.slot(r, b) * sb, block + scales_at, sb);
      for (int32_t c = 0; c < layout.chunks(); ++c) {
        std::memcpy(dst + layout.chunk_offset(r, b, c), block + quants_at + c * kQuantChunk,
                    kQuantChunk);
      }
    }
  }
}

}  // namespace llm::cuda
