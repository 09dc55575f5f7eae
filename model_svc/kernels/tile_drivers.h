// Internal to the weight kernels: the ISA-neutral pieces of their drivers
// (quant_avx2.cc, quant_avx512.cc), which walk a row range in tiles and in
// chunks that stay in L2 while every token group passes over them.
//
// Internal linkage (an unnamed namespace), as in exp_libm.h: the including
// files are compiled for different instruction sets, and a shared inline copy
// that the linker kept from the AVX-512 file could run AVX-512 instructions
// on an AVX2 machine.
#ifndef LLM_MODEL_SVC_KERNELS_TILE_DRIVERS_H_
#define LLM_MODEL_SVC_KERNELS_TILE_DRIVERS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace llm::kernels::internal {
namespace {  // NOLINT(build/namespaces): one copy per kernel file, see above

// Rows [r_begin, r_end) as tiles of R rows, then of the next sizes in Rest
// (the last of which must be 1): tile.template operator()<R>(first_row).
template <int R, int... Rest, class Tile>
void ForRowTiles(int64_t r_begin, int64_t r_end, Tile tile) {
  int64_t r = r_begin;
  for (; r + R <= r_end; r += R) tile.template operator()<R>(r);
  if constexpr (sizeof...(Rest) > 0) {
    ForRowTiles<Rest...>(r, r_end, tile);
  } else {
    static_assert(R == 1);
  }
}

// Weight bytes per chunk of rows: with several token groups, a chunk stays in
// L2 while every group passes over it.
constexpr size_t kChunkBytes = 128 * 1024;

// Tokens per pass: bounds the interleaved activations' scratch (and the
// pointer table).
constexpr int64_t kTokenBatch = 256;

// Rows per chunk of about kChunkBytes, a multiple of kTileRows (at least one
// tile).
template <int64_t kTileRows>
int64_t ChunkRows(size_t row_bytes) {
  const size_t rows = kChunkBytes / std::max<size_t>(row_bytes, 1);
  return std::max<int64_t>(kTileRows, static_cast<int64_t>(rows) / kTileRows * kTileRows);
}

}  // namespace
}  // namespace llm::kernels::internal

#endif  // LLM_MODEL_SVC_KERNELS_TILE_DRIVERS_H_
