// One generation at a time over the process's shared services (services.h):
// the generation loop (generate/) over the tokenizer and model ports.
//
//   Encode (tokenizer) -> Prefill (model: a new session, or append to one)
//   -> sample (sampler, here) -> DecodeStream (model: one bidi stream per
//   generation, one request per token) -> incremental detokenize (complete
//   UTF-8 only; by default over the services' cache of token bytes, filled
//   with the whole vocabulary at Connect, generate/detokenizer.h, or through
//   the tokenizer's DecodeStream) -> stop strings (held back across tokens)
//   -> the caller's callback, one call per token.
//
//   auto services = Services::Connect(options);         // once per process
//   Generator gen(*services);                            // per request: cheap
//   Session session;                                     // a new model session
//   auto ids = gen.Encode(prompt, {.allow_special = true});
//   auto result = gen.Generate(session, *ids, params, on_token);
//   gen.Release(session);
//
// Where each behaviour lives:
//   - generate/generate_loop.h: stops (EOS / EOT, stop strings that never
//     reach the output, max_tokens, the session full: "context", Cancel()),
//     pipelining (the sampled token is sent before it is detokenized, so the
//     session holds exactly the tokens fed), lost sessions during decoding
//     rebuilt by re-prefilling the history, Cancel() (async-signal-safe).
//   - transport/model_client.h: replicas (model_pool.h: session-affine
//     calls, new sessions round robin, mark-down), lost sessions at a
//     Prefill rebuilt and new sessions retried with backoff for
//     reconnect_timeout, deadlines per unary call and per stream step, a
//     Prefill cancelled at once (TryCancel) leaving the session unsynced,
//     streams closed cleanly.
//   - transport/tokenizer_client.h: Encode / Decode, the vocabulary's bytes
//     prefetched at Connect, or the tokenizer's DecodeStream.
//
// Threads: a Generator runs one generation at a time (calls from several
// threads must be serialized); Cancel() may be called from any thread or a
// signal handler. Any number of Generators may run at once over one
// Services. Ownership: shares the services (a shared_ptr), owns its loop.
// Cost: making one is a few allocations; no call.
#ifndef LLM_CLIENT_GENERATOR_H_
#define LLM_CLIENT_GENERATOR_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/generate/generate_loop.h"
#include "client/generate/params.h"
#include "client/generate/ports.h"
#include "client/generate/result.h"
#include "client/generate/template_choice.h"
#include "client/services.h"
#include "client/transport/client_options.h"

namespace llm::client {

class Generator {
 public:
  // A generator over `services`, which it keeps alive.
  explicit Generator(std::shared_ptr<Services> services);
  // Services::Connect, then a generator over them (one-generator
  // programs: the llm CLI, tests). Defined in services_grpc.cc (library
  // llm_client).
  static absl::StatusOr<std::unique_ptr<Generator>> Connect(const ClientOptions& options);

  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ~Generator();

  Services& services() const { return *services_; }
  const std::shared_ptr<Services>& shared_services() const { return services_; }
  const ClientOptions& options() const { return services_->options(); }
  const v1::InfoResponse& tokenizer_info() const { return services_->tokenizer_info(); }
  const v1::ModelInfo& model_info() const { return services_->model_info(); }
  ModelTemplateInfo template_info() const { return services_->template_info(); }

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              const EncodeOptions& options = {}) {
    return services_->tokenizer().Encode(text, options);
  }
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids) {
    return services_->tokenizer().Decode(ids);
  }
  // The bytes of one token (cached; see kCachedDecode).
  absl::StatusOr<std::string> TokenBytes(int32_t id) {
    return services_->tokenizer().TokenBytes(id);
  }

  // Scores `tokens` (at least two) in a new model session, released
  // afterwards: the logprob of each token after the first with `top_n`
  // alternatives (PrefillResult::prompt_logprobs, 0..kMaxTopLogprobs), and
  // the logits after the last. No generation.
  absl::StatusOr<PrefillResult> Score(std::span<const int32_t> tokens, int32_t top_n);

  // GenerateLoop::Generate.
  absl::StatusOr<GenerateResult> Generate(Session& session, std::span<const int32_t> new_tokens,
                                          const GenerateParams& params,
                                          const TokenCallback& on_token) {
    return loop_.Generate(session, new_tokens, params, on_token);
  }
  // Ends the model session (best effort: a session that is gone is fine) and
  // clears `session`.
  absl::Status Release(Session& session) { return services_->model().Release(session); }
  // ModelPort::Truncate: keeps the first n tokens (drops pending ones).
  absl::Status Truncate(Session& session, int64_t n) {
    return services_->model().Truncate(session, n);
  }

  // The loop, for ChatSession and other users of the ports.
  GenerateLoop& loop() { return loop_; }

  // GenerateLoop::Cancel: async-signal-safe.
  void Cancel() { loop_.Cancel(); }
  void ClearCancel() { loop_.ClearCancel(); }
  bool cancel_requested() const { return loop_.cancel_requested(); }

 private:
  const std::shared_ptr<Services> services_;
  GenerateLoop loop_;  // over the services' ports
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATOR_H_
