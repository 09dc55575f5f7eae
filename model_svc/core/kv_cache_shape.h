// The shape of a backend's KV cache pool (core/backend.h,
// Backend::AllocKvCache): blocks of `block_size` positions, each holding the
// keys and values of every layer.
#ifndef LLM_MODEL_SVC_CORE_KV_CACHE_SHAPE_H_
#define LLM_MODEL_SVC_CORE_KV_CACHE_SHAPE_H_

#include <cstdint>

namespace llm::model {

// How the KV cache stores keys and values.
enum class KvType {
  kF16,  // IEEE half: half the memory; llama.cpp's default
  kF32,
};

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
  int64_t kv_dim = 0;  // head_count_kv * head_dim
  KvType type = KvType::kF16;

  int64_t element_bytes() const { return type == KvType::kF16 ? 2 : 4; }
  // Bytes of one block (keys and values of every layer).
  int64_t block_bytes() const { return 2 * layers * block_size * kv_dim * element_bytes(); }
};

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_CORE_KV_CACHE_SHAPE_H_
