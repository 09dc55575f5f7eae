// matmul_bench: single-threaded MatMulTile throughput for the shapes of the
// default model (SmolLM2-135M): a 1536x576 Q4_1 FFN matrix and the 49152x576
// Q8_0 tied LM head, with 1 token (decode, memory-bound) and 64 tokens
// (prefill, compute-bound). The *_Isa benchmarks run each SIMD kernel set
// (avx2, avx512vnni, amx; skipped when the CPU lacks it) at 1, 2, 4, 8, 16,
// 64 (and 256) tokens: a step that batches the decode of several sessions; BM_AllTypes
// every weight type at 1, 4, 16 and 64.
//
// Counters: GFLOP/s counts 2 * rows * cols * tokens per call; weight_GB/s is
// the weight bytes read per call (the decode roofline is memory bandwidth).
// The activations are quantized once outside the timed loop; BM_QuantizeQ8
// times that step separately, for the AVX2 and the AVX-512 kernel, and
// BM_SumExp the log-sum-exp's sum over a row of logits, BM_SiluMul SwiGLU.
// BM_IssueMix probes which zmm instructions of the VNNI tile share issue
// slots (see there).
//
//   build/bin/matmul_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "model_svc/formats/weight_formats.h"
#include "model_svc/kernels/quant.h"
#include "model_svc/kernels/quant_internal.h"
#include "model_svc/kernels/vec.h"

namespace llm::kernels {
// issue_probe_avx512.cc: `rounds` rounds of 8 vpdpbusd plus 8 instructions of
// mix `mix` (BM_IssueMix). AVX-512 VNNI only.
void IssueRoundsAvx512(int mix, int64_t rounds);
}  // namespace llm::kernels

namespace llm::kernels {
namespace {

// Random weights: random quant bytes with sane fp16 scales, or N(0, 1) floats.
std::vector<uint8_t> RandomWeights(TensorType type, int64_t rows, int64_t cols) {
  const size_t row_bytes = formats::RowBytes(type, cols);
  std::vector<uint8_t> w(rows * row_bytes);
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = rows * cols;
  const uint16_t d = FloatToHalf(0.01f), m = FloatToHalf(-0.08f);
  auto put_half = [&](size_t off, uint16_t h) { std::memcpy(&w[off], &h, 2); };
  switch (type) {
    case TensorType::kF32:
      for (int64_t i = 0; i < n; ++i) {
        const float f = normal(rng);
        std::memcpy(&w[4 * i], &f, 4);
      }
      return w;
    case TensorType::kF16:
      for (int64_t i = 0; i < n; ++i) put_half(2 * i, FloatToHalf(normal(rng)));
      return w;
    case TensorType::kBF16:
      for (int64_t i = 0; i < n; ++i) put_half(2 * i, FloatToBf16(normal(rng)));
      return w;
    default:
      break;
  }
  for (uint8_t& b : w) b = static_cast<uint8_t>(byte(rng));
  const bool k_quant =
      gguf::FindTensorTypeTraits(static_cast<uint32_t>(type))->block_elements == 256;
  const size_t block_bytes = formats::RowBytes(type, k_quant ? 256 : 32);
  for (size_t off = 0; off + block_bytes <= w.size(); off += block_bytes) {
    switch (type) {
      case TensorType::kQ4_1:
      case TensorType::kQ5_1:
      case TensorType::kQ4_K:  // d, then dmin
      case TensorType::kQ5_K:
        put_half(off, d);
        put_half(off + 2, type == TensorType::kQ4_K || type == TensorType::kQ5_K ? d : m);
        break;
      case TensorType::kQ6_K:
        put_half(off + 208, d);
        break;
      case TensorType::kQ3_K:
        put_half(off + 108, d);
        break;
      case TensorType::kQ2_K:
        put_half(off + 80, d);
        put_half(off + 82, d);
        break;
      default:
        put_half(off, d);
        break;
    }
  }
  return w;
}

struct Activations {
  std::vector<float> f32;
  std::vector<BlockQ8> q8;
  std::vector<ActRow> rows;
};

Activations RandomActivations(int64_t tokens, int64_t cols) {
  Activations a;
  std::mt19937 rng(2);
  std::normal_distribution<float> val(0.0f, 1.0f);
  a.f32.resize(tokens * cols);
  for (float& v : a.f32) v = val(rng);
  a.q8.resize(tokens * cols / kQ8Block);
  QuantizeQ8(a.f32.data(), a.q8.data(), tokens * cols);
  for (int64_t t = 0; t < tokens; ++t) {
    a.rows.push_back({a.f32.data() + t * cols, a.q8.data() + t * cols / kQ8Block});
  }
  return a;
}

using TileFn = void (*)(TensorType, const uint8_t*, size_t, int64_t, int64_t, int64_t,
                        const ActRow*, int64_t, float*, int64_t);

struct MatMulOptions {
  TileFn tile = MatMulTile;
  const char* isa = nullptr;  // label; the active kernel set by default
  int64_t copies = 1;         // distinct weight copies, used in turn (> 1: not in cache)
  int64_t row_grain = 0;      // rows per MatMulTile call (0: all rows in one call)
};

// state.range(0) tokens times a rows x cols matrix of `type`.
void RunMatMul(benchmark::State& state, TensorType type, int64_t rows, int64_t cols,
               const MatMulOptions& options = {}) {
  const int64_t tokens = state.range(0);
  const std::vector<uint8_t> one = RandomWeights(type, rows, cols);
  std::vector<uint8_t> w(one.size() * options.copies);
  for (int64_t c = 0; c < options.copies; ++c) {
    std::memcpy(w.data() + c * one.size(), one.data(), one.size());
  }
  const Activations a = RandomActivations(tokens, cols);
  std::vector<float> out(tokens * rows);
  const size_t row_bytes = formats::RowBytes(type, cols);
  const int64_t grain = options.row_grain > 0 ? options.row_grain : rows;
  int64_t copy = 0;
  for (auto _ : state) {
    const uint8_t* m = w.data() + copy * one.size();
    copy = (copy + 1) % options.copies;
    for (int64_t r = 0; r < rows; r += grain) {
      options.tile(type, m, row_bytes, cols, r, std::min(rows, r + grain), a.rows.data(), tokens,
                   out.data(), rows);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(rows) * cols * tokens;
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GB/s"] = benchmark::Counter(static_cast<double>(one.size()) * 1e-9,
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(options.isa != nullptr ? options.isa : std::string(KernelIsa()));
}

// One FFN matrix of the default model; it fits in L2, so with 1 token this
// measures the kernel, not memory.
void BM_Q4_1_1536x576(benchmark::State& state) { RunMatMul(state, TensorType::kQ4_1, 1536, 576); }
// The tied LM head (28 MiB): memory-bound with 1 token.
void BM_Q8_0_49152x576(benchmark::State& state) { RunMatMul(state, TensorType::kQ8_0, 49152, 576); }
// Decode as the model sees it: 120 copies (64 MiB) used in turn, so every call
// streams its weights from DRAM.
void BM_Q4_1_1536x576_Cold(benchmark::State& state) {
  RunMatMul(state, TensorType::kQ4_1, 1536, 576, {.copies = 120});
}
// One-token decode from DRAM on the shapes of the models the benchmarks use:
// type, rows, cols (SmolLM2's gate/up 1536 x 576 and down 576 x 1536, the 1B
// shape's 2048 x 2048 and FFN 8192 x 2048 and 2048 x 8192), with enough
// copies (>= 256 MiB) that every call streams its weights from DRAM; the last
// argument: rows per MatMulTile call (0: all).
void BM_DecodeCold(benchmark::State& state) {
  const auto type = static_cast<TensorType>(state.range(1));
  const int64_t rows = state.range(2), cols = state.range(3);
  const int64_t bytes = static_cast<int64_t>(formats::RowBytes(type, cols)) * rows;
  RunMatMul(
      state, type, rows, cols,
      {.copies = std::max<int64_t>(2, (int64_t{256} << 20) / bytes), .row_grain = state.range(4)});
  state.SetLabel(std::string(gguf::FindTensorTypeTraits(state.range(1))->name) + " " +
                 std::string(KernelIsa()));
}
// Small calls: 16 rows per call (each call interleaves the tokens). The engine
// gives prefill tasks 64 rows or more, and decode one row range per thread.
void BM_Q4_1_1536x576_Grain16(benchmark::State& state) {
  RunMatMul(state, TensorType::kQ4_1, 1536, 576, {.row_grain = 16});
}
void BM_Q4_1_1536x576_Scalar(benchmark::State& state) {
  RunMatMul(state, TensorType::kQ4_1, 1536, 576,
            {.tile = internal::MatMulTileScalar, .isa = "scalar"});
}

// The SIMD kernel sets side by side: state.range(1) = 0 for AVX2, 1 for
// AVX-512 VNNI, 2 for AMX int8 (whole 16 x 16 tiles; the rest VNNI).
void RunIsa(benchmark::State& state, TensorType type, int64_t rows, int64_t cols) {
  if (state.range(1) == 0) {
    if (!internal::CpuHasAvx2Fma()) return state.SkipWithError("no AVX2+FMA on this CPU");
    RunMatMul(state, type, rows, cols, {.tile = internal::MatMulTileAvx2, .isa = "avx2"});
  } else if (state.range(1) == 1) {
    if (!internal::CpuHasAvx512Vnni()) return state.SkipWithError("no AVX-512 VNNI on this CPU");
    RunMatMul(state, type, rows, cols,
              {.tile = internal::MatMulTileAvx512Vnni, .isa = "avx512vnni"});
  } else {
    if (!internal::CpuHasAmxInt8()) return state.SkipWithError("no AMX int8 on this CPU");
    RunMatMul(state, type, rows, cols, {.tile = internal::MatMulTileAmx, .isa = "amx"});
  }
}
void BM_Q4_1_1536x576_Isa(benchmark::State& state) { RunIsa(state, TensorType::kQ4_1, 1536, 576); }
void BM_Q8_0_49152x576_Isa(benchmark::State& state) {
  RunIsa(state, TensorType::kQ8_0, 49152, 576);
}

// Every supported type on a 576x1536 matrix (rows of 1536: K-quants fit).
void BM_AllTypes_576x1536(benchmark::State& state) {
  const auto type = static_cast<TensorType>(state.range(1));
  RunMatMul(state, type, 576, 1536);
  state.SetLabel(std::string(gguf::FindTensorTypeTraits(state.range(1))->name) + " " +
                 std::string(KernelIsa()));
}

BENCHMARK(BM_Q4_1_1536x576)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q8_0_49152x576)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q4_1_1536x576_Cold)->Arg(1)->Arg(16)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeCold)
    ->ArgsProduct({{1},  // 576 columns: no K-quants (super-blocks of 256)
                   {static_cast<int>(TensorType::kQ4_0), static_cast<int>(TensorType::kQ4_1),
                    static_cast<int>(TensorType::kQ5_0), static_cast<int>(TensorType::kQ8_0)},
                   {1536},
                   {576},
                   {0}})
    ->ArgsProduct({{1},
                   {static_cast<int>(TensorType::kQ4_0), static_cast<int>(TensorType::kQ4_1),
                    static_cast<int>(TensorType::kQ8_0)},
                   {576},
                   {1536},
                   {0}})
    ->ArgsProduct({{1},
                   {static_cast<int>(TensorType::kQ4_0), static_cast<int>(TensorType::kQ4_1),
                    static_cast<int>(TensorType::kQ5_0), static_cast<int>(TensorType::kQ8_0),
                    static_cast<int>(TensorType::kQ4_K), static_cast<int>(TensorType::kQ6_K)},
                   {2048, 8192},
                   {2048},
                   {0}})
    ->ArgsProduct({{1},
                   {static_cast<int>(TensorType::kQ4_0), static_cast<int>(TensorType::kQ4_K)},
                   {2048},
                   {8192},
                   {0}})
    // Gemma 3 270M's FFN down (640 x 2048) and rows of 640 columns (its LM
    // head's), in the ranges a 2-thread decode step hands out (8 a matrix).
    ->ArgsProduct({{1},
                   {static_cast<int>(TensorType::kQ4_K), static_cast<int>(TensorType::kQ6_K)},
                   {640},
                   {2048},
                   {80}})
    ->ArgsProduct({{1},
                   {static_cast<int>(TensorType::kQ5_0), static_cast<int>(TensorType::kQ8_0)},
                   {2048},
                   {640},
                   {256}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q4_1_1536x576_Grain16)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q4_1_1536x576_Scalar)->Arg(1)->Arg(64)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q4_1_1536x576_Isa)
    ->ArgsProduct({{1, 2, 4, 8, 16, 64, 256}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Q8_0_49152x576_Isa)
    ->ArgsProduct({{1, 2, 4, 8, 16, 64}, {0, 1, 2}})
    ->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_AllTypes_576x1536)
    ->ArgsProduct({{1, 4, 16, 64},
                   {static_cast<int>(TensorType::kF32), static_cast<int>(TensorType::kF16),
                    static_cast<int>(TensorType::kBF16), static_cast<int>(TensorType::kQ4_0),
                    static_cast<int>(TensorType::kQ4_1), static_cast<int>(TensorType::kQ5_0),
                    static_cast<int>(TensorType::kQ5_1), static_cast<int>(TensorType::kQ8_0),
                    static_cast<int>(TensorType::kQ2_K), static_cast<int>(TensorType::kQ3_K),
                    static_cast<int>(TensorType::kQ4_K), static_cast<int>(TensorType::kQ5_K),
                    static_cast<int>(TensorType::kQ6_K), static_cast<int>(TensorType::kIQ4_NL),
                    static_cast<int>(TensorType::kIQ4_XS)}})
    ->Unit(benchmark::kMicrosecond);

// The AVX2 (arg 0) or AVX-512 (arg 1) version of a kernel for a benchmark,
// which it labels; null, with the benchmark skipped, when the CPU lacks it.
template <typename Fn>
Fn PickKernel(benchmark::State& state, int64_t arg, Fn avx2, Fn avx512) {
  const bool wide = arg == 1;
  if (wide ? !internal::CpuHasAvx512Vnni() : !internal::CpuHasAvx2Fma()) {
    state.SkipWithError("the CPU lacks this kernel set");
    return nullptr;
  }
  state.SetLabel(wide ? "avx512" : "avx2");
  return wide ? avx512 : avx2;
}

// One row of activations quantized by the kernel set's QuantizeQ8 (arg 1:
// 0 avx2, 1 avx512; skipped when the CPU lacks it).
void BM_QuantizeQ8(benchmark::State& state) {
  const int64_t cols = state.range(0);
  const auto quantize =
      PickKernel(state, state.range(1), internal::QuantizeQ8Avx2, internal::QuantizeQ8Avx512);
  if (quantize == nullptr) return;
  const Activations a = RandomActivations(1, cols);
  std::vector<BlockQ8> q(cols / kQ8Block);
  for (auto _ : state) {
    quantize(a.f32.data(), q.data(), cols);
    benchmark::DoNotOptimize(q.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * cols);
}
BENCHMARK(BM_QuantizeQ8)->ArgsProduct({{576, 1536}, {0, 1}});

// The sum of the log-sum-exp over one logits row of the default model's
// vocabulary (every row a step returns pays it), by kernel (0 avx2, 1 avx512).
void BM_SumExp(benchmark::State& state) {
  const auto sum_exp =
      PickKernel(state, state.range(0), vec_internal::SumExpF32Avx2, vec_internal::SumExpF32Avx512);
  if (sum_exp == nullptr) return;
  const Activations a = RandomActivations(1, 49152);
  for (auto _ : state) benchmark::DoNotOptimize(sum_exp(a.f32.data(), 49152, 4.0f));
  state.SetItemsProcessed(state.iterations() * 49152);
}
BENCHMARK(BM_SumExp)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// SwiGLU over a 16-token step's 16 x 1536 gate and up values (the default
// model's FFN), by kernel (0 avx2, 1 avx512).
void BM_SiluMul(benchmark::State& state) {
  const auto silu_mul =
      PickKernel(state, state.range(0), vec_internal::SiluMulAvx2, vec_internal::SiluMulAvx512);
  if (silu_mul == nullptr) return;
  constexpr int64_t kN = 16 * 1536;
  const Activations gate = RandomActivations(1, kN), up = RandomActivations(1, kN);
  std::vector<float> out(kN);
  for (auto _ : state) {
    silu_mul(gate.f32.data(), up.f32.data(), out.data(), kN);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kN);
}
BENCHMARK(BM_SiluMul)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// Which zmm instructions of the AVX-512 VNNI tile compete for the same
// execution units (issue_probe_avx512.cc): 8 independent vpdpbusd chains,
// alone (mix 0) or beside 8 chains of vfmadd231ps (1), vmulps (2), vaddps (3)
// or vcvtdq2ps (4). per_round is the time of one round of the 8 (or 16)
// instructions: a mix that takes twice mix 0's time shares vpdpbusd's units,
// one that takes the same time does not. On the Zen 4 this was measured on,
// vpdpbusd, vfmadd and vmulps share one zmm instruction per cycle, vaddps and
// vcvtdq2ps do not (they add ~25%: the front end): the Q4_1 tile's 8
// vpdpbusd, 1 vmulps and 2 vfmadd per block and row take 11 cycles, its bound
// (bench/README.md).
void BM_IssueMix(benchmark::State& state) {
  if (!internal::CpuHasAvx512Vnni()) return state.SkipWithError("no AVX-512 VNNI on this CPU");
  constexpr int64_t kRounds = 1 << 16;
  static constexpr const char* kNames[] = {"vpdpbusd", "+vfmadd231ps", "+vmulps", "+vaddps",
                                           "+vcvtdq2ps"};
  const int mix = static_cast<int>(state.range(0));
  for (auto _ : state) IssueRoundsAvx512(mix, kRounds);
  state.counters["per_round"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kRounds,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(kNames[mix]);
}
BENCHMARK(BM_IssueMix)->DenseRange(0, 4);

}  // namespace
}  // namespace llm::kernels

BENCHMARK_MAIN();
