// The weight types' shape rules (weight_formats.h) and the block layouts'
// sizes (blocks.h) against the GGUF reader's table of ggml types. What each
// block means is tested through DequantizeRow with hand-built blocks in
// kernels/quant_test.cc (DequantizeTest), which compares this reference with
// the kernels'.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

#include "common/gguf/gguf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/formats/blocks.h"
#include "model_svc/formats/weight_formats.h"

namespace llm::formats {
namespace {

using ::testing::HasSubstr;

// Float types first, then the quantized ones.
constexpr TensorType kAllTypes[] = {
    TensorType::kF32,  TensorType::kF16,    TensorType::kBF16,   TensorType::kQ4_0,
    TensorType::kQ4_1, TensorType::kQ5_0,   TensorType::kQ5_1,   TensorType::kQ8_0,
    TensorType::kQ2_K, TensorType::kQ3_K,   TensorType::kQ4_K,   TensorType::kQ5_K,
    TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS,
};

const gguf::TensorTypeTraits& Traits(TensorType type) {
  return *gguf::FindTensorTypeTraits(static_cast<uint32_t>(type));
}

std::string Name(TensorType type) { return std::string(Traits(type).name); }

TEST(ShapeTest, SupportedTypes) {
  for (TensorType type : kAllTypes) EXPECT_TRUE(IsSupportedWeightType(type)) << Name(type);
  EXPECT_FALSE(IsSupportedWeightType(TensorType::kQ8_1));
  EXPECT_FALSE(IsSupportedWeightType(TensorType::kQ8_K));
  EXPECT_FALSE(IsSupportedWeightType(TensorType::kIQ2_XXS));
  EXPECT_FALSE(IsSupportedWeightType(TensorType::kIQ3_S));
  EXPECT_FALSE(IsSupportedWeightType(TensorType::kTQ2_0));
  EXPECT_FALSE(IsSupportedWeightType(static_cast<TensorType>(4)));
}

TEST(ShapeTest, CheckWeightShape) {
  EXPECT_TRUE(CheckWeightShape(TensorType::kQ4_1, 576).ok());
  EXPECT_TRUE(CheckWeightShape(TensorType::kQ8_0, 576).ok());
  EXPECT_TRUE(CheckWeightShape(TensorType::kF32, 64).ok());
  EXPECT_TRUE(CheckWeightShape(TensorType::kQ4_K, 1536).ok());
  EXPECT_TRUE(CheckWeightShape(TensorType::kQ6_K, 256).ok());

  absl::Status s = CheckWeightShape(TensorType::kQ4_K, 576);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Q4_K"));
  EXPECT_THAT(s.message(), HasSubstr("256"));

  s = CheckWeightShape(TensorType::kF16, 48);  // float types still need the 32-element q8 blocks
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("F16"));
  EXPECT_EQ(CheckWeightShape(TensorType::kQ8_0, 100).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckWeightShape(TensorType::kQ8_0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckWeightShape(TensorType::kQ8_0, -32).code(), absl::StatusCode::kInvalidArgument);

  EXPECT_TRUE(CheckWeightShape(TensorType::kQ2_K, 256).ok());
  EXPECT_TRUE(CheckWeightShape(TensorType::kIQ4_NL, 32).ok());
  s = CheckWeightShape(TensorType::kIQ4_XS, 576);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("IQ4_XS"));
  s = CheckWeightShape(TensorType::kIQ2_XXS, 256);  // unsupported, named
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("IQ2_XXS"));
  s = CheckWeightShape(static_cast<TensorType>(99), 256);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("99"));
}

TEST(ShapeTest, RowBytes) {
  EXPECT_EQ(RowBytes(TensorType::kF32, 576), 2304u);
  EXPECT_EQ(RowBytes(TensorType::kF16, 576), 1152u);
  EXPECT_EQ(RowBytes(TensorType::kBF16, 576), 1152u);
  EXPECT_EQ(RowBytes(TensorType::kQ4_0, 576), 18u * 18);
  EXPECT_EQ(RowBytes(TensorType::kQ4_1, 576), 18u * 20);
  EXPECT_EQ(RowBytes(TensorType::kQ5_0, 576), 18u * 22);
  EXPECT_EQ(RowBytes(TensorType::kQ5_1, 576), 18u * 24);
  EXPECT_EQ(RowBytes(TensorType::kQ8_0, 576), 18u * 34);
  EXPECT_EQ(RowBytes(TensorType::kQ4_K, 1536), 6u * 144);
  EXPECT_EQ(RowBytes(TensorType::kQ6_K, 1536), 6u * 210);
  EXPECT_EQ(RowBytes(TensorType::kQ2_K, 1536), 6u * 84);
  EXPECT_EQ(RowBytes(TensorType::kQ3_K, 1536), 6u * 110);
  EXPECT_EQ(RowBytes(TensorType::kQ5_K, 1536), 6u * 176);
  EXPECT_EQ(RowBytes(TensorType::kIQ4_NL, 576), 18u * 18);
  EXPECT_EQ(RowBytes(TensorType::kIQ4_XS, 1536), 6u * 136);
}

// ---------------------------------------------------------------------------
// (a) Dequantization of hand-built blocks.

// The block sizes written down in blocks.h (for the kernels' constant offsets)
// are the GGUF reader's (which RowBytes and the loader's bounds checks use).
TEST(BlocksTest, SizesAreTheGgufReadersOnes) {
  const struct {
    TensorType type;
    size_t bytes;
  } blocks[] = {
      {TensorType::kQ4_0, kQ4_0Bytes},     {TensorType::kQ4_1, kQ4_1Bytes},
      {TensorType::kQ5_0, kQ5_0Bytes},     {TensorType::kQ5_1, kQ5_1Bytes},
      {TensorType::kQ8_0, kQ8_0Bytes},     {TensorType::kQ2_K, kQ2_KBytes},
      {TensorType::kQ3_K, kQ3_KBytes},     {TensorType::kQ4_K, kQ4_KBytes},
      {TensorType::kQ5_K, kQ5_KBytes},     {TensorType::kQ6_K, kQ6_KBytes},
      {TensorType::kIQ4_NL, kIQ4_NLBytes}, {TensorType::kIQ4_XS, kIQ4_XSBytes},
  };
  EXPECT_EQ(std::size(blocks) + 3, std::size(kAllTypes));  // every quantized type
  for (const auto& b : blocks) {
    EXPECT_EQ(Traits(b.type).block_bytes, b.bytes) << Name(b.type);
    EXPECT_EQ(static_cast<int64_t>(Traits(b.type).block_elements), BlockElements(b.type))
        << Name(b.type);
    EXPECT_EQ(RowBytes(b.type, BlockElements(b.type)), b.bytes) << Name(b.type);
  }
  for (TensorType type : {TensorType::kF32, TensorType::kF16, TensorType::kBF16}) {
    EXPECT_EQ(BlockElements(type), 1) << Name(type);
  }
}

}  // namespace
}  // namespace llm::formats
