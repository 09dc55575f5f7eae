#include "common/token_mask_proto.h"

#include <bit>
#include <cstring>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "common/strings.h"

namespace llm {
namespace {

std::span<const uint32_t> Ids(const v1::TokenIds& list) {
  return {list.ids().data(), static_cast<size_t>(list.ids().size())};
}

void SetList(const TokenMask& mask, bool value, int64_t count, v1::TokenIds* out) {
  google::protobuf::RepeatedField<uint32_t>* ids = out->mutable_ids();
  ids->Clear();
  ids->Reserve(static_cast<int>(count));
  mask.ForEachId(value, [&](uint32_t id) { ids->AddAlreadyReserved(id); });
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

}  // namespace

void TokenMaskToProto(const TokenMask& mask, TokenMaskEncoding encoding, v1::TokenMask* out) {
  ToProto(mask, encoding, mask.CountAllowed(), out);
}

void TokenMaskToProto(const TokenMask& mask, v1::TokenMask* out) {
  ToProto(mask, CheapestTokenMaskEncoding(mask), mask.CountAllowed(), out);
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
