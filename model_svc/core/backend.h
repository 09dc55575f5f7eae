// The operations a transformer forward pass needs, implemented once per
// device (backend/cpu/, backend/cuda/). The forward itself
// (model/llama_model.cc) is written once over this interface, which lives in
// core/ with the types it speaks in (tensor.h, weight_view.h, step_batch.h,
// kv_cache_shape.h, logits.h): below both the model and the backends.
//
// Memory: tensors and weights live in backend memory (host memory for the
// CPU, device memory for CUDA); the backend owns them and frees them when it
// is destroyed. Activations are row-major fp32 matrices, one row per token of
// the step. The KV cache is a pool of blocks, each holding `block_size`
// positions of keys and values for every layer.
//
// Ordering: ops run in call order. A CPU backend runs each op to completion
// (using its thread pool); a CUDA backend enqueues them on one stream and
// synchronizes in ReadLogits.
//
// Threads: one thread drives a backend at a time (the engine's step loop).
#ifndef LLM_MODEL_SVC_CORE_BACKEND_H_
#define LLM_MODEL_SVC_CORE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model_svc/core/kv_cache_shape.h"
#include "model_svc/core/logits.h"
#include "model_svc/core/step_batch.h"
#include "model_svc/core/tensor.h"
#include "model_svc/core/weight_view.h"

namespace llm::model {

// A weight uploaded to (or wrapped by) a backend.
class Weight {
 public:
  virtual ~Weight() = default;
  const WeightView& view() const { return view_; }

 protected:
  explicit Weight(const WeightView& view) : view_(view) {}

 private:
  WeightView view_;  // on the CUDA backend, data may be released after upload
};

// out_i = x · W_iᵀ for several weights sharing the same input (Q, K and V; or
// gate and up), in one pass over the input.
// With a bias ([weight rows] F32 vector), out_i = x · W_iᵀ + b_i.
struct MatMulTarget {
  const Weight* weight;
  Tensor out;  // rows = x.rows, cols = weight rows
  const Weight* bias = nullptr;
};

struct RopeParams {
  int64_t head_dim = 0;
  int64_t rope_dim = 0;  // leading dimensions of each head that rotate
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  // false: pairs (2i, 2i + 1) (llama.cpp's "normal" RoPE, matching GGUF's
  // permuted llama Q/K rows); true: pairs (i, i + rope_dim / 2) ("NEOX").
  bool neox = false;
  // Optional [rope_dim / 2] F32 vector: pair i's angle is divided by
  // factor i (Llama 3.1+'s rope_freqs.weight).
  const Weight* freq_factors = nullptr;
  // cos and sin are multiplied by this (rope.scaling.attn_factor; llama.cpp's
  // mscale without YaRN).
  float attn_factor = 1.0f;
  // YaRN (ext_factor != 0): pair i's angle mixes the scaled and the
  // unscaled one by ext_factor * ramp(i) (1 below corr_low, 0 above
  // corr_high, linear between), and cos and sin are further multiplied by
  // 1 + 0.1 ln(1 / freq_scale): llama.cpp's rope_yarn.
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
};

struct AttentionParams {
  int64_t head_count = 0;
  int64_t head_count_kv = 0;
  int64_t head_dim = 0;
  float scale = 0.0f;  // 1/sqrt(head_dim)
  // > 0: a row at position p attends to positions (p - window, p] only
  // (sliding-window attention); 0: to [0, p].
  int64_t window = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // "cpu" or "cuda".
  virtual std::string name() const = 0;
  // A one-line description: ISA or device name, threads.
  virtual std::string description() const = 0;
  // The scheduler's default prefill target (SchedulerLimits::prefill_tokens,
  // EngineOptions::prefill_step_tokens): the prefill tokens a step holds
  // from which its cost per token stops falling, so that one more request's
  // prompt in the step would only delay the first tokens of those already in
  // it. 0: none (more prompts in a step keep paying, as on a GPU).
  virtual int64_t PrefillStepTokens() const { return 0; }

  // --- Memory (called at load time) -------------------------------------
  virtual absl::StatusOr<std::unique_ptr<Weight>> UploadWeight(const WeightView& view) = 0;
  // A scratch tensor. `matmul_input`: it may be a MatMul's input, for which
  // the CPU backend keeps a quantized copy (an [rows x vocab] logits tensor
  // is not, and would size that copy at ~1.25x its own bytes for nothing).
  virtual absl::StatusOr<Tensor> AllocTensor(int64_t rows, int64_t cols, bool matmul_input) = 0;
  absl::StatusOr<Tensor> AllocTensor(int64_t rows, int64_t cols) {
    return AllocTensor(rows, cols, /*matmul_input=*/true);
  }
  virtual absl::Status AllocKvCache(const KvCacheShape& shape) = 0;

  // Checks at load time that this backend runs a model of these shapes (the
  // CUDA attention kernel's head dimensions, say). Default: OK.
  virtual absl::Status CheckModel(const AttentionParams& attention, const RopeParams& rope) {
    return absl::OkStatus();
  }

  // --- Host copies of a tensor (tests and tools; synchronous) -------------
  // values.size() must be t.rows * t.cols.
  virtual absl::Status WriteTensor(Tensor t, std::span<const float> values) = 0;
  virtual absl::Status ReadTensor(const Tensor& t, std::span<float> values) = 0;

  // --- KV blocks ---------------------------------------------------------
  // Copies every layer's keys and values of block `src` into `dst`
  // (copy-on-write of a shared block).
  virtual void CopyKvBlock(int32_t src, int32_t dst) = 0;
  // Session snapshots (snapshot/snapshot.h): how a block's bytes are laid
  // out, as a snapshot names it (kKvLayoutCpu), or kKvLayoutNone when the
  // backend cannot read or write blocks (the calls below are then
  // UNIMPLEMENTED). Called between steps, by the thread that drives the
  // backend.
  virtual int32_t KvLayout() const { return kKvLayoutNone; }
  // Copies block `block` (KvCacheShape::block_bytes() bytes, `out`'s size)
  // to the host, its slots from `positions` on zeroed (they may hold another
  // sequence's keys).
  virtual absl::Status ReadKvBlock(int32_t block, int32_t positions, std::span<uint8_t> out) {
    return absl::UnimplementedError(name() + " backend: cannot read KV blocks (snapshots)");
  }
  // Overwrites block `block` with `in` (block_bytes() bytes).
  virtual absl::Status WriteKvBlock(int32_t block, std::span<const uint8_t> in) {
    return absl::UnimplementedError(name() + " backend: cannot write KV blocks (snapshots)");
  }

  // --- One step ----------------------------------------------------------
  // A step is about to start (the scheduler has work): get ready, e.g. wake
  // worker threads, while the caller builds the batch. Optional.
  virtual void Prewarm() {}
  // Makes the batch's tokens, positions and block tables visible to the ops
  // below (the CUDA backend copies them to the device). `batch` must outlive
  // the step.
  virtual absl::Status BeginStep(const StepBatch& batch) = 0;
  // out[r] = table[tokens[r]] (dequantized).
  virtual void Embed(const Weight& table, Tensor out) = 0;
  // out[r] = x[r] / rms(x[r]) * w, with rms = sqrt(mean(x²) + eps). `out`
  // may be `x`. A tensor viewed as [rows * heads, head_dim] normalizes each
  // head (QK-norm).
  virtual void RmsNorm(const Tensor& x, const Weight& w, float eps, Tensor out) = 0;
  virtual void MatMul(const Tensor& x, std::span<const MatMulTarget> targets) = 0;
  // Rotates pair i of the first rope_dim dimensions of every head of q and
  // k (see RopeParams.neox) by angle position * freq_scale *
  // base^(-2i/rope_dim) / factor_i, computed as llama.cpp computes it.
  virtual void Rope(Tensor q, Tensor k, const RopeParams& params) = 0;
  // Stores k and v of the step's rows in the KV cache at `layer`, then
  // computes causal attention of each row's query heads over its sequence's
  // positions [0, position], or the last params.window of them
  // (grouped-query: query head h reads KV head h / (head_count /
  // head_count_kv)). out has q's shape.
  virtual void Attention(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v,
                         const AttentionParams& params, Tensor out) = 0;
  // out = silu(gate) * up, elementwise.
  virtual void SiluMul(const Tensor& gate, const Tensor& up, Tensor out) = 0;
  // out = gelu(gate) * up, elementwise, with GELU's tanh approximation
  // computed as llama.cpp's CPU backend computes it: gate rounded to fp16,
  // gelu of that rounded to fp16 (its lookup table); gate <= -10 gives 0 and
  // gate >= 10 gives gate * up.
  virtual void GeluMul(const Tensor& gate, const Tensor& up, Tensor out) = 0;
  // x *= s, elementwise.
  virtual void Scale(Tensor x, float s) = 0;
  // x += y.
  virtual void Add(Tensor x, const Tensor& y) = 0;
  // x += y, then out = RmsNorm(x): the residual add and the next norm in one
  // op (one pass over the rows on the CPU). `out` may be `y`. Default: the two
  // ops, with the same results.
  virtual void AddRmsNorm(Tensor x, const Tensor& y, const Weight& w, float eps, Tensor out) {
    Add(x, y);
    RmsNorm(x, w, eps, out);
  }
  // out[i] = x[batch.logit_rows[i]].
  virtual void GatherLogitRows(const Tensor& x, Tensor out) = 0;
  // Converts each row of `logits` to the encoding of specs[i] on the host
  // (top-N is selected on the device by the CUDA backend). Ends the step.
  virtual absl::Status ReadLogits(const Tensor& logits, std::span<const LogitsSpec> specs,
                                  std::vector<Logits>* out) = 0;
  // Whether ReadLogits applies LogitsSpec::mask (token masks). A backend
  // that does not is never given one: the model reads masked rows as
  // float32 and masks and encodes them on the host (LlamaModel::Forward).
  virtual bool AppliesTokenMasks() const { return false; }
};

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_CORE_BACKEND_H_
