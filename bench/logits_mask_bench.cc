// logits_mask_bench: single-threaded cost of a token mask per step, for
// 49,152 random logits (SmolLM2's vocabulary): the server's encoding of one
// row (model::EncodeLogits) unmasked and masked, by mask density (the share
// of allowed tokens: 0.2% at a JSON structural position, 99% inside a
// string), and the mask's wire work (the client's cheapest encoding, the
// server's validating decode).
//
//   build/bin/logits_mask_bench
//
//   BM_Encode/E/D:     EncodeLogits, E = 0 float32, 1 top-1, 40 top-40;
//                      D = allowed per mille (-1: no mask).
//   BM_ToProto/D:      TokenMaskToProto (cheapest encoding), per mask.
//   BM_FromProto/D:    TokenMaskFromProto of that message, per mask.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/token_mask.h"
#include "common/token_mask_proto.h"
#include "model_svc/core/logits.h"

namespace llm {
namespace {

constexpr int64_t kVocab = 49152;

std::vector<float> Row() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> row(kVocab);
  for (float& x : row) x = normal(rng);
  return row;
}

// Allowed tokens in runs, as a grammar allows them (a token class is
// contiguous in no vocabulary, but neither is it uniform): runs of 1..64
// with the given share allowed.
TokenMask Mask(int64_t per_mille) {
  std::mt19937 rng(2);
  std::uniform_int_distribution<int> run(1, 64);
  std::bernoulli_distribution allow(static_cast<double>(per_mille) / 1000);
  TokenMask m = TokenMask::AllowNone(kVocab);
  for (int64_t i = 0; i < kVocab;) {
    const int64_t n = run(rng);
    const bool on = allow(rng);
    for (int64_t j = i; j < std::min(i + n, kVocab); ++j) {
      if (on) m.Allow(j);
    }
    i += n;
  }
  if (m.AllowsNone()) m.Allow(kVocab / 2);
  return m;
}

void BM_Encode(benchmark::State& state) {
  const std::vector<float> row = Row();
  const int64_t top = state.range(0), per_mille = state.range(1);
  const TokenMask mask = Mask(std::max<int64_t>(per_mille, 0));
  model::LogitsSpec spec;
  spec.encoding = top == 0 ? model::LogitsEncoding::kFloat32 : model::LogitsEncoding::kTopN;
  spec.top_n = static_cast<int32_t>(top);
  spec.mask = per_mille < 0 ? nullptr : &mask;
  model::Logits out;
  for (auto _ : state) {
    model::EncodeLogits(row, spec, &out);
    benchmark::DoNotOptimize(out.log_sum_exp);
  }
}
BENCHMARK(BM_Encode)->ArgsProduct({{0, 1, 40}, {-1, 2, 500, 990, 1000}});

void BM_ToProto(benchmark::State& state) {
  const TokenMask mask = Mask(state.range(0));
  v1::TokenMask proto;
  for (auto _ : state) {
    TokenMaskToProto(mask, &proto);
    benchmark::DoNotOptimize(proto);
  }
  state.counters["bytes"] = static_cast<double>(proto.ByteSizeLong());
}
BENCHMARK(BM_ToProto)->Arg(2)->Arg(500)->Arg(990)->Arg(1000);

void BM_FromProto(benchmark::State& state) {
  const TokenMask mask = Mask(state.range(0));
  v1::TokenMask proto;
  TokenMaskToProto(mask, &proto);
  for (auto _ : state) {
    absl::StatusOr<TokenMask> m = TokenMaskFromProto(proto, kVocab, "mask");
    benchmark::DoNotOptimize(m);
  }
}
BENCHMARK(BM_FromProto)->Arg(2)->Arg(500)->Arg(990)->Arg(1000);

}  // namespace
}  // namespace llm

BENCHMARK_MAIN();
