// llm.v1.TokenMask (proto/llm/v1/model.proto) to and from TokenMask
// (common/token_mask.h): the client's encoder, which picks the smallest of
// the three wire encodings, and the model service's validating decoder.
// No gRPC: the messages only (the fuzzers' build has them).
//
// Threads: pure functions. Cost: O(vocab_size / 64 + listed ids) each.
#ifndef LLM_COMMON_TOKEN_MASK_PROTO_H_
#define LLM_COMMON_TOKEN_MASK_PROTO_H_

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/token_mask.h"
#include "llm/v1/model.pb.h"

namespace llm {

// TokenMaskEncoding, TokenMaskWireBytes and CheapestTokenMaskEncoding (the
// sizes of the encodings) are in common/token_mask.h.

// Writes `mask` into *out (replacing what it held) in `encoding`, or in the
// cheapest one.
void TokenMaskToProto(const TokenMask& mask, TokenMaskEncoding encoding, v1::TokenMask* out);
void TokenMaskToProto(const TokenMask& mask, v1::TokenMask* out);

// The mask a request carries, for a vocabulary of `vocab_size` tokens:
// INVALID_ARGUMENT naming `field` when no encoding is set (or one this
// build does not know) or when TokenMask's decoders refuse it (a wrong
// bitset size, ids unsorted, repeated or out of range, no allowed token).
absl::StatusOr<TokenMask> TokenMaskFromProto(const v1::TokenMask& proto, int64_t vocab_size,
                                             std::string_view field);

}  // namespace llm

#endif  // LLM_COMMON_TOKEN_MASK_PROTO_H_
