#include "client/services.h"

#include <algorithm>
#include <span>
#include <string>
#include <utility>

namespace llm::client {

Services::Services(ClientOptions options, std::unique_ptr<TokenizerPort> tokenizer,
                   std::unique_ptr<ModelPort> model, v1::InfoResponse tokenizer_info,
                   v1::ModelInfo model_info)
    : options_(std::move(options)),
      tokenizer_(std::move(tokenizer)),
      model_(std::move(model)),
      tokenizer_info_(std::move(tokenizer_info)),
      model_info_(std::move(model_info)) {}

Services::~Services() = default;

ModelTemplateInfo Services::template_info() const {
  const v1::InfoResponse& info = tokenizer_info_;
  ModelTemplateInfo model;
  model.chat_template = info.chat_template();
  model.architecture = model_info_.architecture();
  for (const auto& special : info.special_tokens()) {
    model.special_tokens.push_back(special.text());
    if (info.has_bos_id() && special.id() == info.bos_id()) model.bos_token = special.text();
    if (info.has_eos_id() && special.id() == info.eos_id()) model.eos_token = special.text();
  }
  return model;
}

absl::StatusOr<std::shared_ptr<const constrain::Constraint>> Services::CompileConstraint(
    const constrain::Spec& spec) {
  constrain::Compiler* compiler;
  {
    absl::MutexLock lock(&compiler_mu_);
    if (compiler_ == nullptr) {
      constrain::Vocabulary v;
      const int64_t tokens = tokenizer_info_.vocab_size();
      v.token_bytes.reserve(static_cast<size_t>(tokens));
      for (int64_t id = 0; id < tokens; ++id) {
        absl::StatusOr<std::string> bytes = tokenizer_->TokenBytes(static_cast<int32_t>(id));
        v.token_bytes.push_back(bytes.ok() ? *std::move(bytes) : std::string());  // a gap
      }
      const std::span<const int32_t> ends = tokenizer_->end_ids();
      v.end_ids.assign(ends.begin(), ends.end());
      // Control tokens (<|im_start|>, ...) are markup, never text a grammar
      // spells. User-defined ones (Qwen's <tool_call>) keep their text: a
      // tool call's structural tag starts with them.
      for (const auto& special : tokenizer_info_.special_tokens()) {
        const int32_t id = static_cast<int32_t>(special.id());
        if (special.kind() == "control" &&
            std::find(v.end_ids.begin(), v.end_ids.end(), id) == v.end_ids.end()) {
          v.special_ids.push_back(id);
        }
      }
      v.size = static_cast<int32_t>(std::max<int64_t>(model_info_.vocab_size(), tokens));
      absl::StatusOr<std::unique_ptr<constrain::Compiler>> made = constrain::Compiler::Create(v);
      if (!made.ok()) return made.status();
      compiler_ = *std::move(made);
    }
    compiler = compiler_.get();
  }
  return compiler->Compile(spec);  // thread-safe, with its own cache
}

}  // namespace llm::client
