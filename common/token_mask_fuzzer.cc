// libFuzzer target for the model service's token mask decoder
// (TokenMaskFromProto, common/token_mask_proto.h).
//
// Input: three bytes of vocabulary size (little-endian, 18 bits used:
// 1..2^18, Gemma's 262,144 the largest), then a serialized
// llm.v1.TokenMask. A mask the decoder accepts must be exactly
// what the message says (its allowed count, its bitset bytes or listed ids),
// allow at least one token, keep the bits past the vocabulary clear, and
// come back unchanged from each of the client's three encodings, the
// cheapest no larger than the others. A refusal must be INVALID_ARGUMENT
// with a message. Anything else traps.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/token_mask_proto.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const int64_t vocab = 1 + (data[0] | (data[1] << 8) | ((data[2] & 3) << 16));
  llm::v1::TokenMask proto;
  if (!proto.ParseFromArray(data + 3, static_cast<int>(size - 3))) return 0;
  absl::StatusOr<llm::TokenMask> mask = llm::TokenMaskFromProto(proto, vocab, "mask");
  if (!mask.ok()) {
    Check(mask.status().code() == absl::StatusCode::kInvalidArgument);
    Check(!mask.status().message().empty());
    return 0;
  }
  const int64_t allowed = mask->CountAllowed();
  Check(mask->vocab_size() == vocab);
  Check(allowed >= 1 && allowed <= vocab);
  if (vocab % 64 != 0) Check((mask->words().back() >> (vocab % 64)) == 0);
  switch (proto.encoding_case()) {
    case llm::v1::TokenMask::kBitset: {
      llm::v1::TokenMask again;
      llm::TokenMaskToProto(*mask, llm::TokenMaskEncoding::kBitset, &again);
      Check(again.bitset() == proto.bitset());
      break;
    }
    case llm::v1::TokenMask::kAllowed:
      Check(allowed == proto.allowed().ids_size());
      for (uint32_t id : proto.allowed().ids()) Check(mask->allowed(id));
      break;
    case llm::v1::TokenMask::kDisallowed:
      Check(allowed == vocab - proto.disallowed().ids_size());
      for (uint32_t id : proto.disallowed().ids()) Check(!mask->allowed(id));
      break;
    case llm::v1::TokenMask::ENCODING_NOT_SET:
      Check(false);  // refused above
  }
  const llm::TokenMaskEncoding cheapest = llm::CheapestTokenMaskEncoding(*mask);
  for (llm::TokenMaskEncoding e :
       {llm::TokenMaskEncoding::kBitset, llm::TokenMaskEncoding::kAllowed,
        llm::TokenMaskEncoding::kDisallowed}) {
    llm::v1::TokenMask encoded;
    llm::TokenMaskToProto(*mask, e, &encoded);
    Check(static_cast<int64_t>(encoded.ByteSizeLong()) == llm::TokenMaskWireBytes(*mask, e));
    Check(llm::TokenMaskWireBytes(*mask, cheapest) <= llm::TokenMaskWireBytes(*mask, e));
    absl::StatusOr<llm::TokenMask> back = llm::TokenMaskFromProto(encoded, vocab, "mask");
    Check(back.ok() && *back == *mask);
  }
  return 0;
}
