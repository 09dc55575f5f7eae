// Test support: a deliberately simple reference forward pass of a GGUF
// model, to check the real one (model/llama_model.cc over a backend) against.
//
// Plain loops over one token at a time: every weight is dequantized to fp32
// with kernels::DequantizeRow, activations and sums are fp64, attention recomputes
// every position's keys and values (no KV cache, no batching, no paging). It
// reads the hyperparameters from the metadata itself rather than through
// ModelConfig. RoPE is the adjacent-pair ("normal", GGUF llama) form: pairs
// (2i, 2i+1) of the first rope_dim dimensions of each head rotate by
// pos * freq_scale * base^(-2i / rope_dim).
//
// With `q8_activations`, the input of every product with a quantized weight
// is first rounded the way the CPU backend quantizes activations (blocks of
// 32: d = max|x| / 127, q = round-half-even(x / d), x' = d * q), so that the
// remaining difference to the real forward is summation order alone; this
// allows a much tighter tolerance than the exact reference.
//
// Cost: O(tokens * parameters) plus O(tokens^2 * d_model); for small models.
#ifndef LLM_MODEL_SVC_TESTING_REFERENCE_FORWARD_H_
#define LLM_MODEL_SVC_TESTING_REFERENCE_FORWARD_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "common/gguf/gguf.h"

namespace llm::model::testing {

struct ReferenceOptions {
  bool q8_activations = false;
  // Optional: sees one position's intermediate vector at a time, named as
  // LlamaModel::TensorObserver names them ("attn_norm", "Qcur", "Kcur",
  // "Vcur", "kqv_out", "attn_out", "attn_post_norm", "ffn_inp", "ffn_norm",
  // "ffn_gate", "ffn_up", "ffn_act", "ffn_out", "ffn_post_norm", "l_out",
  // "result_norm" with layer -1). The span is valid during the call only.
  std::function<void(std::string_view name, int64_t layer, int64_t position,
                     std::span<const double> values)>
      observer;
};

// The logits (vocab floats) of every position of `tokens`, positions 0..n-1.
// `file` must hold a valid llama model (e.g. from RandomModelGguf) and every
// token must be < vocab; otherwise this prints the problem and aborts.
std::vector<std::vector<float>> ReferenceLogits(const gguf::File& file,
                                                std::span<const int32_t> tokens,
                                                const ReferenceOptions& options = {});

}  // namespace llm::model::testing

#endif  // LLM_MODEL_SVC_TESTING_REFERENCE_FORWARD_H_
