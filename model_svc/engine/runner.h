// The runner: the engine's only caller of the model. It turns a step plan
// (requests' chunks and guesses' speculative rows alike) into the flattened
// batch (tokens, positions, each sequence's block table, the rows whose
// logits come back), performs the plan's KV block copies and runs the
// forward.
//
// Threads: the step-loop thread only. It reads the planned requests and
// sessions without the engine's lock: only that thread changes a busy
// session, and every planned session is busy.
// Ownership: borrows the model, which must outlive it.
// Cost: Prepare is linear in the plan's tokens; the batch's scratch is kept
// from step to step.
#ifndef LLM_MODEL_SVC_ENGINE_RUNNER_H_
#define LLM_MODEL_SVC_ENGINE_RUNNER_H_

#include <vector>

#include "absl/status/status.h"
#include "model_svc/core/logits.h"
#include "model_svc/engine/scheduler.h"
#include "model_svc/model/llama_model.h"

namespace llm::engine {

class Runner {
 public:
  explicit Runner(model::LlamaModel* model) : model_(model) {}

  // Builds the batch of `plan` and performs its block copies.
  void Prepare(const StepPlan& plan);
  // Runs the prepared batch. `logits` receives the plan's logit rows in its
  // order (ScheduledChunk::logit_rows() for each chunk).
  absl::Status Forward(std::vector<model::Logits>* logits);

 private:
  model::LlamaModel* const model_;
  model::StepBatch batch_;
  std::vector<model::LogitsSpec> specs_;
};

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_RUNNER_H_
