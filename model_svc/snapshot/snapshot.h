// Session snapshots: a session's tokens and KV blocks as bytes, to move the
// session to another replica or keep it past its process.
//
// Format (little-endian; version 1), an 80-byte header then the payload:
//   0  magic "LLMKVSNP"       8  u32 version (1)     12 u32 flags (bit 0: zstd)
//   16 u64 model fingerprint  24 u32 KV type         28 u32 KV layout
//   32 u32 block size         36 u32 layers          40 u64 kv_dim
//   48 u64 token count        56 u64 raw payload bytes
//   64 u64 stored payload bytes (the rest of the input)
//   72 u64 checksum of bytes [0, 72) and the stored payload (Checksum64)
// The raw payload is the tokens (int32 each) then ceil(tokens / block size)
// KV blocks of the layout's block_bytes() each, positions past the last token
// zero; stored zstd-compressed (one frame) when that saves a sixteenth or
// more, raw otherwise.
//
// Decode treats its input as untrusted: every count and size is bounded
// against the input and the expected layout before use, and nothing is
// allocated beyond what the limits allow. Errors: a header cut short, a
// payload shorter than the header says, a wrong checksum or a bad zstd frame
// DATA_LOSS; not a snapshot (magic), unknown flags, sizes that disagree,
// trailing bytes or a token id out of the vocabulary INVALID_ARGUMENT; a
// snapshot of another model, KV type, layout, block size or shape, or of
// another version, FAILED_PRECONDITION naming which; more tokens than
// `max_tokens` OUT_OF_RANGE. Each message names the value and the bound.
//
// Threads: plain functions, thread-safe. Cost: linear in the bytes (one
// checksum pass, zstd level 1 when encoding).
#ifndef LLM_MODEL_SVC_SNAPSHOT_SNAPSHOT_H_
#define LLM_MODEL_SVC_SNAPSHOT_SNAPSHOT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace llm::snapshot {

inline constexpr uint32_t kVersion = 1;
inline constexpr int64_t kHeaderBytes = 80;
// KV types (SnapshotLayout::kv_type): of keys and values alike, or
// KvTypeCode's for different ones.
inline constexpr uint32_t kKvF16 = 0;
inline constexpr uint32_t kKvF32 = 1;
inline constexpr uint32_t kKvQ8_0 = 2;  // GGUF's Q8_0 blocks, 34 bytes per 32 values
// The KV type of keys of type k and values of type v (kKv* each): k when
// they are alike, else k | (v + 1) << 8.
constexpr uint32_t KvTypeCode(uint32_t k, uint32_t v) { return k == v ? k : k | (v + 1) << 8; }
constexpr uint32_t KeyType(uint32_t code) { return code & 0xff; }
constexpr uint32_t ValueType(uint32_t code) {
  return (code >> 8) != 0 ? (code >> 8) - 1 : code & 0xff;
}
// Bytes of n values of kKv* type t (n a multiple of 32 for kKvQ8_0).
constexpr int64_t KvRowBytes(uint32_t t, int64_t n) {
  return t == kKvQ8_0 ? n / 32 * 34 : t == kKvF32 ? 4 * n : 2 * n;
}
// "f16", "q8_0", or "k q8_0, v f16" for different types.
std::string KvTypeName(uint32_t code);
// KV layouts (SnapshotLayout::kv_layout): the CPU backend's, per block and
// layer the keys then the values, each [KV head][slot][head_dim].
inline constexpr uint32_t kLayoutCpuHeadMajor = 1;

// What a snapshot's KV bytes mean; a snapshot only loads where every field
// matches.
struct SnapshotLayout {
  uint64_t fingerprint = 0;  // ModelFingerprint of the GGUF (engine/fingerprint.h)
  uint32_t kv_type = kKvF16;
  uint32_t kv_layout = kLayoutCpuHeadMajor;
  uint32_t block_size = 0;  // positions per block
  uint32_t layers = 0;
  uint64_t kv_dim = 0;  // KV heads * head_dim

  // Keys and values of every layer for block_size positions.
  int64_t block_bytes() const {
    const auto dim = static_cast<int64_t>(kv_dim);
    return int64_t{layers} * block_size *
           (KvRowBytes(KeyType(kv_type), dim) + KvRowBytes(ValueType(kv_type), dim));
  }
  bool operator==(const SnapshotLayout&) const = default;
};

struct Snapshot {
  SnapshotLayout layout;
  std::vector<int32_t> tokens;
  // ceil(tokens / block_size) blocks of layout.block_bytes() each.
  std::string kv;
};

struct DecodeLimits {
  int64_t max_tokens = 0;  // the replica's context length
  int64_t vocab_size = 0;  // token ids must lie in [0, vocab_size)
};

// The bytes of `s` (its kv must hold the tokens' blocks: INVALID_ARGUMENT
// otherwise). `compress`: try zstd.
absl::StatusOr<std::string> Encode(const Snapshot& s, bool compress = true);

// The most bytes Encode makes for `tokens` tokens of `layout`: the header
// and the raw payload (it keeps zstd's output only when smaller).
int64_t MaxEncodedBytes(const SnapshotLayout& layout, int64_t tokens);

// Parses untrusted bytes for a replica of layout `expect` (see above).
absl::StatusOr<Snapshot> Decode(std::string_view bytes, const SnapshotLayout& expect,
                                const DecodeLimits& limits);

// A 64-bit checksum (multiply-xor over 8-byte words; not cryptographic),
// continued from `seed`.
uint64_t Checksum64(std::string_view bytes, uint64_t seed);

}  // namespace llm::snapshot

#endif  // LLM_MODEL_SVC_SNAPSHOT_SNAPSHOT_H_
