#include "model_svc/backend/cpu/cpu_backend.h"

#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model_svc/backend/cpu/piece_claims.h"
#include "model_svc/backend/cpu/thread_pool.h"
#include "model_svc/formats/weight_formats.h"
#include "model_svc/kernels/quant.h"
#include "model_svc/kernels/vec.h"

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

// MatMul with 3 or more tokens. A prefill takes tasks of kRowGrain rows of
// output features or more, in turn. A step of few tokens (a batched decode:
// fewer than kTaskMacs multiply-adds in kRowGrain rows) would make such tasks
// short, each starting cold: there, up to kTokenTile tokens, each thread
// instead owns a contiguous run of the rows, computed in pieces of about
// kPieceMacs (up to kPiecesPerThread a thread, of at least 8 rows), the
// activations laid out once per thread (SameActivationsScope), and a thread
// that finishes first steals pieces from the end of another's run
// (PieceClaims), so that a thread the OS slows does not stall the product;
// with more tokens, tasks of kTaskMacs. Why, measured: bench/README.md,
// "Measurements behind the code", matmul pieces.
constexpr int64_t kRowGrain = 256;
constexpr int64_t kTaskMacs = int64_t{32} << 20;
constexpr int64_t kPieceMacs = int64_t{4} << 20;
constexpr int64_t kPiecesPerThread = 8;
constexpr int64_t kTokenTile = 64;

// Least elements per task of the element-wise loops (norms, RoPE, SwiGLU):
// below that, handing work to another thread costs more than it saves (a
// single decode token runs inline), while a batched decode step of 16 tokens
// splits (bench/README.md, "Measurements behind the code", element grains).
constexpr int64_t kElementGrain = 4096;
inline int64_t RowGrain(int64_t cols) { return std::max<int64_t>(1, kElementGrain / cols); }

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
template <typename T>
using AlignedArray = std::unique_ptr<T[], FreeDeleter>;

// Zeroed, 64-byte aligned. Arrays of 2 MiB or more are aligned to 2 MiB and
// asked for transparent huge pages: the KV cache is read a few KiB here and
// there across the whole pool every step, and with 4 KiB pages nearly every
// block visited was a TLB miss (attention took ~1/4 of a 16-session decode
// step, mostly in page walks; huge pages cut it to ~1/6).
template <typename T>
absl::StatusOr<AlignedArray<T>> AllocAligned(size_t count, const char* what) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t align = count * sizeof(T) >= kHugePage ? kHugePage : 64;
  const size_t bytes = ((count * sizeof(T) + align - 1) / align) * align;
  void* p = std::aligned_alloc(align, std::max<size_t>(bytes, 64));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(StrCat("cannot allocate ", bytes, " bytes for ", what));
  }
  if (align == kHugePage) madvise(p, bytes, MADV_HUGEPAGE);  // advice only: failure is harmless
  std::memset(p, 0, bytes);
  return AlignedArray<T>(static_cast<T*>(p));
}

class CpuWeight : public model::Weight {
 public:
  explicit CpuWeight(const WeightView& view) : Weight(view) {}
};

bool IsFloatType(gguf::TensorType t) {
  return t == gguf::TensorType::kF32 || t == gguf::TensorType::kF16 || t == gguf::TensorType::kBF16;
}

class CpuBackend : public model::Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options)
      : options_(options), pool_(options.threads, options.cpus), claims_(pool_.num_threads()) {}

  const absl::Status& placement() const { return pool_.placement(); }

  std::string name() const override { return "cpu"; }
  // A step's prefill rate is flat from ~32 tokens on (llm-bench --p 8/16/32/64/128/256 on
  // SmolLM2, 2 threads: 1,125 / 1,218 / 1,336 / 1,454 / 1,412 / 1,278 tok/s).
  int64_t PrefillStepTokens() const override { return 32; }
  std::string description() const override {
    return StrCat("cpu (", kernels::KernelIsa(), ", ", pool_.num_threads(), " threads)");
  }

  absl::StatusOr<std::unique_ptr<model::Weight>> UploadWeight(const WeightView& view) override {
    if (view.rows > 1 && !formats::IsSupportedWeightType(view.type)) {
      return absl::UnimplementedError(StrCat("tensor ", view.name, ": unsupported type"));
    }
    if (!IsFloatType(view.type)) quantized_weights_ = true;
    if (options_.mmap_weights) return std::make_unique<CpuWeight>(view);
    WeightView copy = view;
    LLM_ASSIGN_OR_RETURN(copy.data, CopyWeight(view.data, view.row_bytes * view.rows));
    return std::make_unique<CpuWeight>(copy);
  }

  using Backend::AllocTensor;
  absl::StatusOr<Tensor> AllocTensor(int64_t rows, int64_t cols, bool matmul_input) override {
    if (rows < 0 || cols < 1) return absl::InvalidArgumentError("bad tensor shape");
    auto storage = AllocAligned<float>(rows * cols, "activations");
    if (!storage.ok()) return storage.status();
    Tensor t{storage->get(), rows, cols};
    tensors_.push_back(*std::move(storage));
    // Size the q8 scratch for the largest tensor that may feed a MatMul.
    const int64_t blocks = rows * ((cols + kernels::kQ8Block - 1) / kernels::kQ8Block);
    if (matmul_input && blocks > q8_capacity_) {
      auto q8 = AllocAligned<kernels::BlockQ8>(blocks, "quantized activations");
      if (!q8.ok()) return q8.status();
      q8_ = *std::move(q8);
      q8_capacity_ = blocks;
      q8_ready_ = {};
    }
    if (rows > static_cast<int64_t>(act_rows_.size())) act_rows_.resize(rows);
    return t;
  }

  absl::Status AllocKvCache(const KvCacheShape& shape) override {
    const int64_t row = head_dim_ > 0 ? head_dim_ : shape.kv_dim;
    if ((shape.k_type == model::KvType::kQ8_0 || shape.v_type == model::KvType::kQ8_0) &&
        row % kernels::kQ8Block != 0) {
      return absl::InvalidArgumentError(
          StrCat("a q8_0 KV cache needs a head dimension that is a "
                 "multiple of 32; the model's is ",
                 row));
    }
    kv_ = shape;
    auto cache = AllocAligned<uint8_t>(shape.block_bytes() * shape.num_blocks, "the KV cache");
    if (!cache.ok()) return cache.status();
    cache_ = *std::move(cache);
    const int64_t max_positions = int64_t{shape.num_blocks} * shape.block_size;
    score_rows_ = row_heads_;
    // Per thread: a row of scores per cached position for score_rows_ query
    // heads, and at least enough for a whole chunk's (kChunk tokens) up to
    // kChunkContext positions (AttentionImpl's passes; longer contexts take
    // fewer tokens a pass).
    constexpr int64_t kChunkContext = 4096;
    const int64_t score_floats =
        score_rows_ * std::max(max_positions, kChunk * std::min(max_positions, kChunkContext));
    scores_.assign(pool_.num_threads(), std::vector<float>(score_floats));
    qh_.assign(pool_.num_threads(), std::vector<float>(kChunk * score_rows_ * row));
    return absl::OkStatus();
  }

  absl::Status WriteTensor(Tensor t, std::span<const float> values) override {
    if (static_cast<int64_t>(values.size()) != t.rows * t.cols) {
      return absl::InvalidArgumentError("WriteTensor: size mismatch");
    }
    q8_ready_ = {};
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
    q8_ready_ = {};
    const int64_t bytes = kv_.block_bytes();
    std::memcpy(cache_.get() + dst * bytes, cache_.get() + src * bytes, bytes);
  }

  int32_t KvLayout() const override { return model::kKvLayoutCpu; }

  absl::Status ReadKvBlock(int32_t block, int32_t positions, std::span<uint8_t> out) override {
    if (absl::Status s = CheckKvBlock(block, out.size()); !s.ok()) return s;
    if (head_dim_ <= 0 || kv_.kv_dim % head_dim_ != 0) {
      return absl::FailedPreconditionError("ReadKvBlock: the model's head dimension is unknown");
    }
    const int64_t bytes = kv_.block_bytes();
    std::memcpy(out.data(), cache_.get() + block * bytes, bytes);
    // Zero the slots from `positions` on: per layer, K and V, each head's
    // [slot][head_dim] rows.
    const int64_t used = std::clamp<int64_t>(positions, 0, kv_.block_size);
    const int64_t k_row = model::KvRowBytes(kv_.k_type, head_dim_);
    const int64_t v_row = model::KvRowBytes(kv_.v_type, head_dim_);
    const int64_t heads = kv_.kv_dim / head_dim_;
    uint8_t* head = out.data();
    for (int64_t l = 0; l < kv_.layers; ++l) {
      for (const int64_t row : {k_row, v_row}) {
        for (int64_t h = 0; h < heads; ++h, head += kv_.block_size * row) {
          std::memset(head + used * row, 0, (kv_.block_size - used) * row);
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status WriteKvBlock(int32_t block, std::span<const uint8_t> in) override {
    if (absl::Status s = CheckKvBlock(block, in.size()); !s.ok()) return s;
    q8_ready_ = {};
    std::memcpy(cache_.get() + block * kv_.block_bytes(), in.data(), in.size());
    return absl::OkStatus();
  }

  absl::Status CheckModel(const AttentionParams& attention, const RopeParams&) override {
    head_dim_ = attention.head_dim;
    if (attention.head_count_kv > 0) {
      row_heads_ = std::clamp<int64_t>(attention.head_count / attention.head_count_kv, 1,
                                       kernels::kMaxRowHeads);
    }
    return absl::OkStatus();
  }

  void Prewarm() override { pool_.Wake(); }

  absl::Status BeginStep(const StepBatch& batch) override {
    batch_ = &batch;
    rope_tables_.clear();
    q8_ready_ = {};
    return absl::OkStatus();
  }

  void Embed(const model::Weight& table, Tensor out) override {
    q8_ready_ = {};
    const WeightView& w = table.view();
    pool_.ParallelFor(out.rows, 8, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const uint8_t* row = w.data + batch_->tokens[r] * w.row_bytes;
        kernels::DequantizeRow(w.type, row, out.data + r * out.cols, out.cols);
      }
    });
  }

  void RmsNorm(const Tensor& x, const model::Weight& weight, float eps, Tensor out) override {
    const float* w = reinterpret_cast<const float*>(weight.view().data);
    const bool quantize = BeginQuantizedOutput(out);
    pool_.ParallelFor(x.rows, RowGrain(x.cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        NormRow(x.data + r * x.cols, w, x.cols, eps, out.data + r * out.cols);
        if (quantize) QuantizeOutput(out, r * out.cols, (r + 1) * out.cols);
      }
    });
    EndQuantizedOutput(out, x.rows, quantize);
  }

  void AddRmsNorm(Tensor x, const Tensor& y, const model::Weight& weight, float eps,
                  Tensor out) override {
    const float* w = reinterpret_cast<const float*>(weight.view().data);
    const bool quantize = BeginQuantizedOutput(out);
    pool_.ParallelFor(x.rows, RowGrain(x.cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        float* xr = x.data + r * x.cols;
        const float* yr = y.data + r * y.cols;
        kernels::AddF32(xr, yr, x.cols);
        NormRow(xr, w, x.cols, eps, out.data + r * out.cols);
        if (quantize) QuantizeOutput(out, r * out.cols, (r + 1) * out.cols);
      }
    });
    EndQuantizedOutput(out, x.rows, quantize);
  }

  void MatMul(const Tensor& x, std::span<const MatMulTarget> targets) override {
    const int64_t n = x.rows;
    bool need_q8 = false;
    for (const MatMulTarget& t : targets) need_q8 |= !IsFloatType(t.weight->view().type);
    const int64_t blocks_per_row = x.cols / kernels::kQ8Block;
    const bool q8_ready =
        q8_ready_.data == x.data && q8_ready_.rows >= x.rows && q8_ready_.cols == x.cols;
    q8_ready_ = {};  // the targets may overwrite x's memory
    if (need_q8 && !q8_ready) {
      pool_.ParallelFor(n, 8, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          kernels::QuantizeQ8(x.data + r * x.cols, q8_.get() + r * blocks_per_row, x.cols);
        }
      });
    }
    for (int64_t r = 0; r < n; ++r) {
      act_rows_[r] =
          kernels::ActRow{x.data + r * x.cols, need_q8 ? q8_.get() + r * blocks_per_row : nullptr};
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
            kernels::MatMulTile(w.type, w.data, w.row_bytes, w.cols, lo - base, hi - base,
                                act_rows_.data() + t0, tokens, t.out.data + t0 * t.out.cols,
                                t.out.cols);
          }
          if (t.bias != nullptr) {
            const float* b = reinterpret_cast<const float*>(t.bias->view().data) + (lo - base);
            for (int64_t r = 0; r < n; ++r)
              kernels::AddF32(t.out.data + r * t.out.cols + (lo - base), b, hi - lo);
          }
        }
        base += w.rows;
      }
    };
    // Row ranges start at multiples of the kernels' largest row tile.
    constexpr int64_t kRowAlign = 8;
    const int threads = pool_.num_threads();
    if (n <= 2) {
      // Decode: kDecodeChunks contiguous ranges per thread, taken in turn.
      // Long ranges keep each thread's weight prefetching on one stream; more
      // than one per thread lets a thread that the OS preempted (for the
      // server's RPC threads, on a machine whose cores all compute) hand its
      // remaining ranges to the others instead of stalling the step. With one
      // range per thread, e2e decode lost twice the CPU time those threads
      // took. Two tokens of a VNNI format go to the AVX-512 kernels, which
      // lay them out once per thread in the scope (not once per range).
      constexpr int64_t kDecodeChunks = 4;
      const int64_t chunks = threads * kDecodeChunks;
      // Whole tiles of the AVX-512 one-token kernels (16 rows).
      constexpr int64_t kDecodeAlign = 16;
      auto bound = [&](int64_t i) {
        const int64_t r =
            (total_rows * i / chunks + kDecodeAlign - 1) / kDecodeAlign * kDecodeAlign;
        return std::min(total_rows, r);
      };
      std::atomic<int64_t> next{0};
      pool_.Run([&](int, int) {
        const kernels::SameActivationsScope same;  // x stays as it is until Run returns
        for (int64_t c = next.fetch_add(1); c < chunks; c = next.fetch_add(1)) {
          run_rows(bound(c), bound(c + 1));
        }
      });
      return;
    }
    if (total_rows == 0) return;
    if (n > kTokenTile || kRowGrain * x.cols * n >= kTaskMacs) {
      // Prefill, and steps of more tokens than one activation tile (whose
      // pieces would lay their tokens out again for every tile:
      // SameActivationsScope keeps one layout): tasks of at least kRowGrain
      // rows and kTaskMacs multiply-adds, taken in turn; as many as
      // possible, and a multiple of the threads so that they finish
      // together. Fewer rows than that for every thread: one task per thread
      // (of at least kRowAlign rows).
      const int64_t row_grain = std::max(kRowGrain, kTaskMacs / (x.cols * n));
      int64_t num_tasks = total_rows / row_grain;
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
      return;
    }
    // Batched decode of up to kTokenTile tokens: each thread's run of
    // pieces, with stealing.
    const int64_t per_thread = (total_rows + threads - 1) / threads;
    int64_t piece =
        std::min((per_thread + kPiecesPerThread - 1) / kPiecesPerThread, kPieceMacs / (x.cols * n));
    piece = (std::max(piece, kRowAlign) + kRowAlign - 1) / kRowAlign * kRowAlign;
    const int64_t num_pieces = (total_rows + piece - 1) / piece;
    claims_.Reset(num_pieces, threads);
    pool_.Run([&](int thread, int) {
      const kernels::SameActivationsScope same;  // x stays as it is until Run returns
      for (int64_t p = claims_.Next(thread); p >= 0; p = claims_.Next(thread)) {
        run_rows(p * piece, std::min(total_rows, (p + 1) * piece));
      }
    });
  }

  void Rope(Tensor q, Tensor k, const RopeParams& p) override {
    q8_ready_ = {};
    const int64_t pairs = p.rope_dim / 2;
    const float* cs_all = RopeTable(p, q.rows);
    auto rotate = [&](Tensor t, int64_t r) {
      const float* cs = cs_all + r * pairs * 2;
      for (int64_t h = 0; h < t.cols / p.head_dim; ++h) {
        float* head = t.data + r * t.cols + h * p.head_dim;
        p.neox ? kernels::RotateHalves(head, cs, pairs) : kernels::RotatePairs(head, cs, pairs);
      }
    };
    pool_.ParallelFor(q.rows, RowGrain(q.cols + k.cols), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        rotate(q, r);
        rotate(k, r);
      }
    });
  }

  void Attention(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttentionParams& p, Tensor out) override {
    // Each item quantizes its heads' outputs for the output projection when
    // they are whole activation blocks. The sequences cover rows [0, rows).
    const bool quantize = BeginQuantizedOutput(out) && p.head_dim % kernels::kQ8Block == 0;
    WithKvType(kv_.k_type, [&]<typename TK>() {
      WithKvType(kv_.v_type,
                 [&]<typename TV>() { AttentionImpl<TK, TV>(layer, q, k, v, p, quantize, out); });
    });
    int64_t rows = 0;
    bool in_order = true;  // the sequences' rows are [0, rows), one after the other
    for (const model::SequenceStep& s : batch_->sequences) {
      in_order = in_order && s.first_row == rows;
      rows += s.num_new;
    }
    EndQuantizedOutput(out, rows, quantize && in_order);
  }

  void SiluMul(const Tensor& gate, const Tensor& up, Tensor out) override {
    // The ranges start at multiples of kElementGrain, whole activation blocks.
    static_assert(kElementGrain % kernels::kQ8Block == 0);
    const bool quantize = BeginQuantizedOutput(out);
    pool_.ParallelFor(gate.rows * gate.cols, kElementGrain, [&](int64_t begin, int64_t end) {
      kernels::SiluMul(gate.data + begin, up.data + begin, out.data + begin, end - begin);
      if (quantize) QuantizeOutput(out, begin, end);
    });
    EndQuantizedOutput(out, gate.rows, quantize);
  }

  void GeluMul(const Tensor& gate, const Tensor& up, Tensor out) override {
    static_assert(kElementGrain % kernels::kQ8Block == 0);
    const bool quantize = BeginQuantizedOutput(out);
    pool_.ParallelFor(gate.rows * gate.cols, kElementGrain, [&](int64_t begin, int64_t end) {
      kernels::GeluMul(gate.data + begin, up.data + begin, out.data + begin, end - begin);
      if (quantize) QuantizeOutput(out, begin, end);
    });
    EndQuantizedOutput(out, gate.rows, quantize);
  }

  void Scale(Tensor x, float s) override {
    q8_ready_ = {};
    pool_.ParallelFor(x.rows * x.cols, kElementGrain, [&](int64_t begin, int64_t end) {
      kernels::ScaleF32(x.data + begin, s, end - begin);
    });
  }

  void Add(Tensor x, const Tensor& y) override {
    q8_ready_ = {};
    pool_.ParallelFor(x.rows * x.cols, kElementGrain, [&](int64_t begin, int64_t end) {
      kernels::AddF32(x.data + begin, y.data + begin, end - begin);
    });
  }

  void GatherLogitRows(const Tensor& x, Tensor out) override {
    q8_ready_ = {};
    for (int64_t i = 0; i < out.rows; ++i) {
      std::memcpy(out.data + i * out.cols, x.data + batch_->logit_rows[i] * x.cols, x.cols * 4);
    }
  }

  // EncodeLogits applies the masks.
  bool AppliesTokenMasks() const override { return options_.apply_token_masks; }

  absl::Status ReadLogits(const Tensor& logits, std::span<const LogitsSpec> specs,
                          std::vector<Logits>* out) override {
    q8_ready_ = {};
    out->resize(logits.rows);
    pool_.ParallelFor(logits.rows, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        LogitsSpec spec = specs[r];
        if (!options_.apply_token_masks) spec.mask = nullptr;  // as a backend without them
        model::EncodeLogits({logits.data + r * logits.cols, static_cast<size_t>(logits.cols)}, spec,
                            &(*out)[r]);
      }
    });
    batch_ = nullptr;
    pool_.Idle();  // the step is over: free the cores for the RPC threads
    return absl::OkStatus();
  }

 private:
  // New tokens per attention work item.
  static constexpr int64_t kChunk = 16;
  // An attention work item: query heads [head_begin, head_end) of the new
  // tokens [token, token + kChunk) of sequence `seq` (see AttentionImpl).
  struct Item {
    int32_t seq, head_begin, head_end, token;
  };
  // The rows of a tensor that q8_ holds, quantized by the op that wrote
  // them; none (data null) after any other op.
  struct Q8Ready {
    const float* data = nullptr;
    int64_t rows = 0, cols = 0;
  };

  // The (cos, sin) of every row's position and pair for `p`, computed once a
  // step per distinct base, scale and factors (a model with sliding-window
  // layers has two), exactly as llama.cpp computes them: float, the
  // frequency advanced by repeated multiplication and divided by the pair's
  // factor, so that GGUF models give llama.cpp's results; the reference in
  // the tests does the same.
  const float* RopeTable(const RopeParams& p, int64_t rows) {
    const float* factors = p.freq_factors != nullptr
                               ? reinterpret_cast<const float*>(p.freq_factors->view().data)
                               : nullptr;
    for (const RopeCache& c : rope_tables_) {
      if (c.base == p.freq_base && c.scale == p.freq_scale && c.dim == p.rope_dim &&
          c.factors == factors && c.attn_factor == p.attn_factor && c.ext == p.ext_factor &&
          c.rows >= rows) {
        return c.table.data();
      }
    }
    const int64_t pairs = p.rope_dim / 2;
    RopeCache& c = rope_tables_.emplace_back();
    c.base = p.freq_base, c.scale = p.freq_scale, c.dim = p.rope_dim, c.factors = factors;
    c.attn_factor = p.attn_factor;
    c.ext = p.ext_factor;
    c.rows = rows;
    c.table.resize(rows * pairs * 2);
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.rope_dim));
    for (int64_t r = 0; r < rows; ++r) {
      float theta = static_cast<float>(batch_->positions[r]);
      for (int64_t i = 0; i < pairs; ++i) {
        const float ff = factors != nullptr ? factors[i] : 1.0f;
        const float extrap = theta / ff, interp = p.freq_scale * extrap;
        float angle = interp, mscale = p.attn_factor;
        if (p.ext_factor != 0.0f) {
          const float y =
              (static_cast<float>(i) - p.corr_low) / std::max(0.001f, p.corr_high - p.corr_low);
          const float mix = (1 - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
          angle = interp * (1 - mix) + extrap * mix;
          mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
        }
        c.table[(r * pairs + i) * 2] = std::cos(angle) * mscale;
        c.table[(r * pairs + i) * 2 + 1] = std::sin(angle) * mscale;
        theta *= theta_scale;
      }
    }
    return c.table.data();
  }

  // One row of RmsNorm: the same bits from RmsNorm and AddRmsNorm.
  static void NormRow(const float* in, const float* w, int64_t cols, float eps, float* o) {
    const float ms = kernels::DotF32(in, in, cols) / static_cast<float>(cols);
    const float scale = 1.0f / std::sqrt(ms + eps);
    kernels::ScaleMulF32(in, scale, w, o, cols);
  }

  // The ops whose output usually feeds a MatMul (RmsNorm, AddRmsNorm,
  // SiluMul, Attention) quantize it for the quantized weights' kernels as
  // they write it, while it is in L1: the MatMul that reads `out` next then
  // skips its own quantizing loop (one hand-off between threads fewer per
  // product; 120 in a step of SmolLM2). Begin...: whether to (the model has
  // quantized weights and out's rows are whole activation blocks). End...:
  // records that q8_ holds the first `rows` rows of out, the rows the op
  // wrote (a MatMul over more rows quantizes them itself). Every other op
  // that writes memory forgets it.
  bool BeginQuantizedOutput(const Tensor& out) {
    q8_ready_ = {};
    return quantized_weights_ && out.cols % kernels::kQ8Block == 0;
  }
  void EndQuantizedOutput(const Tensor& out, int64_t rows, bool quantized) {
    if (quantized) q8_ready_ = {out.data, rows, out.cols};
  }
  // Elements [begin, end) of out (whole blocks) into their q8_ blocks: row r's
  // blocks start at r * out.cols / kQ8Block, as MatMul lays them out.
  void QuantizeOutput(const Tensor& out, int64_t begin, int64_t end) {
    kernels::QuantizeQ8(out.data + begin, q8_.get() + begin / kernels::kQ8Block, end - begin);
  }

  // The cache holds, per (block, layer), the keys then the values, each
  // [KV head][slot][head_dim]: the block_size positions of one head are
  // contiguous, so that attention reads each head's rows as one stream
  // (with [slot][kv_dim] rows, one head's 16 rows were 16 strided reads, and
  // attention ~1/3 longer at 16 sessions).
  // A row of type T (float, fp16 bits or KvQ8Block) for each KvType.
  template <typename F>
  static void WithKvType(model::KvType t, F f) {
    switch (t) {
      case model::KvType::kF32:
        return f.template operator()<float>();
      case model::KvType::kQ8_0:
        return f.template operator()<kernels::KvQ8Block>();
      case model::KvType::kF16:
        return f.template operator()<uint16_t>();
    }
  }
  // The first row of `head`'s keys (values) in a block: per (block, layer)
  // the keys of every head, then the values (the two of different types).
  uint8_t* LayerAt(int64_t block, int64_t layer) {
    return cache_.get() +
           (block * kv_.layers + layer) * kv_.block_size * (kv_.k_bytes() + kv_.v_bytes());
  }
  template <typename T>
  T* KeyAt(int64_t block, int64_t layer, int64_t head, int64_t head_dim) {
    return reinterpret_cast<T*>(LayerAt(block, layer) +
                                head * kv_.block_size * model::KvRowBytes(kv_.k_type, head_dim));
  }
  // INVALID_ARGUMENT unless `block` is in the pool and `size` a block's bytes.
  absl::Status CheckKvBlock(int32_t block, size_t size) const {
    if (block < 0 || block >= kv_.num_blocks || static_cast<int64_t>(size) != kv_.block_bytes()) {
      return absl::InvalidArgumentError("KV block out of the pool, or a buffer of the wrong size");
    }
    return absl::OkStatus();
  }
  // A copy of `bytes` weight bytes at `src` in the weight arena: chunks of
  // kArenaChunk bytes (or one tensor's size, if larger) on transparent huge
  // pages, tensors 64-byte aligned. A tensor uploaded twice (a tied LM head)
  // is copied once.
  absl::StatusOr<const uint8_t*> CopyWeight(const uint8_t* src, size_t bytes) {
    constexpr size_t kArenaChunk = size_t{32} << 20;
    if (auto it = copies_.find(src); it != copies_.end()) return it->second;
    const size_t padded = (bytes + 63) / 64 * 64;
    if (arena_left_ < padded) {
      const size_t chunk = std::max(padded, kArenaChunk);
      LLM_ASSIGN_OR_RETURN(AlignedArray<uint8_t> a, AllocAligned<uint8_t>(chunk, "the weights"));
      arena_next_ = a.get();
      arena_left_ = chunk;
      arenas_.push_back(std::move(a));
    }
    uint8_t* dst = arena_next_;
    std::memcpy(dst, src, bytes);
    arena_next_ += padded;
    arena_left_ -= padded;
    copies_.emplace(src, dst);
    return dst;
  }

  // Asks for [p, p + bytes) in the cache (L1; PrefetchL2: L2), a line at a time.
  static void Prefetch(const void* p, int64_t bytes) {
    const char* c = static_cast<const char*>(p);
    for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i);
  }
  static void PrefetchL2(const void* p, int64_t bytes) {
    const char* c = static_cast<const char*>(p);
    for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch(c + i, 0, 2);
  }

  template <typename T>
  T* ValueAt(int64_t block, int64_t layer, int64_t head, int64_t head_dim) {
    return reinterpret_cast<T*>(LayerAt(block, layer) + kv_.block_size * kv_.k_bytes() +
                                head * kv_.block_size * model::KvRowBytes(kv_.v_type, head_dim));
  }
  // Row `slot` of a head's rows of n values of type T.
  template <typename T>
  static T* RowAt(T* head, int64_t slot, int64_t n) {
    if constexpr (std::is_same_v<T, kernels::KvQ8Block>)
      return head + slot * (n / kernels::kQ8Block);
    return head + slot * n;
  }

  static void Store(const float* x, float* out, int64_t n) { std::memcpy(out, x, n * 4); }
  static void Store(const float* x, uint16_t* out, int64_t n) { kernels::F32ToF16(x, out, n); }
  static void Store(const float* x, kernels::KvQ8Block* out, int64_t n) {
    kernels::QuantizeKvQ8(x, out, n);
  }

  // Attention over a cache whose keys are of element type TK and values of
  // TV (float, fp16 bits or Q8_0 blocks); `quantize`: also into q8_
  // (QuantizeOutput).
  template <typename TK, typename TV>
  void AttentionImpl(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v,
                     const AttentionParams& p, bool quantize, Tensor out) {
    const int64_t kv_dim = kv_.kv_dim, bs = kv_.block_size, hd = p.head_dim;
    // 1. Work items: a chunk of up to kChunk new tokens of one sequence, and
    // a range of its query heads: those of one KV head; all of them when
    // every sequence is one chunk (decode) and there are enough sequences;
    // one, when there would be fewer than 4 items per thread otherwise (one
    // session decoding: 3 KV heads, 2 threads), so that the threads finish
    // together, unless a context is long (kGroupedContext). The query
    // heads of a KV head are computed together (up to score_rows_ at a
    // time), so each key and value row is read once for all of them; a
    // thread that takes all of a sequence's KV heads reads
    // each block's keys and values from one place (bench/README.md,
    // "Measurements behind the code", attention items).
    // From this many positions, the items keep a KV head's query heads
    // together even when there are few: each key and value row is then read
    // (and, fp16 or Q8_0, converted) once instead of once per query head,
    // which outweighs the uneven split (SmolLM2 at 8192 positions: 3 items
    // on 2 threads; the attention kernels' CPU time per token ~1.3-1.9x
    // less, more with Q8_0 than fp16, in runs on a loaded machine;
    // llm-kv-attention-bench, bench/README.md, "KV cache q8_0"). The items'
    // bits are the same either way (DotRowsHeads, AxpyRowsHeads).
    constexpr int64_t kGroupedContext = 1024;
    const int64_t kv_group = p.head_count / p.head_count_kv;
    const int64_t min_items = 4 * pool_.num_threads();
    int64_t chunks = 0, max_context = 0;
    bool one_chunk_each = true;
    for (const model::SequenceStep& s : batch_->sequences) {
      max_context = std::max(max_context, s.start_pos + s.num_new);
      chunks += (s.num_new + kChunk - 1) / kChunk;
      one_chunk_each = one_chunk_each && s.num_new <= kChunk;
    }
    // One item per sequence (all heads, a single chunk): the item is its
    // sequence's only reader in this step.
    const bool per_sequence = one_chunk_each && chunks >= min_items;
    int64_t item_heads = kv_group;  // query heads per item
    if (per_sequence) {
      item_heads = p.head_count;
    } else if (chunks * p.head_count_kv < min_items && max_context < kGroupedContext) {
      item_heads = 1;
    }
    items_.clear();
    for (size_t s = 0; s < batch_->sequences.size(); ++s) {
      const int64_t num_new = batch_->sequences[s].num_new;
      for (int64_t h = 0; h < p.head_count; h += item_heads) {
        for (int64_t t = 0; t < num_new; t += kChunk) {
          items_.push_back(Item{static_cast<int32_t>(s), static_cast<int32_t>(h),
                                static_cast<int32_t>(h + item_heads), static_cast<int32_t>(t)});
        }
      }
    }
    if (per_sequence) {
      // One coarse item per sequence: the longest contexts first, so that a
      // long one does not come last and leave the other threads waiting.
      std::sort(items_.begin(), items_.end(), [&](const Item& a, const Item& b) {
        return batch_->sequences[a.seq].start_pos > batch_->sequences[b.seq].start_pos;
      });
    }
    // 2. The new keys and values into the cache: by the items when there is
    // one per sequence, else here first (with one KV head, a prefill's items
    // have all heads too, but several chunks, which read each other's rows).
    auto store = [&](const model::SequenceStep& s) {
      for (int64_t t = 0; t < s.num_new; ++t) {
        const int64_t pos = s.start_pos + t, row = s.first_row + t;
        const int64_t block = s.blocks[pos / bs], slot = pos % bs;
        for (int64_t h = 0; h < p.head_count_kv; ++h) {
          Store(k.data + row * kv_dim + h * hd, RowAt(KeyAt<TK>(block, layer, h, hd), slot, hd),
                hd);
          Store(v.data + row * kv_dim + h * hd, RowAt(ValueAt<TV>(block, layer, h, hd), slot, hd),
                hd);
        }
      }
    };
    if (!per_sequence) {
      for (const model::SequenceStep& s : batch_->sequences) store(s);
    }
    // 3. The items, taken in turn.
    const int64_t block_region = bs * (kv_.k_bytes() + kv_.v_bytes());
    constexpr int64_t kItemPrefetchBytes = 256 * 1024;
    constexpr int64_t kNextItemPrefetchBytes = 64 * 1024;
    // The first `bytes` of this layer's keys and values of sequence s (all
    // its heads: each block's are one run of block_region bytes), into L2.
    // A sliding window starts at the first new token's window.
    auto prefetch_sequence = [&](const model::SequenceStep& s, int64_t bytes) {
      const int64_t blocks = (s.start_pos + s.num_new + bs - 1) / bs;
      const int64_t first =
          p.window > 0 ? std::max<int64_t>(0, s.start_pos + 1 - p.window) / bs : 0;
      for (int64_t b = first; b < blocks && bytes > 0; ++b) {
        PrefetchL2(LayerAt(s.blocks[b], layer), std::min(block_region, bytes));
        bytes -= block_region;
      }
    };
    const int64_t num_work = static_cast<int64_t>(items_.size());
    std::atomic<int64_t> next{0};
    pool_.Run([&](int thread, int) {
      float* const scores = scores_[thread].data();
      const int64_t score_floats = static_cast<int64_t>(scores_[thread].size());
      float* const qh = qh_[thread].data();  // kChunk x score_rows_ x head_dim
      for (int64_t i = next.fetch_add(1); i < num_work; i = next.fetch_add(1)) {
        const Item& item = items_[i];
        const model::SequenceStep& s = batch_->sequences[item.seq];
        const int64_t t_end = std::min<int64_t>(s.num_new, item.token + kChunk);
        if (per_sequence) {
          store(s);
          // Ask for the item's keys and values in L2 at once (into L1 they
          // push each other out), and for the start of the item this thread
          // most likely takes next (items go in turn: i + threads), which
          // then does not start cold (bench/README.md, "Measurements behind
          // the code", attention prefetch).
          prefetch_sequence(s, kItemPrefetchBytes);
          if (const int64_t ahead = i + pool_.num_threads(); ahead < num_work) {
            prefetch_sequence(batch_->sequences[items_[ahead].seq], kNextItemPrefetchBytes);
          }
        }
        // The item's query heads, up to score_rows_ of one KV head at a
        // time, read each key and value row once for all of them; a prefill
        // chunk's tokens go in passes of up to `pass` tokens, whose scores
        // DotRowsQueries computes together: each key row converted once for
        // all the pass's queries (the bits of the token-by-token path).
        for (int64_t h0 = item.head_begin, g = 0; h0 < item.head_end; h0 += g) {
          const int64_t kv_head = h0 / kv_group;
          g = std::min({score_rows_, item.head_end - h0, (kv_head + 1) * kv_group - h0});
          const int64_t span = s.start_pos + t_end - FirstAttended(p, s.start_pos + item.token);
          const int64_t pass = std::clamp<int64_t>(score_floats / (g * span), 1, kChunk);
          for (int64_t t0 = item.token; t0 < t_end; t0 += pass) {
            AttendPass<TK, TV>(layer, q, p, s, kv_head, h0, g, t0, std::min(t_end, t0 + pass),
                               scores, qh, quantize, out);
          }
        }
      }
    });
  }

  // The first position that a query at `pos` attends to: 0, or the start of
  // its sliding window.
  static int64_t FirstAttended(const AttentionParams& p, int64_t pos) {
    return p.window > 0 ? std::max<int64_t>(0, pos + 1 - p.window) : 0;
  }

  // Attention of sequence s's new tokens [t0, t1) for query heads [h0, h0 +
  // g) of KV head kv_head (AttentionImpl's items): all the queries' scores
  // first, key block by key block (one token: DotRowsHeads; more:
  // DotRowsQueries, the same bits), then each query's softmax, then each
  // token's g heads' values (AxpyRowsHeads). scores: (t1 - t0) x g rows of
  // the longest query's positions; qh: as many queries' head_dim floats.
  template <typename TK, typename TV>
  void AttendPass(int64_t layer, const Tensor& q, const AttentionParams& p,
                  const model::SequenceStep& s, int64_t kv_head, int64_t h0, int64_t g, int64_t t0,
                  int64_t t1, float* scores, float* qh, bool quantize, Tensor out) {
    constexpr int kMaxQueries = kChunk * kernels::kMaxRowHeads;
    const int64_t bs = kv_.block_size, hd = p.head_dim;
    const int nq = static_cast<int>((t1 - t0) * g);
    const int64_t j_lo = FirstAttended(p, s.start_pos + t0), j_hi = s.start_pos + t1;
    const float* qs[kMaxQueries];
    float* sc[kMaxQueries];
    int64_t first[kMaxQueries], n_pos[kMaxQueries];
    // With fp16 keys the query is rounded to fp16 as well, as llama.cpp does
    // (its K·Q product runs in fp16 x fp16); a token's g heads' queries are
    // adjacent, so one call rounds them all. (With Q8_0 keys llama.cpp
    // quantizes the query to Q8_0; here it stays fp32, the keys converted
    // exactly.)
    constexpr bool kF16 = std::is_same_v<TK, uint16_t>;
    for (int64_t t = t0; t < t1; ++t) {
      const float* qrow = q.data + (s.first_row + t) * q.cols + h0 * hd;
      float* rounded = qh + (t - t0) * g * hd;
      if constexpr (kF16) kernels::RoundThroughF16(qrow, rounded, g * hd);
      for (int64_t h = 0; h < g; ++h) {
        const int64_t i = (t - t0) * g + h;
        qs[i] = (kF16 ? rounded : qrow) + h * hd;
        sc[i] = scores + i * (j_hi - j_lo);
        n_pos[i] = s.start_pos + t + 1;
        first[i] = FirstAttended(p, s.start_pos + t);
      }
    }
    // Scores key block by key block, over positions [first, n_pos) of each
    // query: sc[i][j - first[i]] is position j's. The blocks lie anywhere
    // in the pool, so the next block's keys and this block's values are
    // prefetched (the hardware prefetcher sees only the run within a block).
    const int64_t k_head_bytes = bs * model::KvRowBytes(kv_.k_type, hd);
    const int64_t v_head_bytes = bs * model::KvRowBytes(kv_.v_type, hd);
    for (int64_t j = j_lo; j < j_hi;) {
      const int64_t slot = j % bs, count = std::min(bs - slot, j_hi - j);
      const TK* kj = RowAt(KeyAt<TK>(s.blocks[j / bs], layer, kv_head, hd), slot, hd);
      if (j + count < j_hi) {
        Prefetch(KeyAt<TK>(s.blocks[j / bs + 1], layer, kv_head, hd), k_head_bytes);
      }
      Prefetch(ValueAt<TV>(s.blocks[j / bs], layer, kv_head, hd), v_head_bytes);
      if (t1 - t0 == 1) {
        float* scj[kernels::kMaxRowHeads];
        for (int h = 0; h < g; ++h) scj[h] = sc[h] + (j - first[h]);
        kernels::DotRowsHeads(qs, static_cast<int>(g), kj, hd, count, hd, p.scale, scj);
      } else {
        int64_t begin[kMaxQueries], end[kMaxQueries];
        float* scj[kMaxQueries];
        for (int i = 0; i < nq; ++i) {
          begin[i] = std::clamp<int64_t>(first[i] - j, 0, count);
          end[i] = std::clamp<int64_t>(n_pos[i] - j, 0, count);
          if (begin[i] >= end[i]) begin[i] = end[i] = 0;
          scj[i] = sc[i] + (begin[i] < end[i] ? j + begin[i] - first[i] : 0);
        }
        kernels::DotRowsQueries(qs, nq, kj, hd, count, hd, p.scale, begin, end, scj);
      }
      j += count;
    }
    for (int i = 0; i < nq; ++i) {
      const int64_t n_att = n_pos[i] - first[i];
      const float max = kernels::MaxF32(sc[i], n_att);
      kernels::ScaleF32(sc[i], static_cast<float>(1.0 / kernels::ExpInPlace(sc[i], n_att, max)),
                        n_att);
    }
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t row = s.first_row + t, i0 = (t - t0) * g;
      float* os[kernels::kMaxRowHeads];
      for (int h = 0; h < g; ++h) {
        os[h] = out.data + row * out.cols + (h0 + h) * hd;
        std::fill(os[h], os[h] + hd, 0.0f);
      }
      for (int64_t j = first[i0]; j < n_pos[i0];) {
        const int64_t slot = j % bs, count = std::min(bs - slot, n_pos[i0] - j);
        const TV* vj = RowAt(ValueAt<TV>(s.blocks[j / bs], layer, kv_head, hd), slot, hd);
        const float* wj[kernels::kMaxRowHeads];
        for (int h = 0; h < g; ++h) wj[h] = sc[i0 + h] + (j - first[i0]);
        kernels::AxpyRowsHeads(wj, static_cast<int>(g), vj, hd, count, hd, os);
        j += count;
      }
      if (quantize) {
        const int64_t begin = row * out.cols + h0 * hd;
        QuantizeOutput(out, begin, begin + g * hd);
      }
    }
  }

  const CpuBackendOptions options_;
  ThreadPool pool_;
  PieceClaims claims_;                         // MatMul's pieces in batched decode
  std::vector<AlignedArray<uint8_t>> arenas_;  // the weights' copies (CopyWeight)
  uint8_t* arena_next_ = nullptr;
  size_t arena_left_ = 0;
  absl::flat_hash_map<const uint8_t*, const uint8_t*> copies_;  // file bytes -> copy
  std::vector<AlignedArray<float>> tensors_;
  AlignedArray<kernels::BlockQ8> q8_;
  int64_t q8_capacity_ = 0;
  Q8Ready q8_ready_;
  bool quantized_weights_ = false;  // some weight is not F32 / F16 / BF16
  std::vector<kernels::ActRow> act_rows_;
  KvCacheShape kv_;
  AlignedArray<uint8_t> cache_;
  // Query heads an attention item computes together: the model's heads per
  // KV head (CheckModel, which LlamaModel calls before AllocKvCache), at most
  // kMaxRowHeads; score_rows_: its value when AllocKvCache sized, per thread,
  // that many rows of one score per cached position and that many query
  // heads (kv_dim is at least a head's dimension).
  int64_t row_heads_ = kernels::kMaxRowHeads;
  int64_t head_dim_ = 0;  // CheckModel's: the KV cache's per-head rows
  int64_t score_rows_ = 0;
  std::vector<std::vector<float>> scores_;
  std::vector<std::vector<float>> qh_;
  struct RopeCache {
    float base, scale, attn_factor, ext;
    int64_t dim, rows;
    const float* factors;
    std::vector<float> table;  // (cos, sin) per row and pair
  };
  std::vector<RopeCache> rope_tables_;  // this step's (RopeTable)
  std::vector<Item> items_;
  const StepBatch* batch_ = nullptr;
};

}  // namespace

int AvailableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return 1;
}

std::unique_ptr<model::Backend> CreateCpuBackend(const CpuBackendOptions& options,
                                                 absl::Status* placement) {
  CpuBackendOptions resolved = options;
  if (resolved.threads <= 0) resolved.threads = AvailableCores();
  auto backend = std::make_unique<CpuBackend>(resolved);
  if (placement != nullptr) *placement = backend->placement();
  return backend;
}

}  // namespace llm::cpu
