#include "model_svc/engine/runner.h"

#include <cstdint>

namespace llm::engine {

void Runner::Prepare(const StepPlan& plan) {
  batch_.tokens.clear();
  batch_.positions.clear();
  batch_.sequences.clear();
  batch_.logit_rows.clear();
  specs_.clear();
  for (const ScheduledChunk& sc : plan.chunks) {
    model::SequenceStep seq;
    seq.first_row = static_cast<int64_t>(batch_.tokens.size());
    seq.num_new = sc.chunk;
    seq.start_pos = sc.session->kv.num_tokens();
    seq.blocks = sc.session->kv.blocks();
    if (sc.guess) {  // one token, its logits
      batch_.tokens.push_back(sc.session->guess->token);
      batch_.positions.push_back(static_cast<int32_t>(seq.start_pos));
      batch_.logit_rows.push_back(seq.first_row);
      specs_.push_back(sc.session->guess->spec);
      batch_.sequences.push_back(seq);
      continue;
    }
    const Request& r = *sc.session->request;
    for (int64_t i = 0; i < sc.chunk; ++i) {
      batch_.tokens.push_back(r.append.tokens[r.offset + i]);
      batch_.positions.push_back(static_cast<int32_t>(seq.start_pos + i));
    }
    if (r.append.every_row()) {
      for (int64_t i = 0; i < sc.chunk; ++i) {
        batch_.logit_rows.push_back(seq.first_row + i);
        specs_.push_back(r.append.row_spec(r.offset + i));
      }
    } else if (sc.chunk == r.remaining()) {
      batch_.logit_rows.push_back(seq.first_row + sc.chunk - 1);
      specs_.push_back(r.append.row_spec(static_cast<int64_t>(r.append.tokens.size()) - 1));
    }
    batch_.sequences.push_back(seq);
  }
  for (const kv::BlockCopy& copy : plan.copies) model_->backend().CopyKvBlock(copy.src, copy.dst);
}

absl::Status Runner::Forward(std::vector<model::Logits>* logits) {
  return model_->Forward(batch_, specs_, logits);
}

}  // namespace llm::engine
