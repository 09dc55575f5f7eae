// HashBytes: a fast non-cryptographic 64-bit hash of a short byte string, for
// the tokenizer's tables (piece cache, token index). Word-at-a-time multiply
// and xor-shift; the last 1-7 bytes are read with at most two overlapping
// loads, not a variable-length memcpy (which compiles to a libc call). Not
// seeded: the tables it serves compare the bytes, so collisions cost time, not
// correctness.
// Threads: pure function. Cost: about 2 multiplies per 8 bytes.
#ifndef LLM_TOKENIZER_SVC_HASH_BYTES_H_
#define LLM_TOKENIZER_SVC_HASH_BYTES_H_

#include <cstdint>
#include <cstring>
#include <string_view>

namespace llm::tok {

inline uint64_t HashBytes(std::string_view bytes) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  const char* p = bytes.data();
  const size_t n = bytes.size();
  uint64_t h = n * kMul;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  const size_t rest = n - i;
  if (rest > 0) {
    const char* t = p + i;
    uint64_t w = 0;
    if (rest >= 4) {
      // Two 4-byte loads that overlap when rest < 8; with rest known (it is
      // in h) they determine the bytes.
      uint32_t lo;
      uint32_t hi;
      std::memcpy(&lo, t, 4);
      std::memcpy(&hi, t + rest - 4, 4);
      w = (static_cast<uint64_t>(hi) << 32) | lo;
    } else {
      w = static_cast<uint64_t>(static_cast<uint8_t>(t[0])) |
          static_cast<uint64_t>(static_cast<uint8_t>(t[rest / 2])) << 8 |
          static_cast<uint64_t>(static_cast<uint8_t>(t[rest - 1])) << 16;
    }
    h = (h ^ w) * kMul;
  }
  return (h ^ (h >> 32)) * kMul;
}

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_HASH_BYTES_H_
