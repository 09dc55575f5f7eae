// The shape of a backend's KV cache pool (core/backend.h,
// Backend::AllocKvCache): blocks of `block_size` positions, each holding the
// keys and values of every layer.
#ifndef LLM_MODEL_SVC_CORE_KV_CACHE_SHAPE_H_
#define LLM_MODEL_SVC_CORE_KV_CACHE_SHAPE_H_

#include <cstdint>

namespace llm::model {

// How the KV cache stores keys or values (each chosen on its own).
enum class KvType {
  kF16,  // IEEE half: half the memory; llama.cpp's default
  kF32,
  // GGUF's Q8_0 blocks (34 bytes: fp16 scale d, 32 int8 q; x ~= d * q), a
  // row per (head, slot): 1.0625 bytes a value. Needs head_dim % 32 == 0.
  kQ8_0,
};

// Bytes of one row of `n` values of type t (n a multiple of 32 for kQ8_0).
inline int64_t KvRowBytes(KvType t, int64_t n) {
  switch (t) {
    case KvType::kF32:
      return 4 * n;
    case KvType::kQ8_0:
      return n / 32 * 34;
    case KvType::kF16:
      break;
  }
  return 2 * n;
}

// Backend::KvLayout values: how a block's bytes are laid out.
inline constexpr int32_t kKvLayoutNone = 0;  // not readable (no snapshots)
// Per layer, the keys then the values, each [KV head][slot][head_dim] (the
// CPU backend's).
inline constexpr int32_t kKvLayoutCpu = 1;

// The shape of the KV cache pool.
struct KvCacheShape {
  int32_t num_blocks = 0;
  int32_t block_size = 16;  // positions per block
  int64_t layers = 0;
  int64_t kv_dim = 0;            // head_count_kv * head_dim
  KvType k_type = KvType::kF16;  // the keys'
  KvType v_type = KvType::kF16;  // the values'

  // Bytes of one position's keys (values) of one layer, every KV head.
  int64_t k_bytes() const { return KvRowBytes(k_type, kv_dim); }
  int64_t v_bytes() const { return KvRowBytes(v_type, kv_dim); }
  // Bytes of one block (keys and values of every layer).
  int64_t block_bytes() const { return layers * block_size * (k_bytes() + v_bytes()); }
};

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_CORE_KV_CACHE_SHAPE_H_
