#include "model_svc/engine/backend_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(bool, cuda_graphs, true, "CUDA backend: replay decode steps as CUDA graphs.");
ABSL_FLAG(bool, cuda_quantized_weights, true,
          "CUDA backend: keep Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K matrices quantized on the "
          "GPU (false: dequantize every quantized type to fp16 at load).");
ABSL_FLAG(bool, mmap_weights, false,
          "CPU backend: compute from the model file's memory mapping instead of a copy of "
          "the weights on huge pages (no extra memory; decode ~15% slower).");

namespace llm::engine {

void ApplyBackendFlags(LoadOptions* options) {
  options->cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  options->cuda_quantized_weights = absl::GetFlag(FLAGS_cuda_quantized_weights);
  options->mmap_weights = absl::GetFlag(FLAGS_mmap_weights);
}

}  // namespace llm::engine
