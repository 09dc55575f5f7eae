// Logits of one position, in the encoding a request asked for.
//
// Full float32 is exact and large (4 bytes x vocabulary); float16 halves it;
// top-N sends only the N largest logits plus the log-sum-exp over the whole
// vocabulary, so that p(id) = exp(logit - log_sum_exp) stays exact for them.
//
// A token mask (LogitsSpec::mask, structured generation) is applied first:
// masked logits become -infinity, so the full encodings carry -inf there,
// top-N picks allowed ids only and log_sum_exp is over the allowed ones,
// exact over the allowed set in every encoding.
#ifndef LLM_MODEL_SVC_CORE_LOGITS_H_
#define LLM_MODEL_SVC_CORE_LOGITS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/token_mask.h"

namespace llm::model {

enum class LogitsEncoding { kFloat32, kFloat16, kTopN };

struct LogitsSpec {
  LogitsEncoding encoding = LogitsEncoding::kFloat32;
  int32_t top_n = 0;  // kTopN only: 1..vocab (0: none, only log_sum_exp and the target)
  // >= 0: also report this id's logit (Logits::target_logit), e.g. the token
  // that follows the position in a scored text; -1: none.
  int32_t target = -1;
  // Non-null: only these tokens are allowed (see the top); borrowed, of the
  // row's vocabulary, alive until the row is encoded. Null: every token.
  const TokenMask* mask = nullptr;
};

struct Logits {
  LogitsEncoding encoding = LogitsEncoding::kFloat32;
  std::vector<float> values;      // kFloat32: one per vocabulary id
  std::vector<uint16_t> halves;   // kFloat16: IEEE half bits, one per id
  std::vector<int32_t> top_ids;   // kTopN: ids by descending logit (ties: lower id first),
                                  // allowed ones only (fewer than top_n if fewer are allowed)
  std::vector<float> top_logits;  // kTopN: their logits
  float log_sum_exp = 0.0f;       // log(sum(exp(logit))) over the whole vocabulary (the allowed
                                  // ids, with a mask); always set
  float target_logit = 0.0f;      // the logit of LogitsSpec::target, when it is >= 0
};

// Encodes one row of float logits on the host. Cost: O(vocab) (top-N uses a
// partial selection, O(vocab + N log N)). With a mask, one more pass: the
// row is masked into a scratch row of the calling thread's (vocab floats,
// kept for the thread's life) and encoded from there.
void EncodeLogits(std::span<const float> row, const LogitsSpec& spec, Logits* out);
// EncodeLogits of a row the caller may overwrite: a mask is applied in
// place, without the scratch.
void EncodeLogitsInPlace(std::span<float> row, const LogitsSpec& spec, Logits* out);

// out[i] = row[i] where `mask` allows token i, else -infinity, for i <
// row.size() (== out.size(); ids past the mask's vocabulary are masked);
// `out` may be `row`.
// Cost: one pass (kernels::MaskF32: a blend of 8 or 16 lanes at a time).
void ApplyTokenMask(const TokenMask& mask, std::span<const float> row, std::span<float> out);

// The id of the largest logit (ties: the lowest id), the token a greedy
// sampler picks from these logits as sent (float16 ones compared as halves;
// top-N: the first id). -1 when there is none. Cost: O(vocab) for the full
// encodings, O(1) for top-N.
int32_t Argmax(const Logits& logits);

// log(sum(exp(x))), computed stably in double.
float LogSumExp(std::span<const float> row);

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_CORE_LOGITS_H_
