#include "common/token_mask_proto.h"

#include <bit>
#include <climits>
#include <cstring>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm {
namespace {

int64_t VarintBytes(uint64_t v) { return v < 128 ? 1 : (std::bit_width(v) + 6) / 7; }

// The bytes of a length-delimited field of `payload` bytes (a one-byte tag).
int64_t FieldBytes(int64_t payload) { return 1 + VarintBytes(payload) + payload; }

// Calls f(id) for every id whose bit is `value`, in increasing order.
template <typename F>
void ForEachId(const TokenMask& mask, bool value, F f) {
  const std::span<const uint64_t> words = mask.words();
  for (size_t i = 0; i < words.size(); ++i) {
    uint64_t w = value ? words[i] : ~words[i];
    if (!value && i + 1 == words.size() && mask.vocab_size() % 64 != 0) {
      w &= (uint64_t{1} << (mask.vocab_size() % 64)) - 1;  // not the ids past the vocabulary
    }
    for (; w != 0; w &= w - 1) f(static_cast<uint32_t>(i * 64 + std::countr_zero(w)));
  }
}

// The bytes of a TokenMask holding the ids whose bit is `value` as a list,
// or -1 when it would be larger than `limit` bytes.
int64_t ListBytes(const TokenMask& mask, bool value, int64_t count, int64_t limit) {
  if (count > limit) return -1;  // a varint is at least a byte
  int64_t payload = 0;
  ForEachId(mask, value, [&](uint32_t id) { payload += VarintBytes(id); });
  const int64_t ids = payload > 0 ? FieldBytes(payload) : 0;  // TokenIds: empty when no id
  return FieldBytes(ids);
}

std::span<const uint32_t> Ids(const v1::TokenIds& list) {
  return {list.ids().data(), static_cast<size_t>(list.ids().size())};
}

void SetList(const TokenMask& mask, bool value, int64_t count, v1::TokenIds* out) {
  google::protobuf::RepeatedField<uint32_t>* ids = out->mutable_ids();
  ids->Clear();
  ids->Reserve(static_cast<int>(count));
  ForEachId(mask, value, [&](uint32_t id) { ids->AddAlreadyReserved(id); });
}

// TokenMaskToProto, with `allowed` the mask's CountAllowed.
void ToProto(const TokenMask& mask, TokenMaskEncoding encoding, int64_t allowed,
             v1::TokenMask* out) {
  switch (encoding) {
    case TokenMaskEncoding::kBitset: {
      std::string* bytes = out->mutable_bitset();
      bytes->resize(static_cast<size_t>((mask.vocab_size() + 7) / 8));
      const std::span<const uint64_t> words = mask.words();
      if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(bytes->data(), words.data(), bytes->size());
      } else {
        for (size_t i = 0; i < bytes->size(); ++i) {
          (*bytes)[i] = static_cast<char>(words[i / 8] >> (8 * (i % 8)));
        }
      }
      return;
    }
    case TokenMaskEncoding::kAllowed:
      SetList(mask, true, allowed, out->mutable_allowed());
      return;
    case TokenMaskEncoding::kDisallowed:
      SetList(mask, false, mask.vocab_size() - allowed, out->mutable_disallowed());
      return;
  }
}

// CheapestTokenMaskEncoding, with `allowed` the mask's CountAllowed.
TokenMaskEncoding Cheapest(const TokenMask& mask, int64_t allowed) {
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

}  // namespace

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
  return Cheapest(mask, mask.CountAllowed());
}

void TokenMaskToProto(const TokenMask& mask, TokenMaskEncoding encoding, v1::TokenMask* out) {
  ToProto(mask, encoding, mask.CountAllowed(), out);
}

void TokenMaskToProto(const TokenMask& mask, v1::TokenMask* out) {
  const int64_t allowed = mask.CountAllowed();
  ToProto(mask, Cheapest(mask, allowed), allowed, out);
}

absl::StatusOr<TokenMask> TokenMaskFromProto(const v1::TokenMask& proto, int64_t vocab_size,
                                             std::string_view field) {
  switch (proto.encoding_case()) {
    case v1::TokenMask::kBitset:
      return TokenMask::FromBitset(proto.bitset(), vocab_size, field);
    case v1::TokenMask::kAllowed:
      return TokenMask::FromAllowed(Ids(proto.allowed()), vocab_size, field);
    case v1::TokenMask::kDisallowed:
      return TokenMask::FromDisallowed(Ids(proto.disallowed()), vocab_size, field);
    case v1::TokenMask::ENCODING_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError(
      StrCat(field,
             " has no encoding set (bitset, allowed or disallowed; a mask in an encoding "
             "this server does not know is refused, never ignored)"));
}

}  // namespace llm
