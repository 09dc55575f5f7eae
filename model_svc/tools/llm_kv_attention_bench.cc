// llm-kv-attention-bench: the CPU time, on one thread, of the attention
// kernels of one decode token at depth --rows over a cache of fp16 or Q8_0
// rows: per (layer, KV head) stream, the K·Q scores (DotRowsHeads) and the
// weighted value sum (AxpyRowsHeads), 16 rows a call as attention reads a
// block. Defaults: SmolLM2-135M (30 layers x 3 KV heads of 3 query heads,
// head dimension 64) at 8192 positions. The query heads of a KV head are
// taken one at a time (g = 1) or together (g = 3). Every stream has its own
// rows, so the cache is read from memory as in a real decode. Prints the
// best of --repetitions per (g, type).
//
// --paged: fp16 rows laid out as the engine's KV pool instead (cpu_backend.cc:
// per block of --block_size positions and layer, the keys of every KV head,
// then the values; a block's layers together; the blocks in a random order;
// huge pages), streams / (--layers x 3 KV heads) sessions of --rows positions
// each, and the kernels walk a session's blocks as AttentionImpl does, 16 rows
// a call. --prefetch_ahead N also asks for the block N ahead in L2 as they go
// (the keys, then the values).
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "absl/flags/flag.h"
#include "common/flags.h"
#include "model_svc/kernels/vec.h"

ABSL_FLAG(int, streams, 90, "(layer, KV head) pairs.");
ABSL_FLAG(int, rows, 8192, "Positions (a multiple of 16).");
ABSL_FLAG(int, head_dim, 64, "Head dimension (a multiple of 32).");
ABSL_FLAG(int, group, 3, "Query heads per KV head.");
ABSL_FLAG(int, repetitions, 5, "Timed passes; the best is printed.");
ABSL_FLAG(bool, paged, false,
          "fp16 rows in the engine's paged layout (blocks of --block_size positions, a block's "
          "layers together, blocks in a random order); --streams a multiple of --layers x 3 "
          "(KV heads).");
ABSL_FLAG(int, layers, 30, "--paged: layers per block.");
ABSL_FLAG(int, block_size, 16, "--paged: positions per block (a multiple of 16 dividing --rows).");
ABSL_FLAG(int, prefetch_ahead, 0,
          "--paged: prefetch into L2 the keys (then values) of the block this many ahead.");

namespace {

using llm::kernels::KvQ8Block;

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// One decode token's attention over every stream, g query heads a call.
template <typename T>
void Pass(const std::vector<std::vector<T>>& k, const std::vector<std::vector<T>>& v, int group,
          int g, int64_t rows, int64_t n, std::vector<float>& q, std::vector<float>& scores,
          std::vector<float>& acc) {
  constexpr int64_t kBlock = 16;
  const int64_t per_row = std::is_same_v<T, KvQ8Block> ? n / 32 : n;
  for (size_t s = 0; s < k.size(); ++s) {
    for (int h0 = 0; h0 < group; h0 += g) {
      const float* qs[llm::kernels::kMaxRowHeads];
      float* as[llm::kernels::kMaxRowHeads];
      for (int h = 0; h < g; ++h) qs[h] = &q[h * n], as[h] = &acc[h * n];
      for (int64_t j = 0; j < rows; j += kBlock) {
        float* out[llm::kernels::kMaxRowHeads];
        for (int h = 0; h < g; ++h) out[h] = &scores[h * rows + j];
        llm::kernels::DotRowsHeads(qs, g, k[s].data() + j * per_row, n, kBlock, n, 0.125f, out);
      }
      std::fill(scores.begin(), scores.end(), 1.0f / static_cast<float>(rows));
      for (int64_t j = 0; j < rows; j += kBlock) {
        const float* w[llm::kernels::kMaxRowHeads];
        for (int h = 0; h < g; ++h) w[h] = &scores[h * rows + j];
        llm::kernels::AxpyRowsHeads(w, g, v[s].data() + j * per_row, n, kBlock, n, as);
      }
    }
  }
}

// --paged: one decode token's attention over sessions whose fp16 rows lie
// in a pool of blocks laid out as the engine's (see the top).
class PagedCache {
 public:
  static constexpr int64_t kCall = 16;  // rows a kernel call, as attention reads a block
  PagedCache(int sessions, int layers, int kv_heads, int64_t rows, int64_t block, int64_t n,
             std::mt19937& rng)
      : sessions_(sessions),
        layers_(layers),
        kv_heads_(kv_heads),
        block_(block),
        blocks_(rows / block),
        n_(n) {
    order_.resize(sessions_ * blocks_);
    for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int64_t>(i);
    std::shuffle(order_.begin(), order_.end(), rng);
    // On transparent huge pages, as the engine's pool (AllocAligned).
    constexpr size_t kHugePage = size_t{2} << 20;
    size_ = order_.size() * layers_ * 2 * kv_heads_ * block_ * n_;
    const size_t bytes = (size_ * 2 + kHugePage - 1) / kHugePage * kHugePage;
    pool_.reset(static_cast<uint16_t*>(std::aligned_alloc(kHugePage, bytes)));
    if (pool_ == nullptr) {
      std::fprintf(stderr, "llm-kv-attention-bench: cannot allocate %zu bytes\n", bytes);
      std::exit(1);
    }
    madvise(pool_.get(), bytes, MADV_HUGEPAGE);
    std::normal_distribution<float> dist;
    std::vector<float> x(1 << 16);
    for (float& e : x) e = dist(rng);
    for (size_t i = 0; i < size_; i += x.size()) {
      llm::kernels::F32ToF16(x.data(), pool_.get() + i,
                             static_cast<int64_t>(std::min(x.size(), size_ - i)));
    }
  }
  // Block b of session s, layer l: KV head h's key rows (v: value rows).
  const uint16_t* Rows(int s, int64_t b, int l, int h, bool v) const {
    const int64_t block = order_[s * blocks_ + b];
    return pool_.get() +
           ((block * layers_ + l) * 2 * kv_heads_ + (v ? kv_heads_ : 0) + h) * block_ * n_;
  }
  void Pass(int g, int ahead, const std::vector<float>& q, std::vector<float>& scores,
            std::vector<float>& acc) const {
    const int64_t head_bytes = block_ * n_ * 2;
    for (int s = 0; s < sessions_; ++s) {
      for (int l = 0; l < layers_; ++l) {
        for (int h = 0; h < kv_heads_; ++h) {
          const float* qs[llm::kernels::kMaxRowHeads];
          float* as[llm::kernels::kMaxRowHeads];
          for (int i = 0; i < g; ++i) qs[i] = &q[i * n_], as[i] = &acc[i * n_];
          // Block i of the keys-then-values walk, into L2.
          auto prefetch = [&](int64_t i) {
            if (ahead <= 0 || i >= 2 * blocks_) return;
            const char* p =
                reinterpret_cast<const char*>(Rows(s, i % blocks_, l, h, /*v=*/i >= blocks_));
            for (int64_t o = 0; o < head_bytes; o += 64) __builtin_prefetch(p + o, 0, 2);
          };
          for (int64_t i = 0; i < ahead; ++i) prefetch(i);
          const int64_t rows = blocks_ * block_;
          for (int64_t b = 0; b < blocks_; ++b) {
            prefetch(b + ahead);
            for (int64_t c = 0; c < block_; c += kCall) {
              float* out[llm::kernels::kMaxRowHeads];
              for (int i = 0; i < g; ++i) out[i] = &scores[i * rows + b * block_ + c];
              llm::kernels::DotRowsHeads(qs, g, Rows(s, b, l, h, false) + c * n_, n_, kCall, n_,
                                         0.125f, out);
            }
          }
          std::fill(scores.begin(), scores.end(), 1.0f / static_cast<float>(rows));
          for (int64_t b = 0; b < blocks_; ++b) {
            prefetch(blocks_ + b + ahead);
            for (int64_t c = 0; c < block_; c += kCall) {
              const float* w[llm::kernels::kMaxRowHeads];
              for (int i = 0; i < g; ++i) w[i] = &scores[i * rows + b * block_ + c];
              llm::kernels::AxpyRowsHeads(w, g, Rows(s, b, l, h, true) + c * n_, n_, kCall, n_, as);
            }
          }
        }
      }
    }
  }

 private:
  int sessions_, layers_, kv_heads_;
  int64_t block_, blocks_, n_;
  std::vector<int64_t> order_;  // session s's block b is pool block order_[s * blocks_ + b]
  struct Free {
    void operator()(uint16_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint16_t[], Free> pool_;
  size_t size_ = 0;  // fp16 values in pool_
};

}  // namespace

int main(int argc, char** argv) {
  llm::ParseFlags(argc, argv,
                  "llm-kv-attention-bench [--streams 90] [--rows 8192] [--head_dim 64] "
                  "[--group 3] [--repetitions 5] [--paged [--layers 30] [--block_size 16] "
                  "[--prefetch_ahead N]]");
  const int streams = absl::GetFlag(FLAGS_streams), group = absl::GetFlag(FLAGS_group);
  const int64_t rows = absl::GetFlag(FLAGS_rows) / 16 * 16, n = absl::GetFlag(FLAGS_head_dim);
  if (n % 32 != 0 || group < 1 || group > llm::kernels::kMaxRowHeads || rows < 16) {
    std::fprintf(stderr, "llm-kv-attention-bench: bad --head_dim, --group or --rows\n");
    return 2;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  if (absl::GetFlag(FLAGS_paged)) {
    const int layers = absl::GetFlag(FLAGS_layers), kv_heads = 3;
    const int ahead = absl::GetFlag(FLAGS_prefetch_ahead);
    if (layers < 1 || streams % (layers * kv_heads) != 0) {
      std::fprintf(stderr,
                   "llm-kv-attention-bench: --paged needs --streams a multiple of "
                   "--layers x 3 (KV heads)\n");
      return 2;
    }
    const int64_t block = absl::GetFlag(FLAGS_block_size);
    if (block < 16 || block % 16 != 0 || rows % block != 0) {
      std::fprintf(stderr,
                   "llm-kv-attention-bench: --block_size must be a multiple of 16 dividing "
                   "--rows\n");
      return 2;
    }
    const PagedCache cache(streams / (layers * kv_heads), layers, kv_heads, rows, block, n, rng);
    std::vector<float> q(group * n), scores(group * rows), acc(group * n);
    for (float& e : q) e = dist(rng);
    double best = 1e30;
    for (int r = 0; r < std::max(1, absl::GetFlag(FLAGS_repetitions)); ++r) {
      const double start = ThreadCpuSeconds();
      cache.Pass(group, ahead, q, scores, acc);
      best = std::min(best, ThreadCpuSeconds() - start);
    }
    std::printf(
        "{\"g\":%d,\"kv\":\"f16\",\"layout\":\"paged\",\"block_size\":%lld,"
        "\"prefetch_ahead\":%d,\"cpu_ms_per_token\":%.2f}\n",
        group, static_cast<long long>(block), ahead, best * 1e3);
    return 0;
  }
  std::vector<float> x(rows * n);
  for (float& e : x) e = dist(rng);
  std::vector<std::vector<uint16_t>> kh(streams), vh(streams);
  std::vector<std::vector<KvQ8Block>> kq(streams), vq(streams);
  for (int s = 0; s < streams; ++s) {
    for (auto* h : {&kh[s], &vh[s]}) {
      h->resize(x.size());
      llm::kernels::F32ToF16(x.data(), h->data(), static_cast<int64_t>(x.size()));
    }
    for (auto* b : {&kq[s], &vq[s]}) {
      b->resize(x.size() / 32);
      llm::kernels::QuantizeKvQ8(x.data(), b->data(), static_cast<int64_t>(x.size()));
    }
  }
  std::vector<float> q(group * n), scores(group * rows), acc(group * n);
  for (float& e : q) e = dist(rng);
  for (int g : {1, group}) {
    for (const bool q8 : {false, true}) {
      double best = 1e30;
      for (int r = 0; r < std::max(1, absl::GetFlag(FLAGS_repetitions)); ++r) {
        const double start = ThreadCpuSeconds();
        if (q8) {
          Pass(kq, vq, group, g, rows, n, q, scores, acc);
        } else {
          Pass(kh, vh, group, g, rows, n, q, scores, acc);
        }
        best = std::min(best, ThreadCpuSeconds() - start);
      }
      std::printf("{\"g\":%d,\"kv\":\"%s\",\"cpu_ms_per_token\":%.2f}\n", g, q8 ? "q8_0" : "f16",
                  best * 1e3);
    }
    if (group == 1) break;
  }
  return 0;
}
