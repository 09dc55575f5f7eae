#include "client/services.h"

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

}  // namespace llm::client
