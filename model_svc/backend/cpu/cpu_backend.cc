#include "model_svc/backend/cpu/cpu_backend.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "common/strings.h"
#include "model_svc/backend/cpu/quant.h"
#include "model_svc/backend/cpu/thread_pool.h"
#include "model_svc/backend/cpu/vec.h"

namespace llm::cpu {
namespace {

using model::AttentionParams;
using model::KvCacheShape;
using model::Logits;
using model::LogitsSpec;
using model::MatMulTarget;
using model::RopeParams;
using model::StepBatch;
using model::Tensor;
using model::WeightView;

// Least rows of output features one task takes in MatMul with 3 or more
// tokens (unless that leaves a thread without a task), and tokens per
// activation tile (keeps the tile's q8 activations in L2). Each MatMulTile
// call with 3 or more tokens interleaves their activations first, and its
// first rows are not prefetched: with the few tokens of a batched decode
// step, 256-row tasks gave ~10% more aggregate decode throughput at 16
// sessions than 64-row ones (prefill, with 64 tokens per call, is indifferent).
constexpr int64_t kRowGrain = 256;
constexpr int64_t kTokenTile = 64;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
using AlignedArray = std::unique_ptr<T[], FreeDeleter>;

template <typename T>
absl::StatusOr<AlignedArray<T>> AllocAligned(size_t count, const char* what) {
  const size_t bytes = ((count * sizeof(T) + 63) / 64) * 64;
  void* p = std::aligned_alloc(64, std::max<size_t>(bytes, 64));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(StrCat("cannot allocate ", bytes, " bytes for ", what));
  }
  std::memset(p, 0, bytes);
  return AlignedArray<T>(static_cast<T*>(p));
}

class CpuWeight : public model::Weight {
 public:
  explicit CpuWeight(const WeightView& view) : Weight(view) {}
};

bool IsFloatType(TensorType t) {
  return t == TensorType::kF32 || t == TensorType::kF16 || t == TensorType::kBF16;
}

class CpuBackend : public model::Backend {
 public:
  explicit CpuBackend(int threads) : pool_(threads) {}

  std::string name() const override { return "cpu"; }
  std::string description() const override {
    return StrCat("cpu (", KernelIsa(), ", ", pool_.num_threads(), " threads)");
  }

  absl::StatusOr<std::unique_ptr<model::Weight>> UploadWeight(const WeightView& view) override {
    if (view.rows > 1 && !IsSupportedWeightType(view.type)) {
      return absl::UnimplementedError(StrCat("tensor ", view.name, ": unsupported type"));
    }
    return std::make_unique<CpuWeight>(view);
  }

  absl::StatusOr<Tensor> AllocTensor(int64_t rows, int64_t cols) override {
    if (rows < 0 || cols < 1) return absl::InvalidArgumentError("bad tensor shape");
    auto storage = AllocAligned<float>(rows * cols, "activations");
    if (!storage.ok()) return storage.status();
    Tensor t{storage->get(), rows, cols};
    tensors_.push_back(*std::move(storage));
    // Every tensor may feed a MatMul: size the q8 scratch for the largest.
    const int64_t blocks = rows * ((cols + kQ8Block - 1) / kQ8Block);
    if (blocks > q8_capacity_) {
      auto q8 = AllocAligned<BlockQ8>(blocks, "quantized activations");
      if (!q8.ok()) return q8.status();
      q8_ = *std::move(q8);
      q8_capacity_ = blocks;
    }
    if (rows > static_cast<int64_t>(act_rows_.size())) act_rows_.resize(rows);
    return t;
  }

  absl::Status AllocKvCache(const KvCacheShape& shape) override {
    kv_ = shape;
    auto cache = AllocAligned<uint8_t>(shape.block_bytes() * shape.num_blocks, "the KV cache");
    if (!cache.ok()) return cache.status();
    cache_ = *std::move(cache);
    const int64_t max_positions = int64_t{shape.num_blocks} * shape.block_size;
    scores_.assign(pool_.num_threads(), std::vector<float>(max_positions));
    qh_.assign(pool_.num_threads(), std::vector<float>(kv_.kv_dim));
    return absl::OkStatus();
  }

  absl::Status WriteTensor(Tensor t, std::span<const float> values) override {
    if (static_cast<int64_t>(values.size()) != t.rows * t.cols) {
      return absl::InvalidArgumentError("WriteTensor: size mismatch");
    }
    std::memcpy(t.data, values.data(), values.size() * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status ReadTensor(const Tensor& t, std::span<float> values) override {
    if (static_cast<int64_t>(values.size()) != t.rows * t.cols) {
      return absl::InvalidArgumentError("ReadTensor: size mismatch");
    }
    std::memcpy(values.data(), t.data, values.size() * sizeof(float));
    return absl::OkStatus();
  }

  void CopyKvBlock(int32_t src, int32_t dst) override {
    const int64_t bytes = kv_.block_bytes();
    std::memcpy(cache_.get() + dst * bytes, cache_.get() + src * bytes, bytes);
  }

  void Prewarm() override { pool_.Wake(); }

  absl::Status BeginStep(const StepBatch& batch) override {
    batch_ = &batch;
    rope_ready_ = false;
    return absl::OkStatus();
  }

  void Embed(const model::Weight& table, Tensor out) override {
    const WeightView& w = table.view();
    pool_.ParallelFor(out.rows, 8, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const uint8_t* row = w.data + batch_->tokens[r] * w.row_bytes;
        DequantizeRow(w.type, row, out.data + r * out.cols, out.cols);
      }
    });
  }

  void RmsNorm(const Tensor& x, const model::Weight& weight, float eps, Tensor out) override {
    const float* w = reinterpret_cast<const float*>(weight.view().data);
    pool_.ParallelFor(x.rows, 32, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const float* in = x.data + r * x.cols;
        float* o = out.data + r * out.cols;
        const float ms = DotF32(in, in, x.cols) / static_cast<float>(x.cols);
        const float scale = 1.0f / std::sqrt(ms + eps);
        for (int64_t i = 0; i < x.cols; ++i) o[i] = in[i] * scale * w[i];
      }
    });
  }

  void MatMul(const Tensor& x, std::span<const MatMulTarget> targets) override {
    const int64_t n = x.rows;
    bool need_q8 = false;
    for (const MatMulTarget& t : targets) need_q8 |= !IsFloatType(t.weight->view().type);
    const int64_t blocks_per_row = x.cols / kQ8Block;
    if (need_q8) {
      pool_.ParallelFor(n, 8, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          QuantizeQ8(x.data + r * x.cols, q8_.get() + r * blocks_per_row, x.cols);
        }
      });
    }
    for (int64_t r = 0; r < n; ++r) {
      act_rows_[r] =
          ActRow{x.data + r * x.cols, need_q8 ? q8_.get() + r * blocks_per_row : nullptr};
    }
    // Work is split by rows of the targets' concatenated output features; the
    // kernels' results do not depend on the split (batch invariance).
    int64_t total_rows = 0;
    for (const MatMulTarget& t : targets) total_rows += t.weight->view().rows;
    // Rows [row, row_end) of every target they cover (a range may span
    // several), all tokens.
    auto run_rows = [&](int64_t row, int64_t row_end) {
      int64_t base = 0;
      for (const MatMulTarget& t : targets) {
        const WeightView& w = t.weight->view();
        const int64_t lo = std::max(row, base), hi = std::min(row_end, base + w.rows);
        if (lo < hi) {
          for (int64_t t0 = 0; t0 < n; t0 += kTokenTile) {
            const int64_t tokens = std::min(kTokenTile, n - t0);
            MatMulTile(w.type, w.data, w.row_bytes, w.cols, lo - base, hi - base,
                       act_rows_.data() + t0, tokens, t.out.data + t0 * t.out.cols, t.out.cols);
          }
        }
        base += w.rows;
      }
    };
    // Row ranges start at multiples of the kernels' largest row tile.
    constexpr int64_t kRowAlign = 8;
    const int threads = pool_.num_threads();
    if (n <= 2) {
      // Decode: one contiguous range per thread, so that each thread's weight
      // prefetching follows a single stream.
      pool_.Run([&](int thread, int num_threads) {
        auto bound = [&](int i) {
          const int64_t r = (total_rows * i / num_threads + kRowAlign - 1) / kRowAlign * kRowAlign;
          return std::min(total_rows, r);
        };
        run_rows(bound(thread), bound(thread + 1));
      });
      return;
    }
    // Prefill and batched decode: tasks of at least kRowGrain rows, taken in
    // turn; as many as possible, and a multiple of the threads so that they
    // finish together. Fewer rows than that for every thread: one task per
    // thread (of at least kRowAlign rows).
    int64_t num_tasks = total_rows / kRowGrain;
    if (num_tasks >= threads) {
      num_tasks = num_tasks / threads * threads;
    } else {
      num_tasks = std::clamp<int64_t>((total_rows + kRowAlign - 1) / kRowAlign, 1, threads);
    }
    const int64_t grain =
        ((total_rows + num_tasks - 1) / num_tasks + kRowAlign - 1) / kRowAlign * kRowAlign;
    num_tasks = (total_rows + grain - 1) / grain;
    std::atomic<int64_t> next{0};
    pool_.Run([&](int, int) {
      for (int64_t task = next.fetch_add(1); task < num_tasks; task = next.fetch_add(1)) {
        run_rows(task * grain, std::min(total_rows, (task + 1) * grain));
      }
    });
  }

  void Rope(Tensor q, Tensor k, const RopeParams& p) override {
    const int64_t pairs = p.rope_dim / 2;
    if (!rope_ready_) {
      // One table of (cos, sin) per row, shared by every layer and head. The
      // angles are computed exactly as llama.cpp computes them (float, the
      // frequency advanced by repeated multiplication), so that GGUF models
      // give llama.cpp's results; the reference in the tests does the same.
      rope_table_.resize(q.rows * pairs * 2);
      const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.rope_dim));
      for (int64_t r = 0; r < q.rows; ++r) {
        float theta = static_cast<float>(batch_->positions[r]);
        for (int64_t i = 0; i < pairs; ++i) {
          const float angle = p.freq_scale * theta;
          rope_table_[(r * pairs + i) * 2] = std::cos(angle);
          rope_table_[(r * pairs + i) * 2 + 1] = std::sin(angle);
          theta *= theta_scale;
        }
      }
      rope_ready_ = true;
    }
    auto rotate = [&](Tensor t, int64_t r) {
      const float* cs = rope_table_.data() + r * pairs * 2;
      for (int64_t h = 0; h < t.cols / p.head_dim; ++h) {
        float* v = t.data + r * t.cols + h * p.head_dim;
        for (int64_t i = 0; i < pairs; ++i) {
          const float c = cs[2 * i], s = cs[2 * i + 1];
          const float a = v[2 * i], b = v[2 * i + 1];
          v[2 * i] = a * c - b * s;
          v[2 * i + 1] = a * s + b * c;
        }
      }
    };
    pool_.ParallelFor(q.rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        rotate(q, r);
        rotate(k, r);
      }
    });
  }

  void Attention(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttentionParams& p, Tensor out) override {
    if (kv_.type == model::KvType::kF16) {
      AttentionImpl<uint16_t>(layer, q, k, v, p, out);
    } else {
      AttentionImpl<float>(layer, q, k, v, p, out);
    }
  }

  void SiluMul(const Tensor& gate, const Tensor& up, Tensor out) override {
    pool_.ParallelFor(gate.rows, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin * gate.cols; i < end * gate.cols; ++i) {
        const float g = gate.data[i];
        out.data[i] = g / (1.0f + std::exp(-g)) * up.data[i];
      }
    });
  }

  void Add(Tensor x, const Tensor& y) override {
    const int64_t n = x.rows * x.cols;
    for (int64_t i = 0; i < n; ++i) x.data[i] += y.data[i];
  }

  void GatherLogitRows(const Tensor& x, Tensor out) override {
    for (int64_t i = 0; i < out.rows; ++i) {
      std::memcpy(out.data + i * out.cols, x.data + batch_->logit_rows[i] * x.cols, x.cols * 4);
    }
  }

  absl::Status ReadLogits(const Tensor& logits, std::span<const LogitsSpec> specs,
                          std::vector<Logits>* out) override {
    out->resize(logits.rows);
    pool_.ParallelFor(logits.rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        model::EncodeLogits({logits.data + r * logits.cols, static_cast<size_t>(logits.cols)},
                            specs[r], &(*out)[r]);
      }
    });
    batch_ = nullptr;
    pool_.Idle();  // the step is over: free the cores for the RPC threads
    return absl::OkStatus();
  }

 private:
  struct Item {
    int32_t seq, head, token;
  };

  // Keys of (block, layer, slot): kv_dim elements of type T; the values
  // follow the block's keys of the same layer.
  template <typename T>
  T* KeyAt(int64_t block, int64_t layer, int64_t slot) {
    return reinterpret_cast<T*>(cache_.get()) +
           ((block * kv_.layers + layer) * 2 * kv_.block_size + slot) * kv_.kv_dim;
  }
  template <typename T>
  T* ValueAt(int64_t block, int64_t layer, int64_t slot) {
    return KeyAt<T>(block, layer, slot) + kv_.block_size * kv_.kv_dim;
  }

  static void Store(const float* x, float* out, int64_t n) { std::memcpy(out, x, n * 4); }
  static void Store(const float* x, uint16_t* out, int64_t n) { F32ToF16(x, out, n); }

  // Attention over a cache of element type T (float or fp16 bits).
  template <typename T>
  void AttentionImpl(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v,
                     const AttentionParams& p, Tensor out) {
    const int64_t kv_dim = kv_.kv_dim, bs = kv_.block_size;
    // 1. Store the new keys and values.
    for (const model::SequenceStep& s : batch_->sequences) {
      for (int64_t t = 0; t < s.num_new; ++t) {
        const int64_t pos = s.start_pos + t, row = s.first_row + t;
        Store(k.data + row * kv_dim, KeyAt<T>(s.blocks[pos / bs], layer, pos % bs), kv_dim);
        Store(v.data + row * kv_dim, ValueAt<T>(s.blocks[pos / bs], layer, pos % bs), kv_dim);
      }
    }
    // 2. Work items: (sequence, query head, chunk of up to kChunk new tokens).
    constexpr int64_t kChunk = 16;
    items_.clear();
    for (size_t s = 0; s < batch_->sequences.size(); ++s) {
      const int64_t num_new = batch_->sequences[s].num_new;
      for (int64_t h = 0; h < p.head_count; ++h) {
        for (int64_t t = 0; t < num_new; t += kChunk) {
          items_.push_back(
              Item{static_cast<int32_t>(s), static_cast<int32_t>(h), static_cast<int32_t>(t)});
        }
      }
    }
    const int64_t group = p.head_count / p.head_count_kv;
    std::atomic<int64_t> next{0};
    pool_.Run([&](int thread, int) {
      float* scores = scores_[thread].data();
      float* qh = qh_[thread].data();
      for (int64_t i = next.fetch_add(1); i < static_cast<int64_t>(items_.size());
           i = next.fetch_add(1)) {
        const Item& item = items_[i];
        const model::SequenceStep& s = batch_->sequences[item.seq];
        const int64_t kv_head = item.head / group;
        const int64_t t_end = std::min<int64_t>(s.num_new, item.token + kChunk);
        for (int64_t t = item.token; t < t_end; ++t) {
          const int64_t row = s.first_row + t, pos = s.start_pos + t;
          // With an fp16 cache the query is rounded to fp16 as well, as
          // llama.cpp does (its K·Q product runs in fp16 x fp16).
          const float* qsrc = q.data + row * q.cols + item.head * p.head_dim;
          if constexpr (std::is_same_v<T, uint16_t>) {
            for (int64_t d = 0; d < p.head_dim; ++d) qh[d] = HalfToFloat(FloatToHalf(qsrc[d]));
          } else {
            std::memcpy(qh, qsrc, p.head_dim * 4);
          }
          // Scores block by block (the positions of a block are kv_dim apart).
          const int64_t n_pos = pos + 1;
          for (int64_t j = 0; j < n_pos; j += bs) {
            const T* kj = KeyAt<T>(s.blocks[j / bs], layer, 0) + kv_head * p.head_dim;
            DotRows(qh, kj, kv_dim, std::min(bs, n_pos - j), p.head_dim, p.scale, scores + j);
          }
          const float max = MaxF32(scores, n_pos);
          const float inv = static_cast<float>(1.0 / ExpInPlace(scores, n_pos, max));
          for (int64_t j = 0; j < n_pos; ++j) scores[j] *= inv;
          float* o = out.data + row * out.cols + item.head * p.head_dim;
          std::fill(o, o + p.head_dim, 0.0f);
          for (int64_t j = 0; j < n_pos; j += bs) {
            const T* vj = ValueAt<T>(s.blocks[j / bs], layer, 0) + kv_head * p.head_dim;
            AxpyRows(scores + j, vj, kv_dim, std::min(bs, n_pos - j), p.head_dim, o);
          }
        }
      }
    });
  }

  ThreadPool pool_;
  std::vector<AlignedArray<float>> tensors_;
  AlignedArray<BlockQ8> q8_;
  int64_t q8_capacity_ = 0;
  std::vector<ActRow> act_rows_;
  KvCacheShape kv_;
  AlignedArray<uint8_t> cache_;
  std::vector<std::vector<float>> scores_;  // per thread, one per cached position
  std::vector<std::vector<float>> qh_;      // per thread, one query head
  std::vector<float> rope_table_;           // (cos, sin) per row and pair, computed once per step
  bool rope_ready_ = false;
  std::vector<Item> items_;
  const StepBatch* batch_ = nullptr;
};

}  // namespace

int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

std::unique_ptr<model::Backend> CreateCpuBackend(const CpuBackendOptions& options) {
  const int threads = options.threads > 0 ? options.threads : AvailableCores();
  return std::make_unique<CpuBackend>(threads);
}

}  // namespace llm::cpu
