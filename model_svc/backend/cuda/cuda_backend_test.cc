// Op parity, in the manner of llama.cpp's test-backend-ops: every backend op
// on random inputs of several shapes, CUDA against the CPU backend (the
// reference), compared by normalized error max|cuda - cpu| / max|cpu| with a
// threshold per op. Skipped, with the reason, when no CUDA device is usable.
//
// Thresholds. Elementwise ops, RMSNorm, RoPE and attention with an fp32
// cache compute the same fp32 formulas in another order: 1e-5. Embedding
// rows of quantized tables are rounded to fp16 on the device: 1e-3. MatMul:
// the CPU rounds activations to int8 blocks for quantized weights, the GPU
// to fp16 (bf16 for BF16 weights): 3e-2 quantized (the CPU's own error
// against an exact reference is 1.5e-2 .. 3e-2, llama_model_test.cc), 1e-2
// F16/BF16, 1e-5 F32. Attention with an fp16 cache: 1e-3.
#include "model_svc/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model_svc/backend/cpu/cpu_backend.h"
#include "model_svc/backend/cuda/skip_without_cuda.h"
#include "model_svc/core/backend.h"
#include "model_svc/formats/weight_formats.h"
#include "model_svc/kernels/quant.h"
#include "model_svc/testing/reference_quant.h"

namespace llm::cuda {
namespace {

using gguf::TensorType;
using model::Backend;
using model::LogitsEncoding;
using model::LogitsSpec;
using model::StepBatch;
using model::Tensor;
using model::WeightView;

std::vector<float> RandomValues(int64_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(gen);
  return v;
}

double NormalizedError(std::span<const float> got, std::span<const float> want) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max<double>(max_diff, std::fabs(got[i] - want[i]));
    max_ref = std::max<double>(max_ref, std::fabs(want[i]));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

// A weight's bytes (kept alive: the CPU backend points into them).
struct HostWeight {
  std::string bytes;
  WeightView view;
};

HostWeight MakeWeight(TensorType type, int64_t rows, int64_t cols, uint64_t seed, float scale) {
  HostWeight w;
  auto bytes = model::testing::QuantizeMatrix(type, RandomValues(rows * cols, seed, scale), cols);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  w.bytes = *std::move(bytes);
  w.view.name = "w";
  w.view.type = type;
  w.view.rows = rows;
  w.view.cols = cols;
  w.view.data = reinterpret_cast<const uint8_t*>(w.bytes.data());
  w.view.row_bytes = w.bytes.size() / rows;
  return w;
}

// The same op run on both backends.
class OpParity : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_CUDA();
    cpu_ = cpu::CreateCpuBackend({.threads = 2});
    // Graphs off: the op tests run one-token steps of many shapes, which the
    // backend would take for decode steps (cuda_model_test covers graphs).
    auto cuda = CreateCudaBackend({.graphs = false});
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    cuda_ = *std::move(cuda);
  }

  // A tensor on each backend with the same contents.
  struct Pair {
    Tensor cpu, cuda;
  };
  Pair Alloc(int64_t rows, int64_t cols, const std::vector<float>& values = {}) {
    Pair p;
    p.cpu = *cpu_->AllocTensor(rows, cols);
    p.cuda = *cuda_->AllocTensor(rows, cols);
    if (!values.empty()) {
      EXPECT_TRUE(cpu_->WriteTensor(p.cpu, values).ok());
      EXPECT_TRUE(cuda_->WriteTensor(p.cuda, values).ok());
    }
    return p;
  }

  double Error(const Pair& p) {
    std::vector<float> a(p.cpu.rows * p.cpu.cols), b(a.size());
    EXPECT_TRUE(cpu_->ReadTensor(p.cpu, a).ok());
    absl::Status s = cuda_->ReadTensor(p.cuda, b);
    EXPECT_TRUE(s.ok()) << s;
    return NormalizedError(b, a);
  }

  // Both backends: a step of one sequence of n tokens at positions
  // [start, start + n) over blocks 0, 1, ... (must outlive the step).
  void Begin(StepBatch& batch) {
    ASSERT_TRUE(cpu_->BeginStep(batch).ok());
    absl::Status s = cuda_->BeginStep(batch);
    ASSERT_TRUE(s.ok()) << s;
  }
  // Ends the step on both backends (no logits).
  void End() {
    std::vector<model::Logits> out;
    ASSERT_TRUE(cpu_->ReadLogits(Tensor{nullptr, 0, 1}, {}, &out).ok());
    absl::Status s = cuda_->ReadLogits(Tensor{nullptr, 0, 1}, {}, &out);
    ASSERT_TRUE(s.ok()) << s;
  }

  // A weight whose bytes live as long as the fixture: a backend may keep
  // pointing into a view's bytes or share one upload among views of the
  // same bytes (the CPU backend's copies are keyed by their address), so
  // bytes freed and reused by the next weight would alias the last one.
  const HostWeight& Weight(TensorType type, int64_t rows, int64_t cols, uint64_t seed,
                           float scale) {
    return weights_.emplace_back(MakeWeight(type, rows, cols, seed, scale));
  }

  // A step of one sequence over `blocks`, which live as long as the fixture
  // (the step's block table is a span).
  StepBatch Sequence(int64_t n, int64_t start, std::vector<int32_t> blocks);

  // y = x * weight^T on both backends, in a step of x's rows.
  void MatMulBoth(const model::Weight& on_cpu, const model::Weight& on_cuda, const Pair& x,
                  const Pair& y) {
    StepBatch batch = Sequence(x.cpu.rows, 0, {0, 1, 2, 3});
    Begin(batch);
    const model::MatMulTarget tc[] = {{&on_cpu, y.cpu}};
    const model::MatMulTarget tg[] = {{&on_cuda, y.cuda}};
    cpu_->MatMul(x.cpu, tc);
    cuda_->MatMul(x.cuda, tg);
    End();
  }

  std::deque<HostWeight> weights_;  // before the backends: destroyed after them
  std::deque<std::vector<int32_t>> block_tables_;
  std::unique_ptr<Backend> cpu_, cuda_;
};

StepBatch OneSequence(int64_t n, int64_t start, std::span<const int32_t> blocks,
                      int64_t vocab = 1000) {
  StepBatch b;
  for (int64_t i = 0; i < n; ++i) {
    b.tokens.push_back(static_cast<int32_t>((i * 7919) % vocab));
    b.positions.push_back(static_cast<int32_t>(start + i));
  }
  b.sequences.push_back({0, n, start, blocks});
  return b;
}

StepBatch OpParity::Sequence(int64_t n, int64_t start, std::vector<int32_t> blocks) {
  return OneSequence(n, start, block_tables_.emplace_back(std::move(blocks)));
}

TEST_F(OpParity, RmsNorm) {
  for (int64_t rows : {1, 7, 64}) {
    for (int64_t cols : {64, 576, 4096}) {
      const HostWeight& w = Weight(TensorType::kF32, 1, cols, 3, 0.1f);
      auto wc = *cpu_->UploadWeight(w.view);
      auto wg = *cuda_->UploadWeight(w.view);
      Pair x = Alloc(rows, cols, RandomValues(rows * cols, rows + cols));
      Pair out = Alloc(rows, cols);
      StepBatch batch = Sequence(rows, 0, {0, 1, 2, 3});
      Begin(batch);
      cpu_->RmsNorm(x.cpu, *wc, 1e-5f, out.cpu);
      cuda_->RmsNorm(x.cuda, *wg, 1e-5f, out.cuda);
      End();
      EXPECT_LT(Error(out), 1e-5) << rows << "x" << cols;
    }
  }
}

TEST_F(OpParity, MatMulEveryWeightType) {
  const TensorType types[] = {TensorType::kF32,  TensorType::kF16,    TensorType::kBF16,
                              TensorType::kQ4_0, TensorType::kQ4_1,   TensorType::kQ5_0,
                              TensorType::kQ5_1, TensorType::kQ8_0,   TensorType::kQ2_K,
                              TensorType::kQ3_K, TensorType::kQ4_K,   TensorType::kQ5_K,
                              TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS};
  for (TensorType type : types) {
    for (int64_t rows : {1, 5, 33}) {
      for (auto [out_features, in_features] :
           {std::pair<int64_t, int64_t>{256, 256}, {192, 768}, {1536, 512}}) {
        const float scale = 1.0f / std::sqrt(static_cast<float>(in_features));
        const HostWeight& w = Weight(type, out_features, in_features, 11, scale);
        auto wc = *cpu_->UploadWeight(w.view);
        auto wg = *cuda_->UploadWeight(w.view);
        Pair x = Alloc(rows, in_features, RandomValues(rows * in_features, 5));
        Pair y = Alloc(rows, out_features);
        MatMulBoth(*wc, *wg, x, y);
        const double limit = type == TensorType::kF32                                ? 1e-5
                             : type == TensorType::kF16 || type == TensorType::kBF16 ? 1e-2
                                                                                     : 3e-2;
        EXPECT_LT(Error(y), limit) << "type " << static_cast<int>(type) << " rows " << rows << " "
                                   << out_features << "x" << in_features;
      }
    }
  }
}

// The weights the device keeps quantized (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K,
// Q6_K), against an exact product with the dequantized weights: the
// matrix-vector kernel (1..8 rows: fp32 activations, 1e-5) and the fp16
// tiles through cuBLAS (more rows: activations rounded to fp16, 2e-3), with
// row counts that are not multiples of the 32-row groups, rows of several
// blocks (K-quants: of several 256-element super-blocks), and the CPU
// backend alongside.
TEST_F(OpParity, QuantizedWeightsAgainstTheirDequantizedProduct) {
  using Shape = std::pair<int64_t, int64_t>;
  const std::vector<Shape> small_blocks = {{200, 96}, {33, 64}, {576, 576}};
  const std::vector<Shape> super_blocks = {{200, 512}, {33, 256}, {72, 768}};
  for (TensorType type : {TensorType::kQ8_0, TensorType::kQ4_0, TensorType::kQ4_1,
                          TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    const bool k_quant = formats::BlockElements(type) == 256;
    for (auto [out_features, in_features] : k_quant ? super_blocks : small_blocks) {
      const HostWeight& w =
          Weight(type, out_features, in_features, 17, 1.0f / std::sqrt(in_features));
      auto wc = *cpu_->UploadWeight(w.view);
      auto wg = *cuda_->UploadWeight(w.view);
      std::vector<float> dense(out_features * in_features);
      for (int64_t o = 0; o < out_features; ++o) {
        kernels::DequantizeRow(type, w.view.data + o * w.view.row_bytes, &dense[o * in_features],
                               in_features);
      }
      for (int64_t rows : {1, 2, 3, 4, 5, 6, 7, 8, 9, 40}) {
        const std::vector<float> xs = RandomValues(rows * in_features, rows);
        Pair x = Alloc(rows, in_features, xs);
        Pair y = Alloc(rows, out_features);
        MatMulBoth(*wc, *wg, x, y);
        std::vector<float> got(rows * out_features), want(got.size());
        ASSERT_TRUE(cuda_->ReadTensor(y.cuda, got).ok());
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t o = 0; o < out_features; ++o) {
            double sum = 0;
            for (int64_t i = 0; i < in_features; ++i) {
              sum += static_cast<double>(dense[o * in_features + i]) * xs[r * in_features + i];
            }
            want[r * out_features + o] = static_cast<float>(sum);
          }
        }
        const double limit = rows <= 8 ? 1e-5 : 2e-3;
        EXPECT_LT(NormalizedError(got, want), limit)
            << "type " << static_cast<int>(type) << " rows " << rows << " " << out_features << "x"
            << in_features;
        EXPECT_LT(Error(y), 3e-2) << "against the CPU backend";
      }
    }
  }
}

TEST_F(OpParity, EmbedEveryTableType) {
  for (TensorType type :
       {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0,
        TensorType::kQ4_1, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K}) {
    const HostWeight& table = Weight(type, 1000, 256, 13, 1.0f);
    auto tc = *cpu_->UploadWeight(table.view);
    auto tg = *cuda_->UploadWeight(table.view);
    Pair out = Alloc(9, 256);
    StepBatch batch = Sequence(9, 0, {0});
    Begin(batch);
    cpu_->Embed(*tc, out.cpu);
    cuda_->Embed(*tg, out.cuda);
    End();
    EXPECT_LT(Error(out), type == TensorType::kF32 ? 1e-7 : 1e-3) << static_cast<int>(type);
  }
}

TEST_F(OpParity, Rope) {
  for (auto [head_dim, rope_dim] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}, {64, 32}}) {
    const int64_t rows = 40, q_cols = 4 * head_dim, k_cols = 2 * head_dim;
    Pair q = Alloc(rows, q_cols, RandomValues(rows * q_cols, 21));
    Pair k = Alloc(rows, k_cols, RandomValues(rows * k_cols, 22));
    StepBatch batch = Sequence(rows, 1000, {});
    Begin(batch);
    const model::RopeParams p{head_dim, rope_dim, 100000.0f, 1.0f};
    cpu_->Rope(q.cpu, k.cpu, p);
    cuda_->Rope(q.cuda, k.cuda, p);
    End();
    EXPECT_LT(Error(q), 1e-5) << head_dim << "/" << rope_dim;
    EXPECT_LT(Error(k), 1e-5) << head_dim << "/" << rope_dim;
  }
}

TEST_F(OpParity, SiluMulAndAdd) {
  const int64_t rows = 17, cols = 1536;
  Pair gate = Alloc(rows, cols, RandomValues(rows * cols, 31, 3.0f));
  Pair up = Alloc(rows, cols, RandomValues(rows * cols, 32));
  Pair out = Alloc(rows, cols);
  StepBatch batch = Sequence(rows, 0, {0, 1});
  Begin(batch);
  cpu_->SiluMul(gate.cpu, up.cpu, out.cpu);
  cuda_->SiluMul(gate.cuda, up.cuda, out.cuda);
  cpu_->Add(up.cpu, out.cpu);
  cuda_->Add(up.cuda, out.cuda);
  End();
  EXPECT_LT(Error(out), 1e-6);
  EXPECT_LT(Error(up), 1e-6);
}

// A mixed batch over a paged cache: a first step writes history for two
// sequences; the second step has a decode of one, a prefill chunk of the
// other, and a new sequence, with scattered block tables.
TEST_F(OpParity, AttentionMixedBatchOverPagedCache) {
  for (model::KvType kv_type : {model::KvType::kF32, model::KvType::kF16}) {
    for (auto [heads, kv_heads, head_dim] :
         {std::tuple<int64_t, int64_t, int64_t>{9, 3, 64}, {8, 2, 128}, {4, 4, 32}}) {
      ASSERT_NO_FATAL_FAILURE(SetUp());
      const int32_t block_size = 16;
      model::KvCacheShape shape{64, block_size, 2, kv_heads * head_dim, kv_type, kv_type};
      ASSERT_TRUE(cpu_->AllocKvCache(shape).ok());
      ASSERT_TRUE(cuda_->AllocKvCache(shape).ok());
      const model::AttentionParams p{heads, kv_heads, head_dim,
                                     1.0f / std::sqrt(static_cast<float>(head_dim))};
      const std::vector<int32_t> blocks_a = {7, 3, 40, 12, 9}, blocks_b = {1, 60, 22},
                                 blocks_c = {5, 33};
      const int64_t q_cols = heads * head_dim, kv_cols = kv_heads * head_dim;
      auto run = [&](StepBatch& batch, uint64_t seed) {
        const int64_t n = batch.tokens.size();
        Pair q = Alloc(n, q_cols, RandomValues(n * q_cols, seed));
        Pair k = Alloc(n, kv_cols, RandomValues(n * kv_cols, seed + 1));
        Pair v = Alloc(n, kv_cols, RandomValues(n * kv_cols, seed + 2));
        Pair out = Alloc(n, q_cols);
        Begin(batch);
        for (int64_t layer = 0; layer < 2; ++layer) {
          cpu_->Attention(layer, q.cpu, k.cpu, v.cpu, p, out.cpu);
          cuda_->Attention(layer, q.cuda, k.cuda, v.cuda, p, out.cuda);
        }
        End();
        return Error(out);
      };
      // Step 1: sequence a prefills 50 tokens, sequence b 20.
      StepBatch first;
      for (int64_t i = 0; i < 70; ++i) {
        first.tokens.push_back(0);
        first.positions.push_back(static_cast<int32_t>(i < 50 ? i : i - 50));
      }
      first.sequences = {{0, 50, 0, std::span<const int32_t>(blocks_a).first(4)},
                         {50, 20, 0, std::span<const int32_t>(blocks_b).first(2)}};
      const double limit = kv_type == model::KvType::kF32 ? 1e-5 : 1e-3;
      EXPECT_LT(run(first, 100), limit);
      // Step 2: a decodes 1 (position 50), b prefills 15 more (20..34), c new (3).
      StepBatch second;
      for (int64_t i = 0; i < 19; ++i) second.tokens.push_back(0);
      second.positions.push_back(50);
      for (int32_t i = 0; i < 15; ++i) second.positions.push_back(20 + i);
      for (int32_t i = 0; i < 3; ++i) second.positions.push_back(i);
      second.sequences = {{0, 1, 50, std::span<const int32_t>(blocks_a).first(4)},
                          {1, 15, 20, std::span<const int32_t>(blocks_b).first(3)},
                          {16, 3, 0, std::span<const int32_t>(blocks_c).first(1)}};
      EXPECT_LT(run(second, 200), limit) << heads << "/" << kv_heads << "/" << head_dim
                                         << " f16=" << (kv_type == model::KvType::kF16);
    }
  }
}

TEST_F(OpParity, GatherAndReadLogitsInEveryEncoding) {
  const int64_t rows = 6, vocab = 49152;
  Pair x = Alloc(rows, vocab, RandomValues(rows * vocab, 41, 4.0f));
  Pair gathered = Alloc(5, vocab);
  StepBatch batch = Sequence(rows, 0, {0});
  batch.logit_rows = {5, 0, 3, 3, 1};
  const LogitsSpec specs[] = {{LogitsEncoding::kFloat32, 0},
                              {LogitsEncoding::kFloat16, 0},
                              {LogitsEncoding::kTopN, 1},
                              {LogitsEncoding::kTopN, 40},
                              {LogitsEncoding::kTopN, 2000}};  // beyond the device's top-N
  std::vector<model::Logits> want, got;
  Begin(batch);
  cpu_->GatherLogitRows(x.cpu, gathered.cpu);
  cuda_->GatherLogitRows(x.cuda, gathered.cuda);
  ASSERT_TRUE(cpu_->ReadLogits(gathered.cpu, specs, &want).ok());
  absl::Status s = cuda_->ReadLogits(gathered.cuda, specs, &got);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].encoding, want[i].encoding) << i;
    EXPECT_EQ(got[i].values, want[i].values) << i;
    EXPECT_EQ(got[i].halves, want[i].halves) << i;
    EXPECT_EQ(got[i].top_ids, want[i].top_ids) << i;
    EXPECT_EQ(got[i].top_logits, want[i].top_logits) << i;
    EXPECT_NEAR(got[i].log_sum_exp, want[i].log_sum_exp, 1e-5 * std::fabs(want[i].log_sum_exp))
        << i;
  }
}

TEST(CudaBackend, ClearErrorWithoutADevice) {
  if (CudaDeviceStatus().ok()) GTEST_SKIP() << "a CUDA device is present";
  auto backend = CreateCudaBackend({});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(backend.status().message().find("CUDA"), std::string::npos) << backend.status();
}

// A step the backend refused leaves nothing to read: ReadLogits says so
// (it dereferenced the missing step before).
TEST(CudaBackend, ReadLogitsAfterARefusedStepIsAnError) {
  SKIP_WITHOUT_CUDA();
  auto backend = CreateCudaBackend({.graphs = false});
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->AllocTensor(2, 64).ok());
  const std::vector<int32_t> blocks = {0};
  StepBatch batch = OneSequence(8, 0, blocks);  // more rows than any tensor has
  EXPECT_FALSE((*backend)->BeginStep(batch).ok());
  std::vector<model::Logits> out;
  EXPECT_FALSE((*backend)->ReadLogits(Tensor{nullptr, 0, 1}, {}, &out).ok());
}

TEST(CudaBackend, RejectsAMissingDevice) {
  SKIP_WITHOUT_CUDA();
  auto backend = CreateCudaBackend({.device = 1000});
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace llm::cuda
