// KvPoolShape: the pool's types from the flags' strings, its block count
// from the real bytes (Q8_0: ~1.88x the positions of f16 in the same
// memory), and the errors for types it cannot hold.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model_svc/engine/loader.h"

namespace llm::engine {
namespace {

using ::testing::HasSubstr;

model::ModelConfig Config(int64_t head_dim) {
  model::ModelConfig c;  // SmolLM2-135M's KV shape
  c.block_count = 30;
  c.head_count_kv = 3;
  c.head_dim = head_dim;
  return c;
}

LoadOptions Options(std::string both, std::string k = "", std::string v = "") {
  LoadOptions o;
  o.kv_cache_mb = 64;
  o.kv_block_size = 16;
  o.kv_cache_type = std::move(both);
  o.kv_cache_type_k = std::move(k);
  o.kv_cache_type_v = std::move(v);
  return o;
}

TEST(KvPoolShapeTest, BlocksFollowTheRealBytes) {
  auto f16 = KvPoolShape(Config(64), Options("f16"));
  auto q8 = KvPoolShape(Config(64), Options("q8_0"));
  auto mixed = KvPoolShape(Config(64), Options("f16", "q8_0"));
  ASSERT_TRUE(f16.ok() && q8.ok() && mixed.ok());
  EXPECT_EQ(f16->block_bytes(), 30 * 16 * 2 * 192 * 2);
  EXPECT_EQ(q8->block_bytes(), 30 * 16 * 2 * 6 * 34);
  EXPECT_EQ(mixed->block_bytes(), 30 * 16 * (6 * 34 + 192 * 2));
  EXPECT_EQ(q8->k_type, model::KvType::kQ8_0);
  EXPECT_EQ(mixed->k_type, model::KvType::kQ8_0);
  EXPECT_EQ(mixed->v_type, model::KvType::kF16);
  EXPECT_EQ(f16->num_blocks, (64 << 20) / f16->block_bytes());
  EXPECT_EQ(q8->num_blocks, (64 << 20) / q8->block_bytes());
  EXPECT_NEAR(static_cast<double>(q8->num_blocks) / f16->num_blocks, 384.0 / 204, 0.01);
}

TEST(KvPoolShapeTest, RefusesWhatItCannotHold) {
  auto odd = KvPoolShape(Config(48), Options("q8_0"));
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(odd.status().message(), HasSubstr("multiple of 32"));
  EXPECT_TRUE(KvPoolShape(Config(48), Options("f16")).ok());
  auto unknown = KvPoolShape(Config(64), Options("f16", "", "q4_0"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("--kv_cache_type_v \"q4_0\""));
  auto f32 = KvPoolShape(Config(64), Options("f32", "q8_0"));
  EXPECT_EQ(f32.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f32.status().message(), HasSubstr("f32"));
}

}  // namespace
}  // namespace llm::engine
