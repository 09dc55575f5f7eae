// What one forward step computes (core/backend.h, Backend::BeginStep): the
// new tokens of several sequences, flattened into rows, and which rows'
// logits are wanted. Built by the engine's runner, read by the model and the
// backends.
#ifndef LLM_MODEL_SVC_CORE_STEP_BATCH_H_
#define LLM_MODEL_SVC_CORE_STEP_BATCH_H_

#include <cstdint>
#include <span>
#include <vector>

namespace llm::model {

// One sequence's part of a step: `num_new` tokens at rows [first_row,
// first_row + num_new) of the step's activations, at positions [start_pos,
// start_pos + num_new). Its block table covers positions [0, start_pos +
// num_new): position p lives in block blocks[p / block_size], slot
// p % block_size. Blocks written by this step must not be shared.
struct SequenceStep {
  int64_t first_row = 0;
  int64_t num_new = 0;
  int64_t start_pos = 0;
  std::span<const int32_t> blocks;
};

// Everything one forward step computes: the new tokens of several sequences,
// flattened, and which rows' logits are wanted.
struct StepBatch {
  std::vector<int32_t> tokens;     // one per row
  std::vector<int32_t> positions;  // one per row
  std::vector<SequenceStep> sequences;
  std::vector<int64_t> logit_rows;  // rows whose logits the step returns, in this order
};

}  // namespace llm::model

#endif  // LLM_MODEL_SVC_CORE_STEP_BATCH_H_
