// Time per token of the client-side sampler (sampler/sampler.h) over a
// vocabulary of 49,152 random logits, the size of SmolLM2's. Target: under
// 100 us per token on one core.
//
//   build/bin/sampler_bench [--benchmark_filter=...]
//
// Logits: 8 rows of N(0, sigma^2) values, cycled so that no single row stays
// hot in the branch predictors. sigma = 2 is roughly what a small model's
// logits look like; sigma = 0.5 ("flat") makes top-p keep most of the
// vocabulary, its slowest case. Each configuration runs on the kernels this CPU
// selects (AVX2 here) and on the portable baseline ones.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "sampler/kernels.h"
#include "sampler/rng.h"
#include "sampler/sampler.h"

namespace llm::sampler {
namespace {

constexpr int kVocab = 49152;
constexpr int kRows = 8;

std::vector<std::vector<float>> MakeRows(double sigma) {
  std::mt19937_64 gen(12345);
  std::normal_distribution<float> dist(0.0f, static_cast<float>(sigma));
  std::vector<std::vector<float>> rows(kRows, std::vector<float>(kVocab));
  for (auto& row : rows) {
    for (float& x : row) x = dist(gen);
  }
  return rows;
}

SamplingParams Config(int which) {
  SamplingParams p;
  switch (which) {
    case 0:  // greedy
      p.temperature = 0.0f;
      break;
    case 1:  // temperature 0.8 + top-k 40 + top-p 0.95
      p.temperature = 0.8f;
      p.top_k = 40;
      p.top_p = 0.95f;
      break;
    case 2:  // temperature 0.8 + top-p 0.95
      p.temperature = 0.8f;
      p.top_p = 0.95f;
      break;
    case 3:  // min-p 0.05 (temperature 1)
      p.min_p = 0.05f;
      break;
    case 4:  // temperature 0.8 + top-p 0.95 + repetition penalty 1.1 over 64 tokens
      p.temperature = 0.8f;
      p.top_p = 0.95f;
      p.repetition_penalty = 1.1f;
      break;
  }
  return p;
}

// Args: configuration, sigma * 10, kernels (0 = best for this CPU, 1 = baseline).
void BM_SampleToken(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const double sigma = static_cast<double>(state.range(1)) / 10.0;
  const bool baseline = state.range(2) == 1;
  const auto rows = MakeRows(sigma);
  const SamplingParams params = Config(which);
  std::vector<int32_t> history;
  for (int i = 0; i < 256; ++i) history.push_back((i * 7919) % kVocab);
  Sampler sampler(baseline ? internal::BaselineKernels() : internal::BestKernels());
  Rng rng(42);
  int64_t candidates = 0;
  int row = 0;
  for (auto _ : state) {
    auto s = sampler.SampleToken(LogitsInput::Full(rows[row]), params, history, rng);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    candidates += s->num_candidates;
    benchmark::DoNotOptimize(s->id);
    row = (row + 1) % kRows;
  }
  static const char* const kNames[] = {"greedy", "t0.8_topk40_topp0.95", "t0.8_topp0.95",
                                       "minp0.05", "t0.8_topp0.95_rep1.1"};
  state.SetLabel(std::string(kNames[which]) + " sigma=" + std::to_string(sigma).substr(0, 3) + " " +
                 (baseline ? "baseline" : internal::BestKernels().name));
  state.counters["candidates"] =
      benchmark::Counter(static_cast<double>(candidates), benchmark::Counter::kAvgIterations);
}

BENCHMARK(BM_SampleToken)
    ->ArgNames({"config", "sigma10", "baseline"})
    ->Args({0, 20, 0})
    ->Args({1, 20, 0})
    ->Args({2, 20, 0})
    ->Args({3, 20, 0})
    ->Args({4, 20, 0})
    ->Args({2, 5, 0})
    ->Args({0, 20, 1})
    ->Args({1, 20, 1})
    ->Args({2, 20, 1})
    ->Args({3, 20, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace llm::sampler

BENCHMARK_MAIN();
