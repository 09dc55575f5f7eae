// The CPU backend's fused ops give the bits of the ops they fuse:
// AddRmsNorm is Add then RmsNorm; a MatMul reading the output of RmsNorm,
// AddRmsNorm, SiluMul or Attention (which quantize it as they write it)
// equals a MatMul of the same values written afresh (which MatMul quantizes
// itself), also when another op changed the tensor in between; and attention
// computing a KV head's query heads together equals head by head.
#include "model_svc/backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/gguf/gguf.h"
#include "common/strings.h"
#include "gtest/gtest.h"
#include "model_svc/core/backend.h"
#include "model_svc/testing/reference_quant.h"

namespace llm::cpu {
namespace {

using gguf::TensorType;
using model::Backend;
using model::MatMulTarget;
using model::Tensor;
using model::WeightView;

std::vector<float> RandomValues(int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

class CpuBackendTest : public ::testing::Test {
 protected:
  void SetUp() override { backend_ = CreateCpuBackend({.threads = 2}); }

  Tensor Alloc(int64_t rows, int64_t cols, uint64_t seed) {
    auto t = backend_->AllocTensor(rows, cols);
    EXPECT_TRUE(t.ok()) << t.status();
    EXPECT_TRUE(backend_->WriteTensor(*t, RandomValues(rows * cols, seed)).ok());
    return *t;
  }

  std::vector<float> Read(const Tensor& t) {
    std::vector<float> v(t.rows * t.cols);
    EXPECT_TRUE(backend_->ReadTensor(t, v).ok());
    return v;
  }

  // A weight of `type` (its bytes kept here: the backend copies them).
  const model::Weight& Weight(TensorType type, int64_t rows, int64_t cols, uint64_t seed) {
    auto bytes = model::testing::QuantizeMatrix(type, RandomValues(rows * cols, seed), cols);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    bytes_.push_back(std::make_unique<std::string>(*std::move(bytes)));
    WeightView view;
    view.name = "w";
    view.type = type;
    view.rows = rows;
    view.cols = cols;
    view.data = reinterpret_cast<const uint8_t*>(bytes_.back()->data());
    view.row_bytes = bytes_.back()->size() / rows;
    auto w = backend_->UploadWeight(view);
    EXPECT_TRUE(w.ok()) << w.status();
    weights_.push_back(*std::move(w));
    return *weights_.back();
  }

  // x · Wᵀ for the values x holds now.
  std::vector<float> Product(const Tensor& x, const model::Weight& w) {
    Tensor out = *backend_->AllocTensor(x.rows, w.view().rows);
    const MatMulTarget target[] = {{&w, out}};
    backend_->MatMul(x, target);
    return Read(out);
  }

  // The same product from a fresh copy of x's values. (Call it after
  // Product: writing the copy forgets the quantized rows.)
  std::vector<float> ProductOfCopy(const Tensor& x, const model::Weight& w) {
    Tensor copy = *backend_->AllocTensor(x.rows, x.cols);
    EXPECT_TRUE(backend_->WriteTensor(copy, Read(x)).ok());
    return Product(copy, w);
  }

  std::unique_ptr<Backend> backend_;
  std::vector<std::unique_ptr<std::string>> bytes_;
  std::vector<std::unique_ptr<model::Weight>> weights_;
};

TEST_F(CpuBackendTest, KvBlocksReadBackWithTheUnusedSlotsZero) {
  model::AttentionParams p;
  p.head_count = 4;
  p.head_count_kv = 2;
  p.head_dim = 8;
  ASSERT_TRUE(backend_->CheckModel(p, model::RopeParams{}).ok());
  model::KvCacheShape shape;
  shape.num_blocks = 3;
  shape.block_size = 4;
  shape.layers = 2;
  shape.kv_dim = 16;
  ASSERT_TRUE(backend_->AllocKvCache(shape).ok());
  EXPECT_EQ(backend_->KvLayout(), model::kKvLayoutCpu);
  const int64_t bytes = shape.block_bytes();  // 2 layers x K, V x 2 heads x 4 slots x 8 x 2 B
  std::vector<uint8_t> in(bytes);
  for (int64_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>(1 + i % 251);
  ASSERT_TRUE(backend_->WriteKvBlock(1, in).ok());

  std::vector<uint8_t> full(bytes), part(bytes);
  ASSERT_TRUE(backend_->ReadKvBlock(1, 4, full).ok());
  EXPECT_EQ(full, in);
  ASSERT_TRUE(backend_->ReadKvBlock(1, 3, part).ok());
  const int64_t row = 8 * 2;  // one slot of one head
  for (int64_t i = 0; i < bytes; ++i) {
    const bool unused = (i / row) % 4 == 3;  // slot 3 of every [head][slot] run
    ASSERT_EQ(part[i], unused ? 0 : in[i]) << "byte " << i;
  }
  // Another block is untouched, and bad arguments are refused.
  ASSERT_TRUE(backend_->ReadKvBlock(0, 4, full).ok());
  EXPECT_NE(full, in);
  EXPECT_EQ(backend_->ReadKvBlock(3, 4, full).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->WriteKvBlock(0, std::span<const uint8_t>(in).first(bytes - 1)).code(),
            absl::StatusCode::kInvalidArgument);
}

class QuantizedOutputTest : public CpuBackendTest,
                            public ::testing::WithParamInterface<TensorType> {};

TEST_F(CpuBackendTest, AddRmsNormIsAddThenRmsNorm) {
  for (const int64_t rows : {1, 5, 16}) {
    for (const int64_t cols : {40, 64, 576}) {
      const model::Weight& norm = Weight(TensorType::kF32, 1, cols, 7);
      Tensor x1 = Alloc(rows, cols, 1), y1 = Alloc(rows, cols, 2), out1 = Alloc(rows, cols, 3);
      Tensor x2 = Alloc(rows, cols, 1), y2 = Alloc(rows, cols, 2);
      backend_->Add(x1, y1);
      backend_->RmsNorm(x1, norm, 1e-5f, out1);
      backend_->AddRmsNorm(x2, y2, norm, 1e-5f, y2);  // out = y, as the model calls it
      EXPECT_EQ(Read(x2), Read(x1)) << rows << " x " << cols;
      EXPECT_EQ(Read(y2), Read(out1)) << rows << " x " << cols;
      // A separate output, and out = x.
      Tensor x3 = Alloc(rows, cols, 1), y3 = Alloc(rows, cols, 2), out3 = Alloc(rows, cols, 4);
      backend_->AddRmsNorm(x3, y3, norm, 1e-5f, out3);
      EXPECT_EQ(Read(x3), Read(x1)) << rows << " x " << cols;
      EXPECT_EQ(Read(out3), Read(out1)) << rows << " x " << cols;
      Tensor x4 = Alloc(rows, cols, 1), y4 = Alloc(rows, cols, 2);
      backend_->AddRmsNorm(x4, y4, norm, 1e-5f, x4);
      EXPECT_EQ(Read(x4), Read(out1)) << rows << " x " << cols;
    }
  }
}

// White box: the MatMul after RmsNorm uses the blocks RmsNorm quantized.
// The test writes the tensor's memory behind the backend's back (no op), so
// a MatMul that quantized for itself would see the new values.
TEST_F(CpuBackendTest, MatMulUsesTheBlocksTheOpBeforeQuantized) {
  const int64_t rows = 16, cols = 256;
  const model::Weight& norm = Weight(TensorType::kF32, 1, cols, 51);
  const model::Weight& w = Weight(TensorType::kQ8_0, 64, cols, 52);
  Tensor x = Alloc(rows, cols, 53), out = Alloc(rows, cols, 54);
  backend_->RmsNorm(x, norm, 1e-5f, out);
  const std::vector<float> normed = Read(out);
  std::fill(out.data, out.data + rows * cols, 0.0f);
  const std::vector<float> got = Product(out, w);
  Tensor copy = Alloc(rows, cols, 55);
  ASSERT_TRUE(backend_->WriteTensor(copy, normed).ok());
  EXPECT_EQ(got, Product(copy, w));
}

TEST_P(QuantizedOutputTest, MatMulAfterAQuantizingOpEqualsMatMulOfACopy) {
  const TensorType type = GetParam();
  for (const int64_t rows : {1, 2, 3, 16, 40}) {
    const int64_t cols = 256;
    const model::Weight& norm = Weight(TensorType::kF32, 1, cols, 11);
    const model::Weight& w = Weight(type, 96, cols, 12);

    Tensor x = Alloc(rows, cols, 21), out = Alloc(rows, cols, 22);
    backend_->RmsNorm(x, norm, 1e-5f, out);
    {
      const std::vector<float> got = Product(out, w);
      EXPECT_EQ(got, ProductOfCopy(out, w)) << "RmsNorm, " << rows << " rows";
    }

    Tensor y = Alloc(rows, cols, 23);
    backend_->AddRmsNorm(x, y, norm, 1e-5f, y);
    {
      const std::vector<float> got = Product(y, w);
      EXPECT_EQ(got, ProductOfCopy(y, w)) << "AddRmsNorm, " << rows << " rows";
    }

    Tensor gate = Alloc(rows, cols, 24), up = Alloc(rows, cols, 25), act = Alloc(rows, cols, 26);
    backend_->SiluMul(gate, up, act);
    {
      const std::vector<float> got = Product(act, w);
      EXPECT_EQ(got, ProductOfCopy(act, w)) << "SiluMul, " << rows << " rows";
    }

    // Changed after it was quantized: the MatMul quantizes it again.
    backend_->RmsNorm(x, norm, 1e-5f, out);
    backend_->Add(out, gate);
    {
      const std::vector<float> got = Product(out, w);
      EXPECT_EQ(got, ProductOfCopy(out, w)) << "RmsNorm then Add, " << rows << " rows";
    }
    backend_->RmsNorm(x, norm, 1e-5f, out);
    ASSERT_TRUE(backend_->WriteTensor(out, RandomValues(rows * cols, 27)).ok());
    {
      const std::vector<float> got = Product(out, w);
      EXPECT_EQ(got, ProductOfCopy(out, w)) << "RmsNorm then a write, " << rows;
    }
  }
}

// One attention step (layer 0): lengths[i] new tokens from position `start`
// for sequence ids[i], in blocks first_block + 2 ids[i] and + 1, with its
// query, key and value rows drawn from its id and `start` (so a sequence has
// the same rows alone or beside others). `after` sees the output before the
// step ends. Returns the output.
std::vector<float> AttentionStep(Backend& backend, const model::AttentionParams& p,
                                 const std::vector<int64_t>& lengths, const std::vector<int>& ids,
                                 int32_t first_block, int64_t start = 0,
                                 const std::function<void(const Tensor&)>& after = nullptr) {
  const int64_t q_cols = p.head_count * p.head_dim, kv_cols = p.head_count_kv * p.head_dim;
  model::StepBatch batch;
  std::vector<std::vector<int32_t>> tables;  // the batch's spans point here
  std::vector<float> q, k, v;
  int64_t rows = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    tables.push_back({first_block + 2 * ids[i], first_block + 2 * ids[i] + 1});
    const uint64_t seed = 1000 * start + ids[i];
    const std::vector<float> qi = RandomValues(lengths[i] * q_cols, 100 + seed);
    const std::vector<float> ki = RandomValues(lengths[i] * kv_cols, 200 + seed);
    const std::vector<float> vi = RandomValues(lengths[i] * kv_cols, 300 + seed);
    q.insert(q.end(), qi.begin(), qi.end());
    k.insert(k.end(), ki.begin(), ki.end());
    v.insert(v.end(), vi.begin(), vi.end());
    for (int64_t t = 0; t < lengths[i]; ++t) {
      batch.tokens.push_back(0);
      batch.positions.push_back(static_cast<int32_t>(start + t));
    }
    rows += lengths[i];
  }
  for (size_t i = 0, row = 0; i < lengths.size(); row += lengths[i], ++i) {
    batch.sequences.push_back({static_cast<int64_t>(row), lengths[i], start, tables[i]});
  }
  EXPECT_TRUE(backend.BeginStep(batch).ok());
  const Tensor qt = *backend.AllocTensor(rows, q_cols), kt = *backend.AllocTensor(rows, kv_cols),
               vt = *backend.AllocTensor(rows, kv_cols), out = *backend.AllocTensor(rows, q_cols);
  EXPECT_TRUE(backend.WriteTensor(qt, q).ok());
  EXPECT_TRUE(backend.WriteTensor(kt, k).ok());
  EXPECT_TRUE(backend.WriteTensor(vt, v).ok());
  backend.Attention(0, qt, kt, vt, p, out);
  if (after) after(out);
  std::vector<float> result(rows * q_cols);
  EXPECT_TRUE(backend.ReadTensor(out, result).ok());
  std::vector<model::Logits> logits;
  EXPECT_TRUE(backend.ReadLogits(Tensor{nullptr, 0, 1}, {}, &logits).ok());
  return result;
}

model::KvCacheShape KvShape(const model::AttentionParams& p, int32_t blocks,
                            model::KvType type = model::KvType::kF16) {
  model::KvCacheShape kv;
  kv.num_blocks = blocks;
  kv.block_size = 16;
  kv.layers = 1;
  kv.kv_dim = p.head_count_kv * p.head_dim;
  kv.k_type = kv.v_type = type;
  return kv;
}

TEST_P(QuantizedOutputTest, MatMulAfterAttentionEqualsMatMulOfACopy) {
  const model::AttentionParams params{4, 2, 64, 0.125f};
  ASSERT_TRUE(backend_->AllocKvCache(KvShape(params, 16)).ok());
  const model::Weight& w = Weight(GetParam(), 64, 4 * 64, 31);
  // Eight decodes (one item per sequence), five (one per KV head), and a
  // prefill of 20 tokens beside a decode (one per query head).
  for (const std::vector<int64_t>& lengths :
       {std::vector<int64_t>(8, 1), std::vector<int64_t>(5, 1), std::vector<int64_t>{20, 1}}) {
    std::vector<int> ids(lengths.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    AttentionStep(*backend_, params, lengths, ids, 0, 0, [&](const Tensor& out) {
      const std::vector<float> got = Product(out, w);
      EXPECT_EQ(got, ProductOfCopy(out, w)) << lengths.size() << " sequences";
    });
  }
}

// Each sequence alone has too few work items for the threads, so its items
// are single query heads; beside others, an item is a KV head's query heads
// (five prefills of 20 tokens: 2 chunks each; with one KV head that is all
// heads, over several chunks), computed together up to 4 at a time (8 heads
// of one KV head take two rounds, 6 a round of 4 and one of 2), or all of a
// sequence's heads, the item storing its own keys and values (eight
// decodes). Every way gives the same bits, with an fp16 and an fp32 cache.
TEST_F(CpuBackendTest, AttentionHeadsTogetherEqualHeadByHead) {
  for (const model::KvType type : {model::KvType::kF16, model::KvType::kF32}) {
    for (const model::AttentionParams& p :
         {model::AttentionParams{4, 2, 64, 0.125f}, model::AttentionParams{9, 3, 64, 0.125f},
          model::AttentionParams{8, 1, 64, 0.125f}, model::AttentionParams{12, 2, 64, 0.125f},
          model::AttentionParams{8, 2, 128, 0.0884f}}) {
      SetUp();  // a fresh backend per shape
      ASSERT_TRUE(backend_->CheckModel(p, model::RopeParams{}).ok());
      ASSERT_TRUE(backend_->AllocKvCache(KvShape(p, 32, type)).ok());
      const int64_t cols = p.head_count * p.head_dim;
      const std::string shape =
          StrCat(p.head_count, " heads, ", p.head_count_kv, " KV heads, dimension ", p.head_dim,
                 type == model::KvType::kF16 ? ", fp16" : ", fp32");
      // Prefills of 20 tokens: five together (blocks 0-9), each alone (16-25).
      const std::vector<float> together =
          AttentionStep(*backend_, p, std::vector<int64_t>(5, 20), {0, 1, 2, 3, 4}, 0);
      for (int i = 0; i < 5; ++i) {
        const std::vector<float> alone = AttentionStep(*backend_, p, {20}, {i}, 16);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), together.begin() + i * 20 * cols))
            << shape << ": prefill of sequence " << i;
      }
      // Decodes at position 20 of eight sequences (blocks 0-15, prefilled
      // first): together, then each alone (rewriting its own key and value).
      const std::vector<int> eight = {0, 1, 2, 3, 4, 5, 6, 7};
      AttentionStep(*backend_, p, std::vector<int64_t>(8, 20), eight, 0);
      const std::vector<float> decodes =
          AttentionStep(*backend_, p, std::vector<int64_t>(8, 1), eight, 0, 20);
      for (int i = 0; i < 8; ++i) {
        const std::vector<float> alone = AttentionStep(*backend_, p, {1}, {i}, 0, 20);
        EXPECT_TRUE(std::equal(alone.begin(), alone.end(), decodes.begin() + i * cols))
            << shape << ": decode of sequence " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizedOutputTest,
                         ::testing::Values(TensorType::kQ4_1, TensorType::kQ8_0, TensorType::kQ4_K,
                                           TensorType::kQ6_K),
                         [](const ::testing::TestParamInfo<TensorType>& info) {
                           return std::string(
                               gguf::FindTensorTypeTraits(static_cast<uint32_t>(info.param))->name);
                         });

}  // namespace
}  // namespace llm::cpu
