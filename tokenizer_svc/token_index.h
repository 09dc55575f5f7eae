// TokenIndex: is this byte string a (normal) token, and which? The whole-piece
// lookup of the BPE step (most pre-tokenized pieces are tokens) in one hash
// probe instead of a trie walk, which costs a few dependent memory reads per
// byte.
//
// Built from the normal tokens' ids in increasing order: a duplicated byte
// string maps to its lowest id, and empty strings take no part, exactly as in
// a Trie of the same tokens, so Find(bytes) == trie.Find(bytes) for every byte
// string. It needs no trie: the tokenizer builds it first, and the pair table
// from it (pair_table.h), at load.
//
// Layout: open addressing with linear probing, load factor at most 1/2, 16-byte
// slots holding the id, the length and up to kInlineBytes bytes, so most
// lookups compare within the slot's cache line; longer tokens' bytes live in
// one arena. Memory: 32 bytes per token rounded up to a power of two
// (cl100k_base: 4 MiB; o200k_base: 8 MiB) plus the long tokens' bytes.
// Build cost: one hash and one probe per token.
// Threads: immutable after Build(); Find may run concurrently.
#ifndef LLM_TOKENIZER_SVC_TOKEN_INDEX_H_
#define LLM_TOKENIZER_SVC_TOKEN_INDEX_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer_svc/hash_bytes.h"
#include "tokenizer_svc/trie.h"

namespace llm::tok {

class TokenIndex {
 public:
  static constexpr size_t kInlineBytes = 11;
  // Tokens longer than this make Build() return an empty index.
  static constexpr size_t kMaxTokenBytes = 255;

  TokenIndex() = default;

  // token_bytes[id] is token id's byte string; `ids`, in increasing order,
  // are the ids that take part (a byte string already present keeps its
  // first id; empty ones are skipped). When `canonical` is not null it gets
  // the ids that were entered, in order: those that Find maps back to
  // themselves. Returns an empty index if one of them is longer than
  // kMaxTokenBytes.
  static TokenIndex Build(const std::vector<std::string>& token_bytes,
                          std::span<const uint32_t> ids,
                          std::vector<uint32_t>* canonical = nullptr);

  // Starts loading the slot where Find(bytes) begins into the CPU cache, so
  // that lookups known in advance overlap their memory latency.
  void Prefetch(std::string_view bytes) const {
    if (bytes.empty() || bytes.size() > kMaxTokenBytes || slots_.empty()) return;
    __builtin_prefetch(&slots_[Hash(bytes) >> shift_]);
  }

  // The id of the token whose bytes are `bytes`, or Trie::kNoValue.
  uint32_t Find(std::string_view bytes) const {
    if (bytes.empty() || bytes.size() > kMaxTokenBytes || slots_.empty()) return Trie::kNoValue;
    for (size_t i = Hash(bytes) >> shift_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id == Trie::kNoValue) return Trie::kNoValue;
      if (s.size != bytes.size()) continue;
      if (bytes.size() <= kInlineBytes) {
        if (std::memcmp(s.bytes, bytes.data(), bytes.size()) == 0) return s.id;
      } else {
        uint32_t offset;
        std::memcpy(&offset, s.bytes, sizeof(offset));
        if (std::memcmp(arena_.data() + offset, bytes.data(), bytes.size()) == 0) return s.id;
      }
    }
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t id = Trie::kNoValue;  // kNoValue: empty
    uint8_t size = 0;
    char bytes[kInlineBytes] = {};  // the bytes, or (longer) a uint32 offset into arena_
  };
  static_assert(sizeof(Slot) == 16);

  static uint64_t Hash(std::string_view bytes) { return HashBytes(bytes); }
  std::string_view SlotBytes(const Slot& s) const {
    if (s.size <= kInlineBytes) return std::string_view(s.bytes, s.size);
    uint32_t offset;
    std::memcpy(&offset, s.bytes, sizeof(offset));
    return std::string_view(arena_.data() + offset, s.size);
  }

  std::vector<Slot> slots_;
  std::string arena_;  // bytes of the tokens longer than kInlineBytes
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace llm::tok

#endif  // LLM_TOKENIZER_SVC_TOKEN_INDEX_H_
