// attention_bench: single-threaded time of the attention kernels for one
// work item of the CPU backend's decode attention, in the default model's
// shape (SmolLM2-135M: 3 query heads share a KV head of dimension 64, fp16
// cache, blocks of 16 positions): scores of every position (DotRows), then
// the weighted sum of the values (AxpyRows), for `positions` cached positions.
// The *Gemma3 variants take Gemma 3 270M's shape instead (4 query heads share
// a KV head of dimension 256).
//
//   BM_HeadByHead: the 3 heads one after the other (each reads the rows).
//   BM_Heads:      DotRowsHeads / AxpyRowsHeads (each row read once), the
//                  kernels the backend runs (AVX-512 where the CPU has it).
//   BM_HeadsAvx2:  the same with the AVX2 kernels, for comparison.
//
//   BM_PrefillScoresByToken / BM_PrefillScores: the scores of a prefill
//                  chunk's 16 tokens x the group's heads over `positions`
//                  cached rows (from the core's cache), token by token with
//                  DotRowsHeads (the backend before) or all at once with
//                  DotRowsQueries (each 16 rows converted once for all the
//                  queries; the same bits). Counter per_score: seconds a
//                  score.
//
// Arguments: positions, and whether the rows come from memory (1: the item
// walks a 256 MiB pool of blocks, as a 16-session step's items come from
// DRAM) or from the core's cache (0: the same item again). Softmax is left
// out: it is the same in both.
//
//   build/bin/attention_bench
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/half.h"
#include "model_svc/kernels/vec.h"

namespace llm::kernels {
namespace {

constexpr int kBlock = 16;
constexpr int64_t kPoolBytes = int64_t{256} << 20;

template <int kGroup, int kHeadDim>
struct Setup {
  explicit Setup(int64_t positions, bool cold) {
    const int64_t blocks_per_item = (positions + kBlock - 1) / kBlock;
    const int64_t block_elems = 2 * kBlock * kHeadDim;  // keys then values
    const int64_t pool_blocks = cold ? kPoolBytes / (block_elems * 2) : blocks_per_item;
    pool.resize(pool_blocks * block_elems);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (uint16_t& h : pool) h = FloatToHalf(normal(rng));
    num_items = pool_blocks / blocks_per_item;
    // Each item's blocks scattered over the pool, as the block manager leaves them.
    std::vector<int64_t> order(num_items * blocks_per_item);
    for (int64_t i = 0; i < static_cast<int64_t>(order.size()); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    tables.assign(order.begin(), order.end());
    this->blocks_per_item = blocks_per_item;
    this->positions = positions;
    for (int h = 0; h < kGroup; ++h) {
      q[h].resize(kHeadDim);
      for (float& x : q[h]) x = HalfToFloat(FloatToHalf(normal(rng)));
      scores[h].assign(blocks_per_item * kBlock, 1.0f / static_cast<float>(positions));
      out[h].assign(kHeadDim, 0.0f);
    }
  }
  const uint16_t* Keys(int64_t block) const { return pool.data() + block * 2 * kBlock * kHeadDim; }
  const uint16_t* Values(int64_t block) const { return Keys(block) + kBlock * kHeadDim; }

  std::vector<uint16_t> pool;
  std::vector<int64_t> tables;
  int64_t num_items = 0, blocks_per_item = 0, positions = 0;
  std::vector<float> q[kGroup], scores[kGroup], out[kGroup];
};

void Prefetch(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i);
}

enum class Mode { kHeadByHead, kHeads, kHeadsAvx2 };

template <Mode kMode, int kGroup = 3, int kHeadDim = 64>
void BM_Item(benchmark::State& state) {
  Setup<kGroup, kHeadDim> s(state.range(0), state.range(1) != 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  int64_t item = 0;
  for (auto _ : state) {
    const int64_t* table = s.tables.data() + item * s.blocks_per_item;
    item = (item + 1) % s.num_items;
    constexpr int64_t kHeadBytes = kBlock * kHeadDim * 2;
    const float* qs[kGroup];
    float* sc[kGroup];
    float* os[kGroup];
    for (int h = 0; h < kGroup; ++h) {
      qs[h] = s.q[h].data();
      sc[h] = s.scores[h].data();
      os[h] = s.out[h].data();
    }
    for (int64_t j = 0; j < s.positions; j += kBlock) {
      const int64_t rows = std::min<int64_t>(kBlock, s.positions - j);
      const uint16_t* k = s.Keys(table[j / kBlock]);
      // As the backend does: the next block's keys, this block's values.
      if (j + kBlock < s.positions) Prefetch(s.Keys(table[j / kBlock + 1]), kHeadBytes);
      Prefetch(s.Values(table[j / kBlock]), kHeadBytes);
      if constexpr (kMode != Mode::kHeadByHead) {
        float* scj[kGroup];
        for (int h = 0; h < kGroup; ++h) scj[h] = sc[h] + j;
        if constexpr (kMode == Mode::kHeads) {
          DotRowsHeads(qs, kGroup, k, kHeadDim, rows, kHeadDim, scale, scj);
        } else {
          vec_internal::DotRowsHeadsAvx2(qs, kGroup, k, kHeadDim, rows, kHeadDim, scale, scj);
        }
      } else {
        for (int h = 0; h < kGroup; ++h)
          DotRows(qs[h], k, kHeadDim, rows, kHeadDim, scale, sc[h] + j);
      }
    }
    for (int64_t j = 0; j < s.positions; j += kBlock) {
      const int64_t rows = std::min<int64_t>(kBlock, s.positions - j);
      const uint16_t* v = s.Values(table[j / kBlock]);
      if constexpr (kMode != Mode::kHeadByHead) {
        const float* wj[kGroup];
        for (int h = 0; h < kGroup; ++h) wj[h] = sc[h] + j;
        if constexpr (kMode == Mode::kHeads) {
          AxpyRowsHeads(wj, kGroup, v, kHeadDim, rows, kHeadDim, os);
        } else {
          vec_internal::AxpyRowsHeadsAvx2(wj, kGroup, v, kHeadDim, rows, kHeadDim, os);
        }
      } else {
        for (int h = 0; h < kGroup; ++h) AxpyRows(sc[h] + j, v, kHeadDim, rows, kHeadDim, os[h]);
      }
    }
    benchmark::DoNotOptimize(s.out[0].data());
    benchmark::ClobberMemory();
  }
  state.counters["positions"] = static_cast<double>(s.positions);
}

// A prefill chunk's scores over the cached rows, block by block.
template <bool kAllAtOnce, int kGroup = 3, int kHeadDim = 64>
void BM_PrefillScores(benchmark::State& state) {
  constexpr int kTokens = 16, kQueries = kTokens * kGroup;
  Setup<kGroup, kHeadDim> s(state.range(0), false);
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> q(kQueries, std::vector<float>(kHeadDim));
  std::vector<std::vector<float>> scores(kQueries, std::vector<float>(s.positions));
  for (auto& v : q) {
    for (float& x : v) x = HalfToFloat(FloatToHalf(normal(rng)));
  }
  const float* qs[kQueries];
  for (int i = 0; i < kQueries; ++i) qs[i] = q[i].data();
  for (auto _ : state) {
    for (int64_t j = 0; j < s.positions; j += kBlock) {
      const int64_t rows = std::min<int64_t>(kBlock, s.positions - j);
      const uint16_t* k = s.Keys(s.tables[j / kBlock]);
      float* out[kQueries];
      for (int i = 0; i < kQueries; ++i) out[i] = scores[i].data() + j;
      if constexpr (kAllAtOnce) {
        int64_t begin[kQueries], end[kQueries];
        std::fill_n(begin, kQueries, 0);
        std::fill_n(end, kQueries, rows);
        DotRowsQueries(qs, kQueries, k, kHeadDim, rows, kHeadDim, scale, begin, end, out);
      } else {
        for (int t = 0; t < kTokens; ++t) {
          DotRowsHeads(qs + t * kGroup, kGroup, k, kHeadDim, rows, kHeadDim, scale,
                       out + t * kGroup);
        }
      }
    }
    benchmark::DoNotOptimize(scores[0].data());
    benchmark::ClobberMemory();
  }
  // Seconds per score (printed as e.g. 2.5n).
  state.counters["per_score"] = benchmark::Counter(
      static_cast<double>(kQueries * s.positions),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void PrefillArgs(benchmark::internal::Benchmark* b) {
  b->Args({1024, 0})->ArgNames({"positions", "cold"});
}

BENCHMARK(BM_PrefillScores<false>)->Name("BM_PrefillScoresByToken")->Apply(PrefillArgs);
BENCHMARK(BM_PrefillScores<true>)->Name("BM_PrefillScores")->Apply(PrefillArgs);
BENCHMARK(BM_PrefillScores<false, 4, 256>)
    ->Name("BM_PrefillScoresByTokenGemma3")
    ->Apply(PrefillArgs);
BENCHMARK(BM_PrefillScores<true, 4, 256>)->Name("BM_PrefillScoresGemma3")->Apply(PrefillArgs);

void Args(benchmark::internal::Benchmark* b) {
  for (int cold : {0, 1}) {
    for (int positions : {64, 512}) b->Args({positions, cold});
  }
  b->ArgNames({"positions", "cold"});
}

BENCHMARK(BM_Item<Mode::kHeadByHead>)->Name("BM_HeadByHead")->Apply(Args);
BENCHMARK(BM_Item<Mode::kHeads>)->Name("BM_Heads")->Apply(Args);
BENCHMARK(BM_Item<Mode::kHeadsAvx2>)->Name("BM_HeadsAvx2")->Apply(Args);
BENCHMARK(BM_Item<Mode::kHeadByHead, 4, 256>)->Name("BM_HeadByHeadGemma3")->Apply(Args);
BENCHMARK(BM_Item<Mode::kHeads, 4, 256>)->Name("BM_HeadsGemma3")->Apply(Args);
BENCHMARK(BM_Item<Mode::kHeadsAvx2, 4, 256>)->Name("BM_HeadsAvx2Gemma3")->Apply(Args);

}  // namespace
}  // namespace llm::kernels

BENCHMARK_MAIN();
