#include "common/token_mask.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm {
namespace {

int64_t WordsFor(int64_t vocab_size) { return (vocab_size + 63) / 64; }

// INVALID_ARGUMENT for a vocabulary size no mask can have.
absl::Status CheckVocabSize(int64_t vocab_size, std::string_view field) {
  if (vocab_size >= 1 && vocab_size <= INT32_MAX) return absl::OkStatus();
  return absl::InvalidArgumentError(
      StrCat(field, ": no mask fits a vocabulary of ", vocab_size, " tokens"));
}

int64_t VarintBytes(uint64_t v) { return v < 128 ? 1 : (std::bit_width(v) + 6) / 7; }

// The bytes of a length-delimited field of `payload` bytes (a one-byte tag).
int64_t FieldBytes(int64_t payload) { return 1 + VarintBytes(payload) + payload; }

// The bytes of a TokenMask holding the ids whose bit is `value` as a list,
// or -1 when it would be larger than `limit` bytes.
int64_t ListBytes(const TokenMask& mask, bool value, int64_t count, int64_t limit) {
  if (count > limit) return -1;  // a varint is at least a byte
  int64_t payload = 0;
  mask.ForEachId(value, [&](uint32_t id) { payload += VarintBytes(id); });
  const int64_t ids = payload > 0 ? FieldBytes(payload) : 0;  // TokenIds: empty when no id
  return FieldBytes(ids);
}

absl::Status AllowsNothing(std::string_view field) {
  return absl::InvalidArgumentError(
      StrCat(field, " allows no token (a masked step needs at least one allowed token)"));
}

// INVALID_ARGUMENT unless `ids` (the `list` of `field`) is strictly
// increasing within [0, vocab_size).
absl::Status CheckIds(std::span<const uint32_t> ids, int64_t vocab_size, std::string_view field,
                      std::string_view list) {
  if (absl::Status s = CheckVocabSize(vocab_size, field); !s.ok()) return s;
  if (static_cast<int64_t>(ids.size()) > vocab_size) {
    return absl::InvalidArgumentError(StrCat(field, ".", list, " has ", ids.size(),
                                             " ids, more than the vocabulary's ", vocab_size));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(StrCat(field, ".", list, " id ", ids[i], " at index ", i,
                                               " is out of range [0, ", vocab_size, ")"));
    }
    if (i > 0 && ids[i] <= ids[i - 1]) {
      return absl::InvalidArgumentError(
          StrCat(field, ".", list, " id ", ids[i], " at index ", i, " does not follow id ",
                 ids[i - 1], " in increasing order (ids must be sorted and distinct)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

TokenMask::TokenMask(int64_t vocab_size)
    : vocab_size_(vocab_size), words_(static_cast<size_t>(WordsFor(vocab_size)), 0) {}

TokenMask TokenMask::AllowNone(int64_t vocab_size) { return TokenMask(vocab_size); }

TokenMask TokenMask::AllowAll(int64_t vocab_size) {
  TokenMask mask(vocab_size);
  std::fill(mask.words_.begin(), mask.words_.end(), ~uint64_t{0});
  if (const int64_t tail = vocab_size % 64; tail != 0) {
    mask.words_.back() = (uint64_t{1} << tail) - 1;
  }
  return mask;
}

int64_t TokenMask::CountAllowed() const {
  int64_t n = 0;
  for (uint64_t w : words_) n += std::popcount(w);
  return n;
}

absl::StatusOr<TokenMask> TokenMask::FromBitset(std::string_view bytes, int64_t vocab_size,
                                                std::string_view field) {
  if (absl::Status s = CheckVocabSize(vocab_size, field); !s.ok()) return s;
  const int64_t want = (vocab_size + 7) / 8;
  if (static_cast<int64_t>(bytes.size()) != want) {
    return absl::InvalidArgumentError(StrCat(field, ".bitset has ", bytes.size(),
                                             " bytes; a vocabulary of ", vocab_size,
                                             " tokens takes ", want, " (one bit a token)"));
  }
  if (const int64_t tail = vocab_size % 8; tail != 0) {
    const auto last = static_cast<uint8_t>(bytes.back());
    if ((last >> tail) != 0) {
      const int bit =
          std::countr_zero(static_cast<unsigned>(last >> tail)) + static_cast<int>(tail);
      return absl::InvalidArgumentError(StrCat(field, ".bitset sets bit ", (want - 1) * 8 + bit,
                                               ", past the vocabulary of ", vocab_size, " tokens"));
    }
  }
  TokenMask mask(vocab_size);
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(mask.words_.data(), bytes.data(), bytes.size());
  } else {
    for (size_t i = 0; i < bytes.size(); ++i) {
      mask.words_[i / 8] |= uint64_t{static_cast<uint8_t>(bytes[i])} << (8 * (i % 8));
    }
  }
  if (mask.AllowsNone()) return AllowsNothing(field);
  return mask;
}

absl::StatusOr<TokenMask> TokenMask::FromAllowed(std::span<const uint32_t> ids, int64_t vocab_size,
                                                 std::string_view field) {
  if (absl::Status s = CheckIds(ids, vocab_size, field, "allowed"); !s.ok()) return s;
  if (ids.empty()) return AllowsNothing(field);
  TokenMask mask(vocab_size);
  for (uint32_t id : ids) mask.Allow(id);
  return mask;
}

absl::StatusOr<TokenMask> TokenMask::FromDisallowed(std::span<const uint32_t> ids,
                                                    int64_t vocab_size, std::string_view field) {
  if (absl::Status s = CheckIds(ids, vocab_size, field, "disallowed"); !s.ok()) return s;
  if (static_cast<int64_t>(ids.size()) == vocab_size) return AllowsNothing(field);
  TokenMask mask = AllowAll(vocab_size);
  for (uint32_t id : ids) mask.Disallow(id);
  return mask;
}

int64_t TokenMaskWireBytes(const TokenMask& mask, TokenMaskEncoding encoding) {
  const int64_t allowed = mask.CountAllowed();
  switch (encoding) {
    case TokenMaskEncoding::kBitset:
      return FieldBytes((mask.vocab_size() + 7) / 8);
    case TokenMaskEncoding::kAllowed:
      return ListBytes(mask, true, allowed, INT64_MAX);
    case TokenMaskEncoding::kDisallowed:
      return ListBytes(mask, false, mask.vocab_size() - allowed, INT64_MAX);
  }
  return 0;
}

TokenMaskEncoding CheapestTokenMaskEncoding(const TokenMask& mask) {
  const int64_t allowed = mask.CountAllowed();
  TokenMaskEncoding best = TokenMaskEncoding::kBitset;
  int64_t best_bytes = FieldBytes((mask.vocab_size() + 7) / 8);
  // A list of more ids than the bitset has bytes is larger: skip counting it.
  if (const int64_t b = ListBytes(mask, true, allowed, best_bytes); b >= 0 && b < best_bytes) {
    best = TokenMaskEncoding::kAllowed;
    best_bytes = b;
  }
  if (const int64_t b = ListBytes(mask, false, mask.vocab_size() - allowed, best_bytes);
      b >= 0 && b < best_bytes) {
    best = TokenMaskEncoding::kDisallowed;
  }
  return best;
}

}  // namespace llm
