// The CPU backend's fused ops give the bits of the ops they fuse:
// AddRmsNorm is Add then RmsNorm, and a MatMul reading the output of RmsNorm,
// AddRmsNorm, SiluMul or Attention (which quantize it as they write it) equals a MatMul
// of the same values written afresh (which MatMul quantizes itself), also
// when another op changed the tensor in between.
#include "model_svc/backend/cpu/cpu_backend.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/gguf/gguf.h"
#include "gtest/gtest.h"
#include "model_svc/backend/backend.h"
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

class CpuBackendTest : public ::testing::TestWithParam<TensorType> {
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

TEST_P(CpuBackendTest, AddRmsNormIsAddThenRmsNorm) {
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
    }
  }
}

TEST_P(CpuBackendTest, MatMulAfterAQuantizingOpEqualsMatMulOfACopy) {
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

TEST_P(CpuBackendTest, MatMulAfterAttentionEqualsMatMulOfACopy) {
  const TensorType type = GetParam();
  constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 64, kBlock = 16;
  model::KvCacheShape kv;
  kv.num_blocks = 8;
  kv.block_size = kBlock;
  kv.layers = 1;
  kv.kv_dim = kKvHeads * kHeadDim;
  ASSERT_TRUE(backend_->AllocKvCache(kv).ok());
  const model::AttentionParams params{kHeads, kKvHeads, kHeadDim, 0.125f};
  const model::Weight& w = Weight(type, 64, kHeads * kHeadDim, 31);
  // Decode steps of 3 sequences (one item per KV head) and a prefill of 20
  // tokens beside one decode (items per query head).
  for (const std::vector<int64_t>& lengths :
       {std::vector<int64_t>{1, 1, 1}, std::vector<int64_t>{20, 1}}) {
    model::StepBatch batch;
    std::vector<std::vector<int32_t>> tables;  // the batch's spans point here
    for (size_t i = 0; i < lengths.size(); ++i) {
      tables.push_back({static_cast<int32_t>(2 * i), static_cast<int32_t>(2 * i + 1)});
    }
    int64_t rows = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      batch.sequences.push_back({rows, lengths[i], 0, tables[i]});
      for (int64_t t = 0; t < lengths[i]; ++t) {
        batch.tokens.push_back(0);
        batch.positions.push_back(static_cast<int32_t>(t));
      }
      rows += lengths[i];
    }
    ASSERT_TRUE(backend_->BeginStep(batch).ok());
    Tensor q = Alloc(rows, kHeads * kHeadDim, 41), k = Alloc(rows, kv.kv_dim, 42),
           v = Alloc(rows, kv.kv_dim, 43), out = Alloc(rows, kHeads * kHeadDim, 44);
    backend_->Attention(0, q, k, v, params, out);
    const std::vector<float> got = Product(out, w);
    EXPECT_EQ(got, ProductOfCopy(out, w)) << lengths.size() << " sequences";
    std::vector<model::Logits> logits;
    ASSERT_TRUE(backend_->ReadLogits(Tensor{nullptr, 0, 1}, {}, &logits).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CpuBackendTest,
                         ::testing::Values(TensorType::kQ4_1, TensorType::kQ8_0, TensorType::kQ4_K,
                                           TensorType::kF16),
                         [](const ::testing::TestParamInfo<TensorType>& info) {
                           return std::string(
                               gguf::FindTensorTypeTraits(static_cast<uint32_t>(info.param))->name);
                         });

}  // namespace
}  // namespace llm::cpu
