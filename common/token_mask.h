// A token mask: the set of token ids a constrained generation may take next
// (a grammar's allowed tokens), as a bitset over one vocabulary. The client
// fills one per step and sends it with the step (llm.v1.TokenMask, in the
// cheapest of three wire encodings: common/token_mask_proto.h); the model
// service decodes it with the validating constructors below and applies it
// to the logits before it encodes them (model_svc/core/logits.h).
//
// Layout: bit i of words()[i / 64] (bit i % 64, least significant first) is
// token i; bits at and past vocab_size() are always zero. On a
// little-endian host the words' bytes are the wire's `bitset` bytes, and
// the same memory as xgrammar's int32 bitmask of the vocabulary.
//
// Threads: a value type; const methods may run concurrently.
// Cost: vocab_size / 8 bytes (6 KiB for a 49k vocabulary); CountAllowed and
// the full-mask checks are O(vocab / 64), Allow / Disallow / allowed O(1).
#ifndef LLM_COMMON_TOKEN_MASK_H_
#define LLM_COMMON_TOKEN_MASK_H_

#include <bit>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace llm {

class TokenMask {
 public:
  // A mask of an empty vocabulary (allows nothing).
  TokenMask() = default;
  // Every id of a vocabulary of `vocab_size` tokens allowed, or none.
  // vocab_size must be in [0, 2^31).
  static TokenMask AllowAll(int64_t vocab_size);
  static TokenMask AllowNone(int64_t vocab_size);

  // Decoders of the wire's encodings (llm.v1.TokenMask), for a vocabulary of
  // `vocab_size` tokens (>= 1). Each refuses, with INVALID_ARGUMENT naming
  // `field` (e.g. "mask") and what is wrong: a bitset of a size other than
  // ceil(vocab_size / 8) bytes or with a bit set past the vocabulary; an id
  // list longer than the vocabulary, not strictly increasing (unsorted or
  // repeated ids) or with an id >= vocab_size; and a mask that allows no
  // token. Cost: O(vocab_size / 64 + ids), one allocation.
  //   bitset: bit i of byte i / 8 (least significant first) allows token i.
  static absl::StatusOr<TokenMask> FromBitset(std::string_view bytes, int64_t vocab_size,
                                              std::string_view field);
  //   allowed: exactly these ids.
  static absl::StatusOr<TokenMask> FromAllowed(std::span<const uint32_t> ids, int64_t vocab_size,
                                               std::string_view field);
  //   disallowed: every id but these.
  static absl::StatusOr<TokenMask> FromDisallowed(std::span<const uint32_t> ids, int64_t vocab_size,
                                                  std::string_view field);

  int64_t vocab_size() const { return vocab_size_; }
  // Whether `id` is allowed (false outside [0, vocab_size)).
  bool allowed(int64_t id) const {
    return id >= 0 && id < vocab_size_ && ((words_[id >> 6] >> (id & 63)) & 1) != 0;
  }
  // `id` must be in [0, vocab_size).
  void Allow(int64_t id) { words_[id >> 6] |= uint64_t{1} << (id & 63); }
  void Disallow(int64_t id) { words_[id >> 6] &= ~(uint64_t{1} << (id & 63)); }

  // How many ids are allowed.
  int64_t CountAllowed() const;
  bool AllowsAll() const { return CountAllowed() == vocab_size_; }
  bool AllowsNone() const { return CountAllowed() == 0; }

  // ceil(vocab_size / 64) words, layout as above. A writer of mutable_words
  // (a grammar matcher filling it) must leave the bits past the vocabulary
  // zero.
  std::span<const uint64_t> words() const { return words_; }
  std::span<uint64_t> mutable_words() { return words_; }

  // Calls f(id) (id a uint32_t) for every allowed id (`allowed` true), or
  // every disallowed id of the vocabulary (false), in increasing order.
  // O(vocab_size / 64 + ids).
  template <typename F>
  void ForEachId(bool allowed, F f) const {
    for (size_t i = 0; i < words_.size(); ++i) {
      uint64_t w = allowed ? words_[i] : ~words_[i];
      if (!allowed && i + 1 == words_.size() && vocab_size_ % 64 != 0) {
        w &= (uint64_t{1} << (vocab_size_ % 64)) - 1;  // not the ids past the vocabulary
      }
      for (; w != 0; w &= w - 1) f(static_cast<uint32_t>(i * 64 + std::countr_zero(w)));
    }
  }

  friend bool operator==(const TokenMask& a, const TokenMask& b) = default;

 private:
  explicit TokenMask(int64_t vocab_size);

  int64_t vocab_size_ = 0;
  std::vector<uint64_t> words_;
};

// The wire's three encodings of a mask (llm.v1.TokenMask: a bitset, a list
// of the allowed ids, a list of the disallowed ids), and their sizes; the
// messages themselves are written by common/token_mask_proto.h (protobuf),
// the sizes are here for code without protobuf (the C interface of the
// grammar engine, client/constrain/c_api.h).
enum class TokenMaskEncoding { kBitset, kAllowed, kDisallowed };

// The serialized size of `mask` as a v1::TokenMask in `encoding`.
int64_t TokenMaskWireBytes(const TokenMask& mask, TokenMaskEncoding encoding);
// The encoding with the fewest bytes (on a tie the first of bitset,
// allowed, disallowed). O(vocab_size / 64), plus the ids of a list that is
// no larger than the bitset.
TokenMaskEncoding CheapestTokenMaskEncoding(const TokenMask& mask);

}  // namespace llm

#endif  // LLM_COMMON_TOKEN_MASK_H_
