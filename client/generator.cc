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

}  // namespace llm::client
