#include "common/token_mask_proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/token_mask_testing.h"

namespace llm {
namespace {

using llm::testing::RandomTokenMask;
using ::testing::HasSubstr;

constexpr TokenMaskEncoding kEncodings[] = {TokenMaskEncoding::kBitset, TokenMaskEncoding::kAllowed,
                                            TokenMaskEncoding::kDisallowed};

int64_t BytesIn(const TokenMask& m, TokenMaskEncoding encoding) {
  v1::TokenMask proto;
  TokenMaskToProto(m, encoding, &proto);
  return static_cast<int64_t>(proto.ByteSizeLong());
}

TEST(TokenMaskProtoTest, EveryEncodingRoundTripsExactly) {
  for (int64_t vocab : {1, 7, 64, 1003, 49152}) {
    for (double density : {0.0, 0.001, 0.3, 0.5, 0.97, 1.0}) {
      const TokenMask m = RandomTokenMask(vocab, density, static_cast<uint32_t>(vocab));
      for (TokenMaskEncoding e : kEncodings) {
        v1::TokenMask proto;
        TokenMaskToProto(m, e, &proto);
        // Through the wire bytes, as the server sees it.
        v1::TokenMask received;
        ASSERT_TRUE(received.ParseFromString(proto.SerializeAsString()));
        absl::StatusOr<TokenMask> back = TokenMaskFromProto(received, vocab, "mask");
        ASSERT_TRUE(back.ok()) << back.status() << " vocab " << vocab << " density " << density;
        EXPECT_EQ(*back, m) << "vocab " << vocab << " density " << density << " encoding "
                            << static_cast<int>(e);
      }
    }
  }
}

TEST(TokenMaskProtoTest, WireBytesAreTheSerializedSize) {
  for (double density : {0.0, 0.01, 0.5, 0.99, 1.0}) {
    const TokenMask m = RandomTokenMask(49152, density, 3);
    for (TokenMaskEncoding e : kEncodings) {
      EXPECT_EQ(TokenMaskWireBytes(m, e), BytesIn(m, e))
          << "density " << density << " encoding " << static_cast<int>(e);
    }
  }
}

TEST(TokenMaskProtoTest, TheCheapestEncodingIsTheSmallest) {
  for (int64_t vocab : {5, 100, 1003, 49152, 262144}) {
    for (double density :
         {0.0, 0.0005, 0.02, 0.04, 0.05, 0.3, 0.5, 0.95, 0.96, 0.98, 0.9995, 1.0}) {
      const TokenMask m = RandomTokenMask(vocab, density, 11);
      const int64_t smallest = std::min(
          {BytesIn(m, kEncodings[0]), BytesIn(m, kEncodings[1]), BytesIn(m, kEncodings[2])});
      v1::TokenMask proto;
      TokenMaskToProto(m, &proto);
      EXPECT_EQ(static_cast<int64_t>(proto.ByteSizeLong()), smallest)
          << "vocab " << vocab << " density " << density;
    }
  }
}

TEST(TokenMaskProtoTest, PicksAListForFewAndTheBitsetForMany) {
  constexpr int64_t kVocab = 49152;
  TokenMask few = TokenMask::AllowNone(kVocab);
  for (int64_t id : {3, 17, 40000}) few.Allow(id);
  EXPECT_EQ(CheapestTokenMaskEncoding(few), TokenMaskEncoding::kAllowed);
  EXPECT_LT(TokenMaskWireBytes(few, TokenMaskEncoding::kAllowed), 16);
  TokenMask most = TokenMask::AllowAll(kVocab);
  most.Disallow(0);
  most.Disallow(kVocab - 1);
  EXPECT_EQ(CheapestTokenMaskEncoding(most), TokenMaskEncoding::kDisallowed);
  EXPECT_EQ(CheapestTokenMaskEncoding(TokenMask::AllowAll(kVocab)), TokenMaskEncoding::kDisallowed);
  EXPECT_EQ(TokenMaskWireBytes(TokenMask::AllowAll(kVocab), TokenMaskEncoding::kDisallowed), 2);
  const TokenMask half = RandomTokenMask(kVocab, 0.5, 5);
  EXPECT_EQ(CheapestTokenMaskEncoding(half), TokenMaskEncoding::kBitset);
  EXPECT_EQ(TokenMaskWireBytes(half, TokenMaskEncoding::kBitset), 3 + kVocab / 8);
}

TEST(TokenMaskProtoTest, ProtoErrorsNameTheFieldAndTheFault) {
  auto invalid = [](const v1::TokenMask& proto, int64_t vocab) {
    return TokenMaskFromProto(proto, vocab, "proposed_masks[3]").status();
  };
  v1::TokenMask none;
  absl::Status s = invalid(none, 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("proposed_masks[3] has no encoding set"));
  // A newer client's encoding (field 4, unknown here) is refused, not ignored.
  v1::TokenMask future;
  ASSERT_TRUE(future.ParseFromString(std::string("\x22\x00", 2)));
  EXPECT_THAT(invalid(future, 10).message(), HasSubstr("has no encoding set"));
  v1::TokenMask bitset;
  bitset.set_bitset("\xff");
  EXPECT_THAT(invalid(bitset, 10).message(),
              HasSubstr("proposed_masks[3].bitset has 1 bytes; a vocabulary of 10 tokens takes 2"));
  v1::TokenMask empty_allowed;
  empty_allowed.mutable_allowed();
  EXPECT_THAT(invalid(empty_allowed, 10).message(), HasSubstr("proposed_masks[3] allows no token"));
  v1::TokenMask unsorted;
  unsorted.mutable_disallowed()->add_ids(5);
  unsorted.mutable_disallowed()->add_ids(4);
  EXPECT_THAT(invalid(unsorted, 10).message(),
              HasSubstr("proposed_masks[3].disallowed id 4 at index 1 does not follow id 5"));
  v1::TokenMask empty_disallowed;
  empty_disallowed.mutable_disallowed();
  absl::StatusOr<TokenMask> all = TokenMaskFromProto(empty_disallowed, 10, "mask");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->AllowsAll());
}

}  // namespace
}  // namespace llm
