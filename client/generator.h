// The client library in one object: the generation loop (generate/) over
// the tokenizer and model services reached with gRPC (transport/).
//
//   Encode (tokenizer) -> Prefill (model: a new session, or append to one)
//   -> sample (sampler, here) -> DecodeStream (model: one bidi stream per
//   generation, one request per token) -> incremental detokenize (complete
//   UTF-8 only; by default over a cache of token bytes that Connect fills
//   with the whole vocabulary, generate/detokenizer.h, or through the
//   tokenizer's DecodeStream) -> stop strings (held back across tokens) ->
//   the caller's callback, one call per token.
//
//   auto gen = Generator::Connect(options);            // both services' Info
//   Session session;                                    // a new model session
//   auto ids = (*gen)->Encode(prompt, {.allow_special = true});
//   auto result = (*gen)->Generate(session, *ids, params, on_token);
//   (*gen)->Release(session);
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
// signal handler. Ownership: owns both clients and the loop.
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
#include "client/transport/client_options.h"
#include "client/transport/model_client.h"
#include "client/transport/tokenizer_client.h"

namespace llm::client {

class Generator {
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
  // (tokenizer vocab_size > model vocab_size).
  static absl::StatusOr<std::unique_ptr<Generator>> Connect(const ClientOptions& options);

  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ~Generator();

  const ClientOptions& options() const { return options_; }
  const v1::InfoResponse& tokenizer_info() const { return tokenizer_->info(); }
  const v1::ModelInfo& model_info() const { return model_->info(); }
  // What the chat template choice (template_choice.h) needs of both Infos:
  // the GGUF's template, the architecture and the special tokens.
  ModelTemplateInfo template_info() const;

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              const EncodeOptions& options = {}) {
    return tokenizer_->Encode(text, options);
  }
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids) {
    return tokenizer_->Decode(ids);
  }
  // The bytes of one token (cached; see kCachedDecode).
  absl::StatusOr<std::string> TokenBytes(int32_t id) { return tokenizer_->TokenBytes(id); }

  // Scores `tokens` (at least two) in a new model session, released
  // afterwards: the logprob of each token after the first with `top_n`
  // alternatives (PrefillResult::prompt_logprobs, 0..kMaxTopLogprobs), and
  // the logits after the last. No generation.
  absl::StatusOr<PrefillResult> Score(std::span<const int32_t> tokens, int32_t top_n);

  // GenerateLoop::Generate.
  absl::StatusOr<GenerateResult> Generate(Session& session, std::span<const int32_t> new_tokens,
                                          const GenerateParams& params,
                                          const TokenCallback& on_token) {
    return loop_->Generate(session, new_tokens, params, on_token);
  }
  // Ends the model session (best effort: a session that is gone is fine) and
  // clears `session`.
  absl::Status Release(Session& session) { return model_->Release(session); }
  // ModelClient::Truncate: keeps the first n tokens (drops pending ones).
  absl::Status Truncate(Session& session, int64_t n) { return model_->Truncate(session, n); }

  // The sessions of every model replica that is up (for tests and tools).
  absl::StatusOr<v1::ListSessionsResponse> ListSessions() { return model_->ListSessions(); }
  // The model replicas (for tests and tools).
  const ModelPool& model_pool() const { return model_->pool(); }
  // The cache of token bytes that kCachedDecode uses (for tests and tools).
  const TokenBytesCache& token_bytes() const { return tokenizer_->token_bytes(); }

  // The loop, for ChatSession and other users of the ports.
  GenerateLoop& loop() { return *loop_; }

  // GenerateLoop::Cancel: async-signal-safe.
  void Cancel() { loop_->Cancel(); }
  void ClearCancel() { loop_->ClearCancel(); }
  bool cancel_requested() const { return loop_->cancel_requested(); }

 private:
  explicit Generator(const ClientOptions& options) : options_(options) {}
  absl::Status Init();

  const ClientOptions options_;
  std::unique_ptr<TokenizerClient> tokenizer_;
  std::unique_ptr<ModelClient> model_;
  std::unique_ptr<GenerateLoop> loop_;  // over the two above
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATOR_H_
