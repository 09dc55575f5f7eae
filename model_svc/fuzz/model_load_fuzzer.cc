// libFuzzer target for model loading: arbitrary bytes through the GGUF
// reader, ModelConfig::FromGguf, LocateWeights and LlamaModel::Load on the
// CPU backend; a file that loads then runs one forward step of two tokens.
//
// Every dimension the loader allocates for is tied to a tensor whose data
// lies inside the input, so allocations stay proportional to the input.
// The backend computes from the input's bytes (mmap_weights) rather than
// copying every weight onto fresh huge pages: the copy is a memcpy, and
// zeroing and faulting in those pages took ~35% of each execution.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/gguf/gguf.h"
#include "model_svc/backend/cpu/cpu_backend.h"
#include "model_svc/model/llama_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = llm::gguf::File::FromBytes(std::string(reinterpret_cast<const char*>(data), size));
  if (!file.ok()) return 0;
  std::shared_ptr<const llm::gguf::File> shared(std::move(*file));
  llm::model::ModelOptions options;
  options.max_step_tokens = 2;
  options.max_logit_rows = 2;
  options.kv_blocks = 1;
  options.kv_block_size = 4;
  llm::cpu::CpuBackendOptions cpu;
  cpu.threads = 1;
  cpu.mmap_weights = true;  // `shared` outlives the model and its backend
  auto model = llm::model::LlamaModel::Load(shared, llm::cpu::CreateCpuBackend(cpu), options);
  if (!model.ok()) return 0;
  const int64_t vocab = (*model)->config().vocab_size;
  llm::model::StepBatch batch;
  batch.tokens = {0, static_cast<int32_t>(vocab - 1)};
  batch.positions = {0, 1};
  const std::vector<int32_t> blocks = {0};
  batch.sequences.push_back({0, 2, 0, blocks});
  batch.logit_rows = {1};
  const llm::model::LogitsSpec spec[] = {{llm::model::LogitsEncoding::kTopN, 1}};
  std::vector<llm::model::Logits> out;
  (void)(*model)->Forward(batch, spec, &out);
  return 0;
}
