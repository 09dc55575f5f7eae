#include "model_svc/formats/dequantize.h"

#include <cstring>

#include "common/half.h"
#include "model_svc/formats/block_decode.h"
#include "model_svc/formats/blocks.h"
#include "model_svc/formats/weight_formats.h"

namespace llm::formats {

void DequantizeRow(TensorType type, const void* row, float* out, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(row);
  int q[32];
  switch (type) {
    case TensorType::kF32:
      std::memcpy(out, p, static_cast<size_t>(n) * sizeof(float));
      return;
    case TensorType::kF16:
      for (int64_t i = 0; i < n; ++i) out[i] = Half(p + 2 * i);
      return;
    case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) out[i] = Bf16ToFloat(LoadU16(p + 2 * i));
      return;
    case TensorType::kQ4_0:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ4_0Bytes, out += 32) {
        const float d = Half(p);
        DecodeNibbles(p + 2, 8, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]);
      }
      return;
    case TensorType::kQ4_1:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ4_1Bytes, out += 32) {
        const float d = Half(p), m = Half(p + 2);
        DecodeNibbles(p + 4, 0, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]) + m;
      }
      return;
    case TensorType::kQ5_0:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ5_0Bytes, out += 32) {
        const float d = Half(p);
        DecodeFiveBits(p + 2, p + 6, 16, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]);
      }
      return;
    case TensorType::kQ5_1:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ5_1Bytes, out += 32) {
        const float d = Half(p), m = Half(p + 2);
        DecodeFiveBits(p + 4, p + 8, 0, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]) + m;
      }
      return;
    case TensorType::kQ8_0:
      for (int64_t b = 0; b < n / 32; ++b, p += kQ8_0Bytes, out += 32) {
        const float d = Half(p);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(static_cast<int8_t>(p[2 + l]));
      }
      return;
    case TensorType::kQ4_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ4_KBytes) {
        for (int j = 0; j < 8; ++j, out += 32) {
          float scale, min;
          DecodeQ4K(p, j, q, &scale, &min);
          for (int l = 0; l < 32; ++l) out[l] = scale * static_cast<float>(q[l]) - min;
        }
      }
      return;
    case TensorType::kQ6_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ6_KBytes) {
        const float d = Half(p + 208);
        for (int j = 0; j < 8; ++j, out += 32) {
          DecodeQ6K(p, j, q);
          const float s0 = d * Q6KScale(p, 2 * j), s1 = d * Q6KScale(p, 2 * j + 1);
          for (int l = 0; l < 16; ++l) out[l] = s0 * static_cast<float>(q[l]);
          for (int l = 16; l < 32; ++l) out[l] = s1 * static_cast<float>(q[l]);
        }
      }
      return;
    case TensorType::kQ5_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ5_KBytes) {
        for (int j = 0; j < 8; ++j, out += 32) {
          float scale, min;
          DecodeQ5K(p, j, q, &scale, &min);
          for (int l = 0; l < 32; ++l) out[l] = scale * static_cast<float>(q[l]) - min;
        }
      }
      return;
    case TensorType::kQ3_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ3_KBytes) {
        const float d = Half(p + 108);
        int8_t sc[16];
        Q3KScales(p + 96, sc);
        for (int j = 0; j < 8; ++j, out += 32) {
          DecodeQ3K(p, j, q);
          const float s0 = d * sc[2 * j], s1 = d * sc[2 * j + 1];
          for (int l = 0; l < 16; ++l) out[l] = s0 * static_cast<float>(q[l]);
          for (int l = 16; l < 32; ++l) out[l] = s1 * static_cast<float>(q[l]);
        }
      }
      return;
    case TensorType::kQ2_K:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kQ2_KBytes) {
        const float d = Half(p + 80), dmin = Half(p + 82);
        for (int j = 0; j < 8; ++j, out += 32) {
          DecodeTwoBits(p + 16, j, q);
          for (int h = 0; h < 2; ++h) {
            const uint8_t sm = p[2 * j + h];
            const float dl = d * static_cast<float>(sm & 0x0F);
            const float ml = dmin * static_cast<float>(sm >> 4);
            for (int l = 16 * h; l < 16 * h + 16; ++l) out[l] = dl * static_cast<float>(q[l]) - ml;
          }
        }
      }
      return;
    case TensorType::kIQ4_NL:
      for (int64_t b = 0; b < n / 32; ++b, p += kIQ4_NLBytes, out += 32) {
        const float d = Half(p);
        DecodeIQ4(p + 2, q);
        for (int l = 0; l < 32; ++l) out[l] = d * static_cast<float>(q[l]);
      }
      return;
    case TensorType::kIQ4_XS:
      for (int64_t b = 0; b < n / kSuperBlock; ++b, p += kIQ4_XSBytes) {
        const float d = Half(p);
        for (int j = 0; j < 8; ++j, out += 32) {
          const float dl = d * static_cast<float>(IQ4XSScale(p, j));
          DecodeIQ4(p + 8 + 16 * j, q);
          for (int l = 0; l < 32; ++l) out[l] = dl * static_cast<float>(q[l]);
        }
      }
      return;
    default:
      internal::Fatal("DequantizeRow: unsupported weight type");
  }
}

}  // namespace llm::formats
