#include "model_svc/backend/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "common/half.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model_svc/backend/cuda/cuda_status.h"
#include "model_svc/backend/cuda/device_memory.h"
#include "model_svc/backend/cuda/kernels.h"
#include "model_svc/backend/cuda/quant_upload.h"
#include "model_svc/backend/cuda/step_graphs.h"
#include "model_svc/formats/weight_formats.h"
#include "model_svc/kernels/quant.h"

namespace llm::cuda {
namespace {

using gguf::TensorType;
using model::AttentionParams;
using model::KvCacheShape;
using model::Logits;
using model::LogitsEncoding;
using model::LogitsSpec;
using model::MatMulTarget;
using model::RopeParams;
using model::StepBatch;
using model::Tensor;
using model::WeightView;

constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
// Rows dequantized on the host per copy to the device at upload.
constexpr size_t kUploadChunkElements = size_t{8} << 20;
// Largest tile of a quantized weight dequantized to fp16 for a cuBLAS GEMM
// (prefill); smaller weights take one tile of their own size.
constexpr size_t kDequantTileBytes = size_t{32} << 20;

class CudaWeight : public model::Weight {
 public:
  // `quant`: kept quantized in quant_layout.h's layout (type is then unused).
  CudaWeight(const WeightView& view, std::shared_ptr<DeviceBuffer> data, DType type,
             std::optional<QuantKind> quant)
      : Weight(view), data_(std::move(data)), type_(type), quant_(quant) {}
  const void* data() const { return data_->get(); }
  DType type() const { return type_; }
  bool quantized() const { return quant_.has_value(); }
  QuantMatrix quant() const { return {data_->as<uint8_t>(), *quant_, view().rows, view().cols}; }

 private:
  std::shared_ptr<DeviceBuffer> data_;  // shared by a tied embedding and LM head
  DType type_;
  std::optional<QuantKind> quant_;
};

const CudaWeight& AsCuda(const model::Weight& w) { return static_cast<const CudaWeight&>(w); }

// "30 Q4_1, 1 Q8_0", or "none".
std::string CountsByType(const std::map<TensorType, int64_t>& counts) {
  std::vector<std::string> parts;
  for (const auto& [type, n] : counts) {
    const gguf::TensorTypeTraits* traits = gguf::FindTensorTypeTraits(static_cast<uint32_t>(type));
    parts.push_back(StrCat(n, " ", traits != nullptr ? traits->name : "?"));
  }
  return parts.empty() ? "none" : StrJoin(parts, ", ");
}

cudaDataType_t CublasType(DType t) {
  switch (t) {
    case DType::kF16:
      return CUDA_R_16F;
    case DType::kBF16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

// The step's int32 inputs: sections at fixed offsets of one buffer (so that
// captured graphs keep reading the right addresses), copied to the device
// in one transfer per step.
struct MetaLayout {
  int64_t rows = 0;    // capacity of the per-row sections
  int64_t blocks = 0;  // capacity of the block-table section
  int64_t tokens() const { return 0; }
  int64_t positions() const { return rows; }
  int64_t kv_pos() const { return 2 * rows; }
  int64_t table_offset() const { return 3 * rows; }
  int64_t logit_rows() const { return 4 * rows; }
  int64_t block_ids() const { return 5 * rows; }
  int64_t total() const { return 5 * rows + blocks; }
};

class CudaBackend : public model::Backend {
 public:
  CudaBackend(const CudaBackendOptions& options, const cudaDeviceProp& prop)
      : options_(options),
        device_name_(prop.name),
        sm_major_(prop.major),
        sm_minor_(prop.minor),
        sm_count_(prop.multiProcessorCount) {}

  ~CudaBackend() override {
    cudaSetDevice(options_.device);
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    graphs_.Clear();
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  absl::Status Init() {
    LLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
    LLM_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                             "cudaStreamCreate");
    LLM_CUBLAS_RETURN_IF_ERROR(cublasCreate(&cublas_), "cublasCreate");
    LLM_CUBLAS_RETURN_IF_ERROR(cublasSetStream(cublas_, stream_), "cublasSetStream");
    // A workspace of our own: cuBLAS must not allocate inside graph capture.
    LLM_ASSIGN_OR_RETURN(workspace_,
                         DeviceBuffer::Allocate(kCublasWorkspaceBytes, "the cuBLAS workspace"));
    LLM_CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(cublas_, workspace_.get(), workspace_.size()),
                               "cublasSetWorkspace");
    return absl::OkStatus();
  }

  std::string name() const override { return "cuda"; }
  std::string description() const override {
    const CudaMemoryUse use = MemoryUse();
    return StrCat("cuda (", device_name_, ", sm_", sm_major_, sm_minor_, ", ", sm_count_, " SMs, ",
                  use.total() >> 20, " MiB on device: weights ", use.weights >> 20, ", KV ",
                  use.kv_cache >> 20, ", activations and scratch ",
                  (use.activations + use.scratch) >> 20,
                  "; quantized matrices kept quantized: ", CountsByType(kept_quantized_),
                  "; dequantized to fp16: ", CountsByType(dequantized_), "; graphs ",
                  options_.graphs ? StrCat("on, ", graphs_.captured(), " captured") : "off", ")");
  }

  absl::Status CheckModel(const AttentionParams& attention, const RopeParams& rope) override {
    if (!AttentionSupportsHeadDim(attention.head_dim)) {
      return absl::UnimplementedError(
          StrCat("the CUDA backend's attention supports head dimensions that are multiples of "
                 "32 up to 256; this model's is ",
                 attention.head_dim));
    }
    return absl::OkStatus();
  }

  // --- Memory ----------------------------------------------------------------

  CudaMemoryUse MemoryUse() const {
    CudaMemoryUse use;
    for (const auto& [key, weak] : uploaded_) {
      if (std::shared_ptr<DeviceBuffer> b = weak.lock()) use.weights += b->size();
    }
    use.kv_cache = cache_.size();
    for (const DeviceBuffer& t : tensors_) use.activations += t.size();
    use.scratch = workspace_.size() + meta_dev_.size() + plan_dev_.size() + lse_dev_.size() +
                  top_dev_.size() + half_dev_.size();
    for (const DeviceBuffer& a : act_) use.scratch += a.size();
    use.scratch += dequant_.size();
    return use;
  }

  absl::StatusOr<std::unique_ptr<model::Weight>> UploadWeight(const WeightView& view) override {
    LLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
    DType type;
    switch (view.type) {
      case TensorType::kF32:
        type = DType::kF32;
        break;
      case TensorType::kBF16:
        type = DType::kBF16;
        break;
      default:
        type = DType::kF16;  // F16 as it is; quantized types dequantized to it
        break;
    }
    if (view.type != TensorType::kF32 && view.type != TensorType::kF16 &&
        view.type != TensorType::kBF16 && !formats::IsSupportedWeightType(view.type)) {
      return absl::UnimplementedError(StrCat("tensor ", view.name, ": unsupported type"));
    }
    const std::optional<QuantKind> quant =
        options_.quantized_weights ? QuantKindOf(view.type) : std::nullopt;
    // A tied LM head is the embedding table's view: upload it once.
    const UploadKey key{view.data, view.type, view.rows, view.cols};
    if (auto it = uploaded_.find(key); it != uploaded_.end()) {
      if (std::shared_ptr<DeviceBuffer> buffer = it->second.lock()) {
        return std::make_unique<CudaWeight>(view, std::move(buffer), type, quant);
      }
    }
    if (quant.has_value()) {
      const QuantMatrix layout{nullptr, *quant, view.rows, view.cols};
      std::vector<uint8_t> packed(static_cast<size_t>(layout.bytes()));
      RepackQuant(view.data, static_cast<int64_t>(view.row_bytes), layout, packed.data());
      LLM_ASSIGN_OR_RETURN(DeviceBuffer buffer,
                           DeviceBuffer::Allocate(packed.size(), StrCat("tensor ", view.name)));
      auto shared = std::make_shared<DeviceBuffer>(std::move(buffer));
      LLM_RETURN_IF_ERROR(CopyToDevice(shared->get(), packed.data(), packed.size(),
                                       StrCat("upload of tensor ", view.name)));
      uploaded_[key] = shared;
      ++kept_quantized_[view.type];
      gemm_input_[static_cast<int>(DType::kF16)] = true;  // its prefill tiles are fp16
      // The fp16 tile scratch for prefill GEMMs, sized here for the largest
      // weight: grown during a step, it would drop the captured graphs.
      const size_t tile =
          std::min(kDequantTileBytes, static_cast<size_t>(view.rows * view.cols) * 2);
      if (dequant_.size() < tile) {
        dequant_ = DeviceBuffer();  // free first: the device may not hold both
        LLM_ASSIGN_OR_RETURN(dequant_, DeviceBuffer::Allocate(tile, "dequantized weight tiles"));
      }
      return std::make_unique<CudaWeight>(view, std::move(shared), type, quant);
    }
    const size_t elements = static_cast<size_t>(view.rows) * view.cols;
    LLM_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(elements * DTypeBytes(type),
                                                                     StrCat("tensor ", view.name)));
    auto shared = std::make_shared<DeviceBuffer>(std::move(buffer));
    if (view.type == TensorType::kF32 || view.type == TensorType::kF16 ||
        view.type == TensorType::kBF16) {
      LLM_RETURN_IF_ERROR(CopyToDevice(shared->get(), view.data, view.row_bytes * view.rows,
                                       StrCat("upload of tensor ", view.name)));
    } else {
      LLM_RETURN_IF_ERROR(UploadDequantized(view, shared->as<uint16_t>()));
      ++dequantized_[view.type];
    }
    uploaded_[key] = shared;
    if (view.rows > 1) gemm_input_[static_cast<int>(type)] = true;
    return std::make_unique<CudaWeight>(view, std::move(shared), type, std::nullopt);
  }

  using Backend::AllocTensor;
  absl::StatusOr<Tensor> AllocTensor(int64_t rows, int64_t cols, bool /*matmul_input*/) override {
    if (rows < 0 || cols < 1) return absl::InvalidArgumentError("bad tensor shape");
    LLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
    LLM_ASSIGN_OR_RETURN(
        DeviceBuffer b,
        DeviceBuffer::Allocate(static_cast<size_t>(rows) * cols * sizeof(float), "activations"));
    Tensor t{b.as<float>(), rows, cols};
    tensors_.push_back(std::move(b));
    max_rows_ = std::max(max_rows_, rows);
    max_elements_ = std::max(max_elements_, rows * cols);
    return t;
  }

  absl::Status AllocKvCache(const KvCacheShape& shape) override {
    if (shape.k_type != shape.v_type || shape.k_type == model::KvType::kQ8_0) {
      return absl::UnimplementedError(
          "the CUDA backend's KV cache holds f16 or f32, keys and values alike (q8_0 and mixed "
          "--kv_cache_type_k / --kv_cache_type_v are CPU only)");
    }
    LLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
    kv_ = shape;
    LLM_ASSIGN_OR_RETURN(
        cache_, DeviceBuffer::Allocate(static_cast<size_t>(shape.block_bytes()) * shape.num_blocks,
                                       "the KV cache"));
    return absl::OkStatus();
  }

  absl::Status WriteTensor(Tensor t, std::span<const float> values) override {
    if (static_cast<int64_t>(values.size()) != t.rows * t.cols) {
      return absl::InvalidArgumentError("WriteTensor: size mismatch");
    }
    return CopyToDevice(t.data, values.data(), values.size_bytes(), "WriteTensor");
  }

  absl::Status ReadTensor(const Tensor& t, std::span<float> values) override {
    if (static_cast<int64_t>(values.size()) != t.rows * t.cols) {
      return absl::InvalidArgumentError("ReadTensor: size mismatch");
    }
    LLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
    LLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(values.data(), t.data, values.size_bytes(),
                                             cudaMemcpyDeviceToHost, stream_),
                             "ReadTensor");
    return CudaStatus(cudaStreamSynchronize(stream_), "ReadTensor");
  }

  void CopyKvBlock(int32_t src, int32_t dst) override {
    Check(cudaSetDevice(options_.device), "cudaSetDevice");
    const size_t bytes = kv_.block_bytes();
    uint8_t* base = cache_.as<uint8_t>();
    Check(cudaMemcpyAsync(base + dst * bytes, base + src * bytes, bytes, cudaMemcpyDeviceToDevice,
                          stream_),
          "KV block copy");
  }

  // --- One step --------------------------------------------------------------

  absl::Status BeginStep(const StepBatch& batch) override {
    if (!error_.ok()) return error_;
    LLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
    const int64_t n = static_cast<int64_t>(batch.tokens.size());
    const int64_t n_out = static_cast<int64_t>(batch.logit_rows.size());
    if (n > max_rows_ || n_out > max_rows_) {
      return absl::InvalidArgumentError(StrCat("step of ", n, " rows exceeds the scratch"));
    }
    int64_t num_blocks = 0;
    for (const model::SequenceStep& s : batch.sequences) num_blocks += s.blocks.size();
    LLM_RETURN_IF_ERROR(EnsureStepBuffers(num_blocks));

    int32_t* h = meta_host_.as<int32_t>();
    std::copy(batch.tokens.begin(), batch.tokens.end(), h + meta_.tokens());
    std::copy(batch.positions.begin(), batch.positions.end(), h + meta_.positions());
    for (int64_t i = 0; i < n_out; ++i) {
      h[meta_.logit_rows() + i] = static_cast<int32_t>(batch.logit_rows[i]);
    }
    int64_t offset = 0;
    bool decode_only = static_cast<int64_t>(batch.sequences.size()) == n;
    for (const model::SequenceStep& s : batch.sequences) {
      decode_only &= s.num_new == 1;
      for (int64_t t = 0; t < s.num_new; ++t) {
        h[meta_.kv_pos() + s.first_row + t] = static_cast<int32_t>(s.start_pos + t);
        h[meta_.table_offset() + s.first_row + t] = static_cast<int32_t>(offset);
      }
      std::copy(s.blocks.begin(), s.blocks.end(), h + meta_.block_ids() + offset);
      offset += s.blocks.size();
    }
    LLM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(meta_dev_.get(), h, (meta_.block_ids() + offset) * sizeof(int32_t),
                        cudaMemcpyHostToDevice, stream_),
        "step input upload");

    batch_ = &batch;
    signature_ = 0;
    mode_ = StepGraphs::Mode::kEager;
    if (options_.graphs && decode_only && n <= options_.max_graph_batch) {
      mode_ = graphs_.Plan(n, n_out);
      if (mode_ == StepGraphs::Mode::kReplay) {
        if (absl::Status s = graphs_.Launch(stream_, n, n_out); !s.ok()) {
          cudaStreamSynchronize(stream_);  // the step inputs' copy reads meta_host_
          mode_ = StepGraphs::Mode::kEager;
          batch_ = nullptr;
          return s;
        }
      } else if (mode_ == StepGraphs::Mode::kCapture) {
        if (!graphs_.BeginCapture(stream_).ok()) mode_ = StepGraphs::Mode::kEager;
      }
    }
    return absl::OkStatus();
  }

  void Embed(const model::Weight& table, Tensor out) override {
    if (Skip("embed", &table, out.data, out.rows, out.cols)) return;
    const CudaWeight& w = AsCuda(table);
    if (w.quantized()) {
      Check(LaunchEmbedQuant(w.quant(), Meta(meta_.tokens()), out.rows, out.data, stream_),
            "embedding");
      return;
    }
    Check(LaunchEmbed(w.data(), w.type(), out.cols, Meta(meta_.tokens()), out.rows, out.data,
                      stream_),
          "embedding");
  }

  void RmsNorm(const Tensor& x, const model::Weight& weight, float eps, Tensor out) override {
    if (Skip("rms_norm", x.data, x.rows, x.cols, &weight, eps, out.data)) return;
    const CudaWeight& w = AsCuda(weight);
    if (w.type() != DType::kF32) return Fail("RMSNorm weight is not F32");
    Check(LaunchRmsNorm(x.data, static_cast<const float*>(w.data()), eps, x.rows, x.cols, out.data,
                        stream_),
          "RMSNorm");
  }

  void MatMul(const Tensor& x, std::span<const MatMulTarget> targets) override {
    bool skip = Skip("matmul", x.data, x.rows, x.cols);
    for (const MatMulTarget& t : targets) {
      skip = Skip("target", t.weight, t.out.data, t.out.cols, t.bias);
    }
    if (skip) return;
    bool converted[3] = {false, false, false};
    // x in `type` for cuBLAS (converted once per step's MatMul); nullptr
    // after a failure.
    auto input = [&](DType type) -> const void* {
      if (type == DType::kF32) return x.data;
      const int i = static_cast<int>(type);
      DeviceBuffer& scratch = act_[i];
      const size_t need = static_cast<size_t>(x.rows * x.cols) * 2;
      if (scratch.size() < need) {
        if (!GrowScratch(scratch, std::max<size_t>(need, max_elements_ * 2),
                         "converted activations")) {
          return nullptr;
        }
      }
      if (!converted[i]) {
        Check(LaunchConvert(x.data, x.rows * x.cols, type, scratch.get(), stream_),
              "activation conversion");
        converted[i] = true;
      }
      return scratch.get();
    };
    for (const MatMulTarget& t : targets) {
      const CudaWeight& w = AsCuda(*t.weight);
      const WeightView& v = w.view();
      if (w.quantized() && x.rows <= kMaxMatVecRows) {
        Check(LaunchMatVecQuant(w.quant(), x.data, x.rows, t.out.data, t.out.cols, stream_),
              StrCat("matrix-vector product with ", v.name));
      } else if (w.quantized()) {
        if (!QuantizedGemm(w, x, input(DType::kF16), t.out)) return;
      } else {
        const void* b = input(w.type());
        if (b == nullptr) return;
        Gemm(v.name, w.data(), w.type(), v.rows, v.cols, b, x.rows, x.cols, t.out.data, t.out.cols);
      }
      if (t.bias != nullptr) {
        const CudaWeight& bias = AsCuda(*t.bias);
        if (bias.type() != DType::kF32) return Fail("bias is not F32");
        Check(LaunchAddRowVector(t.out.data, static_cast<const float*>(bias.data()), x.rows,
                                 t.out.cols, stream_),
              "bias add");
      }
    }
  }

  void Rope(Tensor q, Tensor k, const RopeParams& p) override {
    if (Skip("rope", q.data, q.rows, q.cols, k.data, k.cols, p.head_dim, p.rope_dim, p.freq_base,
             p.freq_scale, p.neox, p.freq_factors, p.attn_factor, p.ext_factor, p.corr_low,
             p.corr_high)) {
      return;
    }
    const float* factors = nullptr;
    if (p.freq_factors != nullptr) {
      const CudaWeight& f = AsCuda(*p.freq_factors);
      if (f.type() != DType::kF32) return Fail("RoPE factors are not F32");
      factors = static_cast<const float*>(f.data());
    }
    // The same float expression as the CPU backend's, so the angles match.
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.rope_dim));
    Check(LaunchRope(q.data, q.cols, k.data, k.cols, q.rows, Meta(meta_.positions()),
                     static_cast<int32_t>(p.head_dim), static_cast<int32_t>(p.rope_dim),
                     theta_scale, p.freq_scale, p.neox, factors,
                     RopeScaling{p.attn_factor, p.ext_factor, p.corr_low, p.corr_high}, stream_),
          "RoPE");
  }

  void Attention(int64_t layer, const Tensor& q, const Tensor& k, const Tensor& v,
                 const AttentionParams& p, Tensor out) override {
    if (Skip("attention", layer, q.data, q.rows, k.data, v.data, p.head_count, p.head_count_kv,
             p.head_dim, p.scale, p.window, out.data)) {
      return;
    }
    const RowKv meta{Meta(meta_.kv_pos()), Meta(meta_.table_offset()), Meta(meta_.block_ids())};
    const KvCacheView cache{cache_.get(), kv_.layers, kv_.kv_dim, kv_.block_size,
                            kv_.k_type == model::KvType::kF16};
    Check(LaunchStoreKv(k.data, v.data, q.rows, meta, cache, layer, stream_), "KV store");
    const AttentionShape shape{
        static_cast<int32_t>(p.head_count), static_cast<int32_t>(p.head_count_kv),
        static_cast<int32_t>(p.head_dim), p.scale, static_cast<int32_t>(p.window)};
    Check(LaunchAttention(q.data, q.rows, meta, cache, layer, shape, out.data, stream_),
          "attention");
  }

  void SiluMul(const Tensor& gate, const Tensor& up, Tensor out) override {
    if (Skip("silu_mul", gate.data, gate.rows, gate.cols, up.data, out.data)) return;
    Check(LaunchSiluMul(gate.data, up.data, out.data, gate.rows * gate.cols, stream_), "SwiGLU");
  }

  void GeluMul(const Tensor& gate, const Tensor& up, Tensor out) override {
    if (Skip("gelu_mul", gate.data, gate.rows, gate.cols, up.data, out.data)) return;
    Check(LaunchGeluMul(gate.data, up.data, out.data, gate.rows * gate.cols, stream_), "GeGLU");
  }

  void Scale(Tensor x, float s) override {
    if (Skip("scale", x.data, x.rows, x.cols, s)) return;
    Check(LaunchScale(x.data, s, x.rows * x.cols, stream_), "scale");
  }

  void Add(Tensor x, const Tensor& y) override {
    if (Skip("add", x.data, x.rows, x.cols, y.data)) return;
    Check(LaunchAdd(x.data, y.data, x.rows * x.cols, stream_), "residual add");
  }

  void GatherLogitRows(const Tensor& x, Tensor out) override {
    if (Skip("gather", x.data, x.cols, out.data, out.rows)) return;
    Check(LaunchGatherRows(x.data, x.cols, Meta(meta_.logit_rows()), out.rows, out.data, stream_),
          "logit row gather");
  }

  absl::Status ReadLogits(const Tensor& logits, std::span<const LogitsSpec> specs,
                          std::vector<Logits>* out) override {
    if (batch_ == nullptr) {  // BeginStep failed (or was not called): no step to read
      return error_.ok() ? absl::FailedPreconditionError("ReadLogits without a step begun")
                         : error_;
    }
    const int64_t n = static_cast<int64_t>(batch_->tokens.size());
    const int64_t n_out = static_cast<int64_t>(batch_->logit_rows.size());
    batch_ = nullptr;
    if (mode_ == StepGraphs::Mode::kCapture) {
      if (error_.ok()) {
        absl::Status s = graphs_.EndCaptureAndLaunch(stream_, n, n_out, signature_);
        if (!s.ok()) {
          // This step is lost (its ops were captured, not run); the backend
          // stays usable and never captures this shape again.
          cudaGetLastError();
          cudaStreamSynchronize(stream_);
          mode_ = StepGraphs::Mode::kEager;
          return s;
        }
      } else {
        graphs_.AbortCapture(stream_, n, n_out);
      }
    } else if (mode_ == StepGraphs::Mode::kReplay && signature_ != graphs_.signature(n, n_out)) {
      // The model called other ops, or the same ops on other tensors, than
      // when the graph was captured: what ran is not what was asked for.
      error_ = absl::InternalError(
          "CUDA graph replay: the step's op calls differ from the captured graph's");
    }
    mode_ = StepGraphs::Mode::kEager;
    if (error_.ok()) error_ = Readout(logits, specs, out);
    if (!error_.ok()) cudaStreamSynchronize(stream_);
    return error_;
  }

 private:
  // In replay mode the op is already in the launched graph: count it and
  // skip. After an error: skip.
  //
  // Every op hashes its kind and arguments (tensor addresses, shapes,
  // weights) into the step's signature: a replayed graph must have been
  // captured from the same calls.
  template <typename... Args>
  bool Skip(const char* op, const Args&... args) {
    signature_ = absl::HashOf(signature_, std::string_view(op), args...);
    return mode_ == StepGraphs::Mode::kReplay || !error_.ok();
  }
  void Fail(absl::Status s) {
    if (error_.ok()) error_ = std::move(s);
  }
  void Fail(std::string_view what) { Fail(absl::InternalError(StrCat("CUDA backend: ", what))); }
  void Check(cudaError_t e, std::string_view what) {
    if (e != cudaSuccess) Fail(CudaStatus(e, what));
  }
  void CheckBlas(cublasStatus_t s, std::string_view what) {
    if (s != CUBLAS_STATUS_SUCCESS) Fail(CublasStatus(s, what));
  }

  // out[r][i] = w[i] . x[r] (weights [out x in] row-major as cuBLAS's
  // transposed operand; x [rows x in] and out [rows x out_cols], fp32 out).
  void Gemm(std::string_view name, const void* w, DType type, int64_t out_features,
            int64_t in_features, const void* x, int64_t rows, int64_t x_cols, float* out,
            int64_t out_cols) {
    const float one = 1.0f, zero = 0.0f;
    const cudaDataType_t t = CublasType(type);
    CheckBlas(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out_features),
                           static_cast<int>(rows), static_cast<int>(in_features), &one, w, t,
                           static_cast<int>(in_features), x, t, static_cast<int>(x_cols), &zero,
                           out, CUDA_R_32F, static_cast<int>(out_cols), CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT),
              StrCat("GEMM with ", name));
  }

  // A quantized weight times many rows: tiles of its rows dequantized to
  // fp16, each a cuBLAS GEMM into its columns of `out`. False after a
  // failure (recorded).
  bool QuantizedGemm(const CudaWeight& w, const Tensor& x, const void* x16, Tensor out) {
    if (x16 == nullptr) return false;
    const QuantMatrix q = w.quant();
    const size_t row_bytes = static_cast<size_t>(q.cols) * 2;
    if (dequant_.size() < row_bytes) {  // sized at upload (UploadWeight)
      Fail("no tile scratch for a quantized weight");
      return false;
    }
    const int64_t tile = std::max<int64_t>(1, static_cast<int64_t>(dequant_.size() / row_bytes));
    for (int64_t r0 = 0; r0 < q.rows; r0 += tile) {
      const int64_t n = std::min(tile, q.rows - r0);
      Check(LaunchDequantizeQuant(q, r0, n, dequant_.as<uint16_t>(), stream_),
            "weight tile dequantization");
      Gemm(w.view().name, dequant_.get(), DType::kF16, n, q.cols, x16, x.rows, x.cols,
           out.data + r0, out.cols);
    }
    return true;
  }

  // Grows scratch that kernels address: only eagerly (a captured graph holds
  // the old buffer's address; the graphs are dropped). False after a
  // failure (recorded).
  bool GrowScratch(DeviceBuffer& scratch, size_t bytes, std::string_view what) {
    if (mode_ != StepGraphs::Mode::kEager) {
      Fail(StrCat(what, ": scratch too small during a graph capture or replay"));
      return false;
    }
    graphs_.Clear();
    scratch = DeviceBuffer();  // free first: the device may not hold both
    auto buffer = DeviceBuffer::Allocate(bytes, what);
    if (!buffer.ok()) {
      Fail(buffer.status());
      return false;
    }
    scratch = *std::move(buffer);
    return true;
  }

  const int32_t* Meta(int64_t offset) const { return meta_dev_.as<int32_t>() + offset; }

  // A synchronous host-to-device copy ordered after the stream's work (a
  // plain cudaMemcpy runs on the legacy stream, which the backend's
  // non-blocking stream does not wait for, and may return before the DMA
  // from pageable memory is done).
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes, std::string_view what) {
    LLM_CUDA_RETURN_IF_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
    LLM_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_),
                             what);
    return CudaStatus(cudaStreamSynchronize(stream_), what);
  }

  absl::Status UploadDequantized(const WeightView& view, uint16_t* device) {
    const int64_t chunk_rows =
        std::max<int64_t>(1, static_cast<int64_t>(kUploadChunkElements) / view.cols);
    std::vector<float> row(view.cols);
    std::vector<uint16_t> halves(std::min(chunk_rows, view.rows) * view.cols);
    for (int64_t r0 = 0; r0 < view.rows; r0 += chunk_rows) {
      const int64_t rows = std::min(chunk_rows, view.rows - r0);
      for (int64_t r = 0; r < rows; ++r) {
        kernels::DequantizeRow(view.type, view.data + (r0 + r) * view.row_bytes, row.data(),
                               view.cols);
        uint16_t* h = halves.data() + r * view.cols;
        for (int64_t c = 0; c < view.cols; ++c) h[c] = FloatToHalf(row[c]);
      }
      LLM_RETURN_IF_ERROR(CopyToDevice(device + r0 * view.cols, halves.data(), rows * view.cols * 2,
                                       StrCat("upload of tensor ", view.name)));
    }
    return absl::OkStatus();
  }

  // Sizes the step's input buffers for max_rows_ rows and `blocks` block ids.
  // Growing them moves the buffers, which invalidates every captured graph.
  absl::Status EnsureStepBuffers(int64_t blocks) {
    if (meta_.rows == max_rows_ && blocks <= meta_.blocks) return absl::OkStatus();
    graphs_.Clear();
    LLM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    MetaLayout layout{max_rows_, std::max<int64_t>({blocks * 2, meta_.blocks, 1024})};
    const size_t bytes = layout.total() * sizeof(int32_t);
    // Activations converted for the GEMMs, for every input type a weight
    // needs, sized for the largest tensor now: allocated later, in the step
    // that first needs one, they would drop the graphs captured before.
    for (int i = 1; i < 3; ++i) {
      const size_t act_bytes = static_cast<size_t>(max_elements_) * 2;
      if (gemm_input_[i] && act_[i].size() < act_bytes) {
        act_[i] = DeviceBuffer();
        LLM_ASSIGN_OR_RETURN(act_[i], DeviceBuffer::Allocate(act_bytes, "converted activations"));
      }
    }
    LLM_ASSIGN_OR_RETURN(meta_dev_, DeviceBuffer::Allocate(bytes, "step inputs"));
    LLM_ASSIGN_OR_RETURN(meta_host_, PinnedBuffer::Allocate(bytes, "step inputs"));
    LLM_ASSIGN_OR_RETURN(
        plan_dev_, DeviceBuffer::Allocate(2 * max_rows_ * sizeof(int32_t), "logit readout plan"));
    LLM_ASSIGN_OR_RETURN(
        plan_host_, PinnedBuffer::Allocate(2 * max_rows_ * sizeof(int32_t), "logit readout plan"));
    LLM_ASSIGN_OR_RETURN(lse_dev_,
                         DeviceBuffer::Allocate(max_rows_ * sizeof(float), "log-sum-exp"));
    meta_ = layout;
    return absl::OkStatus();
  }

  // Grows `buffer` to at least `bytes` (contents are not kept).
  template <typename Memory>
  static absl::Status Reserve(Buffer<Memory>& buffer, size_t bytes, std::string_view what) {
    if (buffer.size() >= bytes) return absl::OkStatus();
    const size_t grown = std::max(bytes, buffer.size() * 2);
    buffer = Buffer<Memory>();  // free first: the device may not hold both
    LLM_ASSIGN_OR_RETURN(buffer, Buffer<Memory>::Allocate(grown, what));
    return absl::OkStatus();
  }

  // Logits to the host in each row's encoding: log-sum-exp of every row and
  // top-N candidates (N <= kMaxDeviceTopN) are computed on the device; full
  // rows are copied as fp32 or converted to fp16 first.
  absl::Status Readout(const Tensor& logits, std::span<const LogitsSpec> specs,
                       std::vector<Logits>* out) {
    const int64_t n = logits.rows, vocab = logits.cols;
    out->resize(n);
    for (Logits& l : *out) {  // keep the vectors' capacity from the last step
      l.values.clear();
      l.halves.clear();
      l.top_ids.clear();
      l.top_logits.clear();
    }
    if (n == 0) {
      return CudaStatus(cudaStreamSynchronize(stream_), "step");
    }
    // The rows of each kind (members, reused: no allocation per step).
    std::vector<int32_t>& top_rows = top_rows_;
    std::vector<int32_t>& half_rows = half_rows_;
    std::vector<int32_t>& full_rows = full_rows_;
    top_rows.clear();
    half_rows.clear();
    full_rows.clear();
    int64_t keep = 0;
    for (int64_t i = 0; i < n; ++i) {
      const LogitsSpec& spec = specs[i];
      if (spec.encoding == LogitsEncoding::kFloat16) {
        half_rows.push_back(static_cast<int32_t>(i));
      } else if (spec.encoding == LogitsEncoding::kTopN && spec.target < 0 &&
                 std::clamp<int64_t>(spec.top_n, 1, vocab) <= kMaxDeviceTopN) {
        top_rows.push_back(static_cast<int32_t>(i));
        keep = std::max<int64_t>(keep, std::clamp<int64_t>(spec.top_n, 1, vocab));
      } else {
        // fp32, top-N too large for the device, and rows that report a
        // target's logit (scored prompts: rare, so encoded on the host).
        full_rows.push_back(static_cast<int32_t>(i));
      }
    }
    const int64_t chunks = TopChunks(vocab);
    // Sections of the readback buffer, each 64-byte aligned.
    auto align = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
    const size_t lse_bytes = align(n * sizeof(float));
    const size_t top_bytes = align(top_rows.size() * chunks * keep * sizeof(TopCandidate));
    const size_t half_bytes = align(half_rows.size() * vocab * sizeof(uint16_t));
    const size_t full_bytes = full_rows.size() * vocab * sizeof(float);
    LLM_RETURN_IF_ERROR(Reserve(top_dev_, top_bytes, "top-N candidates"));
    LLM_RETURN_IF_ERROR(Reserve(half_dev_, half_bytes, "fp16 logits"));
    LLM_RETURN_IF_ERROR(
        Reserve(readback_, lse_bytes + top_bytes + half_bytes + full_bytes, "logits readback"));

    int32_t* plan = plan_host_.as<int32_t>();
    std::copy(top_rows.begin(), top_rows.end(), plan);
    std::copy(half_rows.begin(), half_rows.end(), plan + top_rows.size());
    const int32_t* plan_dev = plan_dev_.as<int32_t>();
    LLM_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(plan_dev_.get(), plan, (top_rows.size() + half_rows.size()) * 4,
                        cudaMemcpyHostToDevice, stream_),
        "readout plan upload");
    LLM_CUDA_RETURN_IF_ERROR(LaunchLogSumExp(logits.data, n, vocab, lse_dev_.as<float>(), stream_),
                             "log-sum-exp");
    LLM_CUDA_RETURN_IF_ERROR(LaunchTopCandidates(logits.data, vocab, plan_dev, top_rows.size(),
                                                 keep, top_dev_.as<TopCandidate>(), stream_),
                             "top-N candidates");
    LLM_CUDA_RETURN_IF_ERROR(LaunchRowsToHalf(logits.data, vocab, plan_dev + top_rows.size(),
                                              half_rows.size(), half_dev_.as<uint16_t>(), stream_),
                             "fp16 logits");

    uint8_t* host = readback_.as<uint8_t>();
    const float* lse = reinterpret_cast<const float*>(host);
    const TopCandidate* top = reinterpret_cast<const TopCandidate*>(host + lse_bytes);
    const uint16_t* halves = reinterpret_cast<const uint16_t*>(host + lse_bytes + top_bytes);
    const float* full = reinterpret_cast<const float*>(host + lse_bytes + top_bytes + half_bytes);
    auto d2h = [&](const void* dst, const void* src, size_t bytes) {
      return CudaStatus(
          cudaMemcpyAsync(const_cast<void*>(dst), src, bytes, cudaMemcpyDeviceToHost, stream_),
          "logits readback");
    };
    LLM_RETURN_IF_ERROR(d2h(lse, lse_dev_.get(), n * sizeof(float)));
    if (!top_rows.empty()) {
      LLM_RETURN_IF_ERROR(
          d2h(top, top_dev_.get(), top_rows.size() * chunks * keep * sizeof(TopCandidate)));
    }
    if (!half_rows.empty()) {
      LLM_RETURN_IF_ERROR(
          d2h(halves, half_dev_.get(), half_rows.size() * vocab * sizeof(uint16_t)));
    }
    for (size_t i = 0; i < full_rows.size(); ++i) {
      LLM_RETURN_IF_ERROR(
          d2h(full + i * vocab, logits.data + full_rows[i] * vocab, vocab * sizeof(float)));
    }
    LLM_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_), "step");

    for (size_t i = 0; i < full_rows.size(); ++i) {
      Logits& l = (*out)[full_rows[i]];
      const std::span<const float> row(full + i * vocab, vocab);
      if (specs[full_rows[i]].encoding == LogitsEncoding::kTopN) {
        model::EncodeLogits(row, specs[full_rows[i]], &l);
      } else {
        l.encoding = LogitsEncoding::kFloat32;
        l.values.assign(row.begin(), row.end());
      }
      l.log_sum_exp = lse[full_rows[i]];
    }
    for (size_t i = 0; i < half_rows.size(); ++i) {
      Logits& l = (*out)[half_rows[i]];
      l.encoding = LogitsEncoding::kFloat16;
      l.halves.assign(halves + i * vocab, halves + (i + 1) * vocab);
      l.log_sum_exp = lse[half_rows[i]];
    }
    std::vector<TopCandidate>& candidates = candidates_;
    for (size_t i = 0; i < top_rows.size(); ++i) {
      Logits& l = (*out)[top_rows[i]];
      const int64_t want = std::clamp<int64_t>(specs[top_rows[i]].top_n, 1, vocab);
      candidates.clear();
      const TopCandidate* c = top + i * chunks * keep;
      for (int64_t j = 0; j < chunks * keep; ++j) {
        if (c[j].id != kNoCandidate) candidates.push_back(c[j]);
      }
      const int64_t take = std::min<int64_t>(want, candidates.size());
      std::partial_sort(candidates.begin(), candidates.begin() + take, candidates.end(),
                        [](const TopCandidate& a, const TopCandidate& b) {
                          return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
                        });
      l.encoding = LogitsEncoding::kTopN;
      for (int64_t j = 0; j < take; ++j) {
        l.top_ids.push_back(candidates[j].id);
        l.top_logits.push_back(candidates[j].logit);
      }
      l.log_sum_exp = lse[top_rows[i]];
    }
    return absl::OkStatus();
  }

  const CudaBackendOptions options_;
  const std::string device_name_;
  const int sm_major_, sm_minor_, sm_count_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer workspace_;

  // Uploaded weights by host address (a tied LM head shares the embedding's).
  using UploadKey = std::tuple<const uint8_t*, TensorType, int64_t, int64_t>;
  absl::flat_hash_map<UploadKey, std::weak_ptr<DeviceBuffer>> uploaded_;
  std::vector<DeviceBuffer> tensors_;
  int64_t max_rows_ = 0, max_elements_ = 0;
  DeviceBuffer act_[3];                         // x converted to fp16 / bf16 for GEMMs, by DType
  bool gemm_input_[3] = {false, false, false};  // act_ types some weight's GEMM takes
  DeviceBuffer dequant_;                        // a quantized weight's rows as fp16 (QuantizedGemm)
  // Uploads of quantized matrices by type: kept quantized, dequantized.
  std::map<TensorType, int64_t> kept_quantized_, dequantized_;
  KvCacheShape kv_;
  DeviceBuffer cache_;

  MetaLayout meta_;
  DeviceBuffer meta_dev_;
  PinnedBuffer meta_host_;
  DeviceBuffer plan_dev_, lse_dev_, top_dev_, half_dev_;
  PinnedBuffer plan_host_, readback_;
  std::vector<int32_t> top_rows_, half_rows_, full_rows_;  // Readout's scratch
  std::vector<TopCandidate> candidates_;

  StepGraphs graphs_;
  StepGraphs::Mode mode_ = StepGraphs::Mode::kEager;
  size_t signature_ = 0;  // of the step's op calls so far (Skip)
  const StepBatch* batch_ = nullptr;
  // The first error of the step (sticky: a CUDA error may leave the context
  // unusable); returned by ReadLogits and every later BeginStep.
  absl::Status error_;
};

}  // namespace

absl::Status CudaDeviceStatus() {
  static const absl::Status* status = [] {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      return new absl::Status(absl::FailedPreconditionError(StrCat(
          "no usable CUDA device: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")")));
    }
    if (count == 0) return new absl::Status(absl::FailedPreconditionError("no CUDA device"));
    return new absl::Status();
  }();
  return *status;
}

CudaMemoryUse DeviceMemoryUse(const model::Backend& backend) {
  return static_cast<const CudaBackend&>(backend).MemoryUse();
}

absl::StatusOr<std::unique_ptr<model::Backend>> CreateCudaBackend(
    const CudaBackendOptions& options) {
  LLM_RETURN_IF_ERROR(CudaDeviceStatus());
  int count = 0;
  LLM_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (options.device < 0 || options.device >= count) {
    return absl::FailedPreconditionError(
        StrCat("CUDA device ", options.device, " does not exist (", count, " present)"));
  }
  cudaDeviceProp prop{};
  LLM_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, options.device),
                           "cudaGetDeviceProperties");
  auto backend = std::make_unique<CudaBackend>(options, prop);
  LLM_RETURN_IF_ERROR(backend->Init());
  return backend;
}

}  // namespace llm::cuda
