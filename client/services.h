// The two services as one process shares them: the tokenizer and the model
// (its replicas), both services' Info, and the vocabulary's token bytes.
// A process makes one Services and runs any number of generations over it
// (client/generator.h), each light: its own loop, sampler and cancel flag.
//
//   auto services = Services::Connect(options);        // channels, Infos, token bytes
//   Generator g(*services);                             // per request
//   auto ids = g.Encode(prompt, {.allow_special = true});
//   auto result = g.Generate(session, *ids, params, on_token);
//
// Connect reaches the services over gRPC (client/transport/); the
// constructor takes any ports (in-memory ones for tests and fuzzers), so
// code above the client library never depends on gRPC.
//
// Threads: thread-safe; the ports it holds are (ports.h). Ownership: owns
// the ports; generations borrow it (a shared_ptr keeps it alive).
// Cost: Connect is both Infos plus the vocabulary's bytes (a few Decode
// calls, ~10 ms for 49k tokens on loopback); nothing per generation.
#ifndef LLM_CLIENT_SERVICES_H_
#define LLM_CLIENT_SERVICES_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/constrain/constraint.h"
#include "client/generate/ports.h"
#include "client/generate/template_choice.h"
#include "client/transport/client_options.h"
#include "llm/v1/model.pb.h"
#include "llm/v1/tokenizer.pb.h"

namespace llm::client {

class ModelClient;
class TokenizerClient;

class Services {
 public:
  // Opens channels to both services and reads their Info; with
  // kCachedDecode, then fetches the vocabulary's token bytes (best effort:
  // a failure there only leaves them to be fetched per id). Fails with
  // InvalidArgument for a malformed model address or TLS files (before any
  // call), UNAVAILABLE naming the address of a service that cannot be
  // reached; a server that answers UNAVAILABLE on a live connection (still
  // loading) is waited for up to ready_timeout (on_wait reports the wait),
  // then DEADLINE_EXCEEDED ("... is still loading after 2m"). UNIMPLEMENTED
  // when an address serves the other service ("serves the tokenizer, not
  // the model"). FailedPrecondition when the vocabularies disagree
  // (tokenizer vocab_size > model vocab_size). Defined in services_grpc.cc
  // (library llm_client).
  static absl::StatusOr<std::shared_ptr<Services>> Connect(const ClientOptions& options);

  // Over given ports and Infos (tests, fuzzers). The ports must be
  // thread-safe if generations run on several threads.
  Services(ClientOptions options, std::unique_ptr<TokenizerPort> tokenizer,
           std::unique_ptr<ModelPort> model, v1::InfoResponse tokenizer_info,
           v1::ModelInfo model_info);
  Services(const Services&) = delete;
  Services& operator=(const Services&) = delete;
  ~Services();

  const ClientOptions& options() const { return options_; }
  const v1::InfoResponse& tokenizer_info() const { return tokenizer_info_; }
  const v1::ModelInfo& model_info() const { return model_info_; }
  // What the chat template choice (template_choice.h) needs of both Infos:
  // the GGUF's template, the architecture and the special tokens.
  ModelTemplateInfo template_info() const;

  TokenizerPort& tokenizer() const { return *tokenizer_; }
  ModelPort& model() const { return *model_; }

  // Structured generation: `spec` compiled for the model's vocabulary
  // (client/constrain/constraint.h), for GenerateParams::constraint. The
  // compiler is made on first use (the vocabulary's bytes from the token-bytes
  // cache, its control tokens from the tokenizer's Info: about 0.1 s at 262k
  // tokens) and shared, with its cache of compiled constraints: a spec seen
  // before takes microseconds. InvalidArgument names what a spec breaks or
  // what is not supported.
  absl::StatusOr<std::shared_ptr<const constrain::Constraint>> CompileConstraint(
      const constrain::Spec& spec);

  // The gRPC clients behind the ports (for tests and tools: the replicas,
  // their sessions, the token-bytes cache); null over other ports.
  ModelClient* grpc_model() const { return grpc_model_; }
  TokenizerClient* grpc_tokenizer() const { return grpc_tokenizer_; }

 private:
  const ClientOptions options_;
  const std::unique_ptr<TokenizerPort> tokenizer_;
  const std::unique_ptr<ModelPort> model_;
  const v1::InfoResponse tokenizer_info_;
  const v1::ModelInfo model_info_;
  ModelClient* grpc_model_ = nullptr;
  TokenizerClient* grpc_tokenizer_ = nullptr;
  absl::Mutex compiler_mu_;
  std::unique_ptr<constrain::Compiler> compiler_ ABSL_GUARDED_BY(compiler_mu_);
};

}  // namespace llm::client

#endif  // LLM_CLIENT_SERVICES_H_
