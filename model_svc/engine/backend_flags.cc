#include "model_svc/engine/backend_flags.h"

#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(bool, cuda_graphs, true, "CUDA backend: replay decode steps as CUDA graphs.");
ABSL_FLAG(bool, cuda_quantized_weights, true,
          "CUDA backend: keep Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K matrices quantized on the "
          "GPU (false: dequantize every quantized type to fp16 at load).");
ABSL_FLAG(bool, mmap_weights, false,
          "CPU backend: compute from the model file's memory mapping instead of a copy of "
          "the weights on huge pages (no extra memory; decode ~15% slower).");
ABSL_FLAG(std::string, kv_cache_type, "f16",
          "KV cache element type of keys and values: f16 (half the memory; llama.cpp's "
          "default), f32, or q8_0 (GGUF's Q8_0 blocks, 1.0625 bytes a value: ~1.88x the "
          "positions of f16 in the same memory; head dimension a multiple of 32; CPU only).");
ABSL_FLAG(std::string, kv_cache_type_k, "",
          "The keys' KV cache type when not --kv_cache_type's: f16 or q8_0 (llama.cpp's -ctk).");
ABSL_FLAG(std::string, kv_cache_type_v, "",
          "The values' KV cache type when not --kv_cache_type's: f16 or q8_0 (llama.cpp's -ctv).");

namespace llm::engine {

void ApplyBackendFlags(LoadOptions* options) {
  options->cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  options->cuda_quantized_weights = absl::GetFlag(FLAGS_cuda_quantized_weights);
  options->mmap_weights = absl::GetFlag(FLAGS_mmap_weights);
  options->kv_cache_type = absl::GetFlag(FLAGS_kv_cache_type);
  options->kv_cache_type_k = absl::GetFlag(FLAGS_kv_cache_type_k);
  options->kv_cache_type_v = absl::GetFlag(FLAGS_kv_cache_type_v);
}

}  // namespace llm::engine
