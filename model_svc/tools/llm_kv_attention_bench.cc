// llm-kv-attention-bench: the CPU time, on one thread, of the attention
// kernels of one decode token at depth --rows over a cache of fp16 or Q8_0
// rows: per (layer, KV head) stream, the K·Q scores (DotRowsHeads) and the
// weighted value sum (AxpyRowsHeads), 16 rows a call as attention reads a
// block. Defaults: SmolLM2-135M (30 layers x 3 KV heads of 3 query heads,
// head dimension 64) at 8192 positions. The query heads of a KV head are
// taken one at a time (g = 1) or together (g = 3). Every stream has its own
// rows, so the cache is read from memory as in a real decode. Prints the
// best of --repetitions per (g, type).
#include <time.h>

#include <algorithm>
#include <cstdio>
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

}  // namespace

int main(int argc, char** argv) {
  llm::ParseFlags(argc, argv,
                  "llm-kv-attention-bench [--streams 90] [--rows 8192] [--head_dim 64] "
                  "[--group 3] [--repetitions 5]");
  const int streams = absl::GetFlag(FLAGS_streams), group = absl::GetFlag(FLAGS_group);
  const int64_t rows = absl::GetFlag(FLAGS_rows) / 16 * 16, n = absl::GetFlag(FLAGS_head_dim);
  if (n % 32 != 0 || group < 1 || group > llm::kernels::kMaxRowHeads || rows < 16) {
    std::fprintf(stderr, "llm-kv-attention-bench: bad --head_dim, --group or --rows\n");
    return 2;
  }
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
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
