// Services::Connect and Generator::Connect: the services over gRPC
// (client/transport/).
#include "client/generator.h"
#include "client/services.h"
#include "client/transport/model_client.h"
#include "client/transport/tokenizer_client.h"
#include "common/grpc/security.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::client {

absl::StatusOr<std::shared_ptr<Services>> Services::Connect(const ClientOptions& options) {
  LLM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ChannelCredentials> creds,
                       MakeChannelCredentials(options.tls));
  auto tokenizer = std::make_unique<TokenizerClient>(options, creds);
  LLM_ASSIGN_OR_RETURN(std::unique_ptr<ModelClient> model, ModelClient::Create(options, creds));
  LLM_RETURN_IF_ERROR(tokenizer->Connect());
  LLM_RETURN_IF_ERROR(model->Connect());
  if (tokenizer->info().vocab_size() > model->info().vocab_size()) {
    return absl::FailedPreconditionError(
        StrCat("the tokenizer at ", options.tokenizer_address, " has ",
               tokenizer->info().vocab_size(), " tokens but the model at ", options.model_address,
               " only ", model->info().vocab_size(), ": not the same vocabulary"));
  }
  if (options.detokenize == ClientOptions::Detokenize::kCachedDecode) {
    tokenizer->PrefetchTokenBytes();
  }
  TokenizerClient* grpc_tokenizer = tokenizer.get();
  ModelClient* grpc_model = model.get();
  v1::InfoResponse tokenizer_info = tokenizer->info();
  v1::ModelInfo model_info = model->info();
  auto services = std::make_shared<Services>(options, std::move(tokenizer), std::move(model),
                                             std::move(tokenizer_info), std::move(model_info));
  services->grpc_tokenizer_ = grpc_tokenizer;
  services->grpc_model_ = grpc_model;
  return services;
}

absl::StatusOr<std::unique_ptr<Generator>> Generator::Connect(const ClientOptions& options) {
  LLM_ASSIGN_OR_RETURN(std::shared_ptr<Services> services, Services::Connect(options));
  return std::make_unique<Generator>(std::move(services));
}

}  // namespace llm::client
