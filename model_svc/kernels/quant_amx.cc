// AMX int8 kernels (Intel Advanced Matrix Extensions: 8 tile registers of up
// to 16 rows x 64 bytes, TDPBSSD multiplying int8 tiles into int32 ones).
// This file is compiled with -mamx-tile -mamx-int8 and the AVX-512 flags of
// quant_avx512.cc (-ffp-contract=off); nothing in it may run before
// CpuHasAmxInt8() has returned true (which also asks Linux for the tile
// state, ARCH_REQ_XCOMP_PERM).
//
// What is here: the product of whole 16-row x 16-token tiles, in calls of
// kAmxMinTokens tokens or more (prefill), for
// the formats whose 32-element block sum is one plain integer dot product
// (kOneSumFormat: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q4_K, Q5_K, IQ4_NL, IQ4_XS); everything else (rows or tokens left over, one
// token, the halves formats Q2_K / Q3_K / Q6_K, the float types) goes to the
// AVX-512 VNNI kernels. Prefill is where it pays: its products carry hundreds
// of tokens.
//
// How: per call, the tokens' codes are laid out once as TDPBSSD's second
// operand, tile B (per block of 16 tokens: 8 rows of 4 codes of each token,
// the VNNI kernels' interleaving), with their d and s. Per 16-row tile of
// weights, every block's codes are unpacked once (F::Unpack, as in the VNNI
// kernels) to signed int8 (q - offset), 16 rows x 32 codes: tile A as they
// come. Then, per token tile and block, TDPBSSD gives the 16 x 16 integer
// block sums isum (rows x tokens) exactly, and AVX-512 adds them into the
// fp32 accumulators in the canonical order of quant.h:
//   acc = fma(dw * x.d, float(isum), acc)   [, acc = fma(m, x.s, acc)]
// with a zmm of 16 tokens per row, as the VNNI TokenTile. So the bits are the scalar reference's
// and the VNNI kernels' (batch invariance), only the integer sums change
// hands. The block sums are per block (K = 32 bytes a TDPBSSD), because the
// scales are: the fp32 epilogue, not TDPBSSD, bounds the speed.
//
// Threads: each call loads the tile configuration on its own thread and
// releases the tiles before it returns; scratch is per thread.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "model_svc/formats/weight_formats.h"
#include "model_svc/kernels/quant_internal.h"
#include "model_svc/kernels/quant_x86_formats.h"

namespace llm::kernels::internal {
namespace {

constexpr int kTile = 16;  // rows of a tile, and tokens

// Fewer tokens than this go to the VNNI kernels: a row tile's unpacking,
// done once for all token tiles, pays only when there are many of them (at
// 16 and 64 tokens the VNNI kernels were as fast or faster, and ~2x faster
// on the memory-bound LM head; bench/README.md, "AMX int8 tiles for
// prefill").
constexpr int64_t kAmxMinTokens = 128;

// No interprocedural analysis of the functions that fill the tiles'
// operands (PackRows says why); clang has no such attribute.
#if defined(__clang__)
#define LLM_AMX_NOIPA __attribute__((noinline))
#else
#define LLM_AMX_NOIPA __attribute__((noipa))
#endif

// The palette-1 tile configuration (64 bytes, LDTILECFG's operand).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// Two sets in turn (TileProduct), tmm0-2 and tmm3-5: C, 16 rows x 16
// tokens' int32 sums (64 bytes a row); A, 16 rows x 32 codes; B, 8 rows of
// 16 tokens x 4 codes.
const TileConfig& Config() {
  static const TileConfig config = [] {
    TileConfig c;
    for (int set = 0; set < 2; ++set) {
      c.rows[3 * set] = kTile;
      c.colsb[3 * set] = 64;
      c.rows[3 * set + 1] = kTile;
      c.colsb[3 * set + 1] = 32;
      c.rows[3 * set + 2] = 8;
      c.colsb[3 * set + 2] = 64;
    }
    return c;
  }();
  return config;
}

// A block of 16 tokens' activations as tile B: b[k][4 * t + i] = code
// 4k + i of token t (the layout TDPBSSD reads its second operand in); then
// the tokens' d and s.
struct alignas(64) TokenBlock {
  int8_t b[8][64];
  float d[kTile];
  float s[kTile];
};
static_assert(sizeof(TokenBlock) == 640);

// A block of 16 weight rows as tile A: their signed codes (q - offset), a
// row's 32 in order; then the rows' dw and m.
struct alignas(64) RowBlock {
  int8_t q[kTile][32];
  float dw[kTile];
  float m[kTile];
};
static_assert(sizeof(RowBlock) == 640);

struct Scratch {
  std::vector<TokenBlock> tokens;  // [token tile][block]
  std::vector<RowBlock> rows;      // [block]
};
Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// Tokens [16 g, 16 g + 16) of x, every block, into out[g * num_blocks + b].
LLM_AMX_NOIPA void PackTokens(const ActRow* x, int64_t tiles, int64_t num_blocks, TokenBlock* out) {
  for (int64_t g = 0; g < tiles; ++g) {
    TokenBlock* o = out + g * num_blocks;
    for (int t = 0; t < kTile; ++t) {
      const BlockQ8* xb = x[g * kTile + t].q8;
      for (int64_t b = 0; b < num_blocks; ++b) {
        for (int k = 0; k < 8; ++k) std::memcpy(&o[b].b[k][4 * t], xb[b].q + 4 * k, 4);
        o[b].d[t] = xb[b].d;
        o[b].s[t] = xb[b].s;
      }
    }
  }
}

// Rows [r, r + 16) of w, every block, as tiles A with their scales.
// noipa: GCC 12's interprocedural analysis lost this function's stores for
// IQ4_XS once inlined (the AMX tests caught it: the tiles read zeros), and
// the tile loads that read them are invisible to it anyway.
template <class F>
LLM_AMX_NOIPA void PackRows(const uint8_t* w, size_t row_bytes, int64_t num_blocks, RowBlock* out) {
  for (int64_t b = 0; b < num_blocks; b += F::kSubBlocks) {
    typename F::Header header[kTile];
    for (int r = 0; r < kTile; ++r) {
      header[r] = F::Prepare(w + static_cast<size_t>(r) * row_bytes +
                             static_cast<size_t>(b / F::kSubBlocks) * F::kBlockBytes);
    }
    for (int j = 0; j < F::kSubBlocks; ++j) {
      RowBlock& o = out[b + j];
      alignas(16) float dm[4];
      for (int r = 0; r < kTile; ++r) {
        const WeightBlock wb = F::Unpack(header[r], j);
        __m256i q = wb.q;  // the signed codes: q - offset
        if constexpr (!F::kSigned && F::kOffset != 0) {
          q = _mm256_sub_epi8(q, _mm256_set1_epi8(static_cast<char>(F::kOffset)));
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(o.q[r]), q);
        _mm_store_ps(dm, wb.dm);
        o.dw[r] = dm[0];
        o.m[r] = dm[1];
      }
    }
  }
}

// GCC's _tile_loadd / _tile_stored are asm statements that name their
// address but not the memory behind it: without a barrier the compiler may
// move (or drop, as dead) the stores that fill a tile's operands, and reuse
// values it read before a tile store. A barrier comes before every tile load
// and after every tile store.
inline void MemoryBarrier() { asm volatile("" ::: "memory"); }

// Block b's 16 x 16 integer sums (rows x tokens) into tile set kSet's C
// (C, A, B: tiles 3 kSet, 3 kSet + 1, 3 kSet + 2); StoreSums then writes
// them to `sums`. (The _tile_* intrinsics take literal tile numbers: a
// function per set.)
#define LLM_AMX_BLOCK_SUMS(kSet, kC, kA, kB)                                    \
  inline void BlockSums##kSet(const RowBlock& rows, const TokenBlock& tokens) { \
    MemoryBarrier();                                                            \
    _tile_zero(kC);                                                             \
    _tile_loadd(kA, rows.q, 32);                                                \
    _tile_loadd(kB, tokens.b, 64);                                              \
    _tile_dpbssd(kC, kA, kB);                                                   \
  }                                                                             \
  inline void StoreSums##kSet(int32_t(*sums)[kTile]) {                          \
    _tile_stored(kC, sums, 64);                                                 \
    MemoryBarrier();                                                            \
  }
LLM_AMX_BLOCK_SUMS(0, 0, 1, 2)
LLM_AMX_BLOCK_SUMS(1, 3, 4, 5)
#undef LLM_AMX_BLOCK_SUMS

// The canonical fp32 steps of one block (acc[r]: row r, a lane per token),
// as in the VNNI TokenTile.
template <class F>
inline void AddBlock(const int32_t (*sums)[kTile], const RowBlock& rows, const TokenBlock& tokens,
                     __m512* acc) {
  const __m512 xd = _mm512_load_ps(tokens.d);
  [[maybe_unused]] const __m512 xs = _mm512_load_ps(tokens.s);
#pragma GCC unroll 16
  for (int r = 0; r < kTile; ++r) {
    const __m512 isum = _mm512_cvtepi32_ps(_mm512_load_si512(sums[r]));
    const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(rows.dw[r]), xd);
    acc[r] = _mm512_fmadd_ps(scale, isum, acc[r]);
    if constexpr (F::kMin) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(rows.m[r]), xs, acc[r]);
  }
}

// out[t * out_stride + r] for the 16 rows of `rows` and 16 tokens of
// `tokens`, over num_blocks blocks. Block b's product runs in tile set
// b % 2, is stored to sums[b % 3] after block b + 1's product is issued, and
// added after block b + 2's: the tile store does not wait for its product,
// nor the vector loads of the sums for the store, and the tile unit computes
// ahead while the vector units add.
template <class F>
void TileProduct(const RowBlock* rows, const TokenBlock* tokens, int64_t num_blocks, float* out,
                 int64_t out_stride) {
  alignas(64) int32_t sums[3][kTile][kTile];  // [block % 3][row][token]
  __m512 acc[kTile];
#pragma GCC unroll 16
  for (int r = 0; r < kTile; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < num_blocks + 2; ++b) {
    if (b < num_blocks) {  // block b's product
      if (b % 2 == 0) {
        BlockSums0(rows[b], tokens[b]);
      } else {
        BlockSums1(rows[b], tokens[b]);
      }
    }
    if (b >= 1 && b <= num_blocks) {  // block b - 1's sums, computed meanwhile
      if ((b - 1) % 2 == 0) {
        StoreSums0(sums[(b - 1) % 3]);
      } else {
        StoreSums1(sums[(b - 1) % 3]);
      }
    }
    if (b >= 2) AddBlock<F>(sums[(b - 2) % 3], rows[b - 2], tokens[b - 2], acc);
  }
  // Rows x tokens to tokens x rows.
  alignas(64) float tile[kTile][kTile];
#pragma GCC unroll 16
  for (int r = 0; r < kTile; ++r) _mm512_store_ps(tile[r], acc[r]);
  for (int t = 0; t < kTile; ++t) {
    for (int r = 0; r < kTile; ++r) out[t * out_stride + r] = tile[r][t];
  }
}

// Rows [r0, r0 + 16 * row_tiles) and tokens [0, 16 * token_tiles).
template <class F>
void AmxMatMul(const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0, int64_t row_tiles,
               const ActRow* x, int64_t token_tiles, float* out, int64_t out_stride) {
  const int64_t num_blocks = n / 32;
  Scratch& scratch = ThreadScratch();
  const size_t token_blocks = static_cast<size_t>(token_tiles * num_blocks);
  if (scratch.tokens.size() < token_blocks) scratch.tokens.resize(token_blocks);
  if (scratch.rows.size() < static_cast<size_t>(num_blocks)) scratch.rows.resize(num_blocks);
  PackTokens(x, token_tiles, num_blocks, scratch.tokens.data());
  _tile_loadconfig(&Config());
  for (int64_t rt = 0; rt < row_tiles; ++rt) {
    const int64_t r = r0 + rt * kTile;
    PackRows<F>(w + static_cast<size_t>(r) * row_bytes, row_bytes, num_blocks, scratch.rows.data());
    // The next tile's rows stream into L2 while this one's products run.
    if (rt + 1 < row_tiles) {
      const char* next =
          reinterpret_cast<const char*>(w) + static_cast<size_t>(r + kTile) * row_bytes;
      for (size_t off = 0; off < kTile * row_bytes; off += 64)
        _mm_prefetch(next + off, _MM_HINT_T1);
    }
    for (int64_t g = 0; g < token_tiles; ++g) {
      TileProduct<F>(scratch.rows.data(), scratch.tokens.data() + g * num_blocks, num_blocks,
                     out + g * kTile * out_stride + r, out_stride);
    }
  }
  _tile_release();
}

// AmxMatMul on whole tiles, the VNNI kernels on the rest.
template <class F>
void MatMulAmx(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
               int64_t r1, const ActRow* x, int64_t num_tokens, float* out, int64_t out_stride) {
  const int64_t row_tiles = (r1 - r0) / kTile, token_tiles = num_tokens / kTile;
  if (row_tiles == 0 || num_tokens < kAmxMinTokens) {
    MatMulTileAvx512Vnni(type, w, row_bytes, n, r0, r1, x, num_tokens, out, out_stride);
    return;
  }
  AmxMatMul<F>(w, row_bytes, n, r0, row_tiles, x, token_tiles, out, out_stride);
  const int64_t r_done = r0 + row_tiles * kTile, t_done = token_tiles * kTile;
  if (r_done < r1) {  // the rows left, for the tokens of the tiles
    MatMulTileAvx512Vnni(type, w, row_bytes, n, r_done, r1, x, t_done, out, out_stride);
  }
  if (t_done < num_tokens) {  // the tokens left, for every row
    MatMulTileAvx512Vnni(type, w, row_bytes, n, r0, r1, x + t_done, num_tokens - t_done,
                         out + t_done * out_stride, out_stride);
  }
}

}  // namespace

void MatMulTileAmx(TensorType type, const uint8_t* w, size_t row_bytes, int64_t n, int64_t r0,
                   int64_t r1, const ActRow* x, int64_t num_tokens, float* out,
                   int64_t out_stride) {
  switch (type) {
#define LLM_AMX_CASE(F, block_elements)                                                           \
  case TensorType::k##F:                                                                          \
    if constexpr (kOneSumFormat<F>) {                                                             \
      return MatMulAmx<F>(type, w, row_bytes, n, r0, r1, x, num_tokens, out, out_stride);         \
    } else {                                                                                      \
      return MatMulTileAvx512Vnni(type, w, row_bytes, n, r0, r1, x, num_tokens, out, out_stride); \
    }
    LLM_QUANT_WEIGHT_FORMATS(LLM_AMX_CASE)
#undef LLM_AMX_CASE
    default:  // the float types
      return MatMulTileAvx512Vnni(type, w, row_bytes, n, r0, r1, x, num_tokens, out, out_stride);
  }
}

}  // namespace llm::kernels::internal
