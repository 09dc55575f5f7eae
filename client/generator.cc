#include "client/generator.h"

#include "common/grpc/security.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::client {

Generator::~Generator() = default;

absl::StatusOr<std::unique_ptr<Generator>> Generator::Connect(const ClientOptions& options) {
  std::unique_ptr<Generator> g(new Generator(options));
  LLM_RETURN_IF_ERROR(g->Init());
  return g;
}

absl::Status Generator::Init() {
  LLM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                       MakeChannelCredentials(options_.tls));
  tokenizer_ = std::make_unique<TokenizerClient>(options_, creds);
  LLM_ASSIGN_OR_RETURN(model_, ModelClient::Create(options_, creds));
  LLM_RETURN_IF_ERROR(tokenizer_->Connect());
  LLM_RETURN_IF_ERROR(model_->Connect());
  if (tokenizer_->info().vocab_size() > model_->info().vocab_size()) {
    return absl::FailedPreconditionError(
        StrCat("the tokenizer at ", options_.tokenizer_address, " has ",
               tokenizer_->info().vocab_size(), " tokens but the model at ", options_.model_address,
               " only ", model_->info().vocab_size(), ": not the same vocabulary"));
  }
  if (options_.detokenize == ClientOptions::Detokenize::kCachedDecode) {
    tokenizer_->PrefetchTokenBytes();
  }
  LoopOptions loop;
  loop.logits = options_.logits;
  loop.lookahead = options_.lookahead;
  loop_ = std::make_unique<GenerateLoop>(*tokenizer_, *model_, loop);
  return absl::OkStatus();
}

ModelTemplateInfo Generator::template_info() const {
  const v1::InfoResponse& info = tokenizer_info();
  ModelTemplateInfo model;
  model.chat_template = info.chat_template();
  model.architecture = model_info().architecture();
  for (const auto& special : info.special_tokens()) {
    model.special_tokens.push_back(special.text());
    if (info.has_bos_id() && special.id() == info.bos_id()) model.bos_token = special.text();
    if (info.has_eos_id() && special.id() == info.eos_id()) model.eos_token = special.text();
  }
  return model;
}

absl::StatusOr<PrefillResult> Generator::Score(std::span<const int32_t> tokens, int32_t top_n) {
  if (top_n < 0 || top_n > kMaxTopLogprobs) {
    return absl::InvalidArgumentError(
        StrCat("top_n must be in [0, ", kMaxTopLogprobs, "], got ", top_n));
  }
  StepOptions options;
  options.logits.set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
  options.logits.set_top_n(1);
  options.prompt_logprobs = top_n;
  Session session;
  const std::atomic<bool> never{false};
  int32_t rebuilds = 0;
  absl::StatusOr<PrefillResult> result =
      model_->Prefill(session, tokens, options, never, &rebuilds);
  if (!session.id.empty()) model_->Release(session).IgnoreError();
  return result;
}

}  // namespace llm::client
