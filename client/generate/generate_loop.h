// The generation loop, over a tokenizer and a model (ports.h):
//
//   Prefill (model: a new session, or append to one) -> sample (sampler,
//   here) -> one decode step per token (model) -> incremental detokenize
//   (TokenizerPort::OpenText) -> stop strings (held back across tokens) ->
//   the caller's callback, one call per token.
//
//   GenerateLoop loop(tokenizer, model, {.logits = mode});
//   Session session;                                    // a new model session
//   auto ids = tokenizer.Encode(prompt, {.allow_special = true});
//   auto result = loop.Generate(session, *ids, params, on_token);
//   loop.Release(session);
//
// Stops on the tokenizer's end ids (EOS / EOT), on a stop string (which never
// reaches the output), at max_tokens, when the model session is full
// (ModelPort::context_length, or a step answered OUT_OF_RANGE), or on
// Cancel().
//
// Pipelining: a sampled token is sent to the model first and detokenized
// while the model computes the next logits. So at a stop string the token
// that completed it is already in the session (its response is awaited and
// kept); the session then holds exactly the tokens fed, as Session::tokens
// says.
//
// Lost sessions: ModelPort::Prefill rebuilds a session lost at the prefill.
// A decode step that finds the session lost (NOT_FOUND, UNAVAILABLE,
// CANCELLED) makes the loop prefill the whole history plus that token into a
// new session and go on where it was: the caller sees no error and no
// repeated text (at most kMaxRebuildsPerCall times per generation).
//
// Cancellation: Cancel() (async-signal-safe: it only sets a flag) stops the
// generation at the next token; the streams are closed cleanly, so the
// session stays consistent. A Prefill in progress is abandoned at once
// (ModelPort::Prefill); the session is then marked unsynced and rebuilt by
// the next call.
//
// Threads: one generation at a time (calls from several threads must be
// serialized); Cancel() may be called from any thread or a signal handler.
// Ownership: borrows both ports, which must outlive the loop.
// Cost: per token, one sample (sampler.h) and one step of each stream.
#ifndef LLM_CLIENT_GENERATE_GENERATE_LOOP_H_
#define LLM_CLIENT_GENERATE_GENERATE_LOOP_H_

#include <atomic>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/generate/logits.h"
#include "client/generate/params.h"
#include "client/generate/ports.h"
#include "client/generate/result.h"
#include "sampler/sampler.h"

namespace llm::client {

struct LoopOptions {
  // Which logits encoding to ask for (logits.h; default: exact and cheapest).
  LogitsMode logits;
  // With a sampler that picks the argmax (sampler::PicksArgmax: greedy, no
  // bias or penalties), tell the model so on each step (StepOptions::
  // lookahead): it computes the next step while the logits travel here and
  // the token travels back.
  bool lookahead = true;
};

class GenerateLoop {
 public:
  GenerateLoop(TokenizerPort& tokenizer, ModelPort& model, const LoopOptions& options = {})
      : tokenizer_(tokenizer), model_(model), options_(options) {}
  GenerateLoop(const GenerateLoop&) = delete;
  GenerateLoop& operator=(const GenerateLoop&) = delete;

  // Appends session.pending and `new_tokens` to the session (the whole
  // history into a new session when session.id is empty) and generates.
  // `on_token` may be null. Errors: InvalidArgument for bad params
  // (ValidateParams) or nothing to prefill; the ports' errors other than the
  // lost sessions recovered as above; CANCELLED only when Cancel() came
  // during the Prefill (a cancel during decoding ends with kCancelled).
  absl::StatusOr<GenerateResult> Generate(Session& session, std::span<const int32_t> new_tokens,
                                          const GenerateParams& params,
                                          const TokenCallback& on_token);

  // ModelPort::Release.
  absl::Status Release(Session& session) { return model_.Release(session); }

  TokenizerPort& tokenizer() const { return tokenizer_; }
  ModelPort& model() const { return model_; }
  const LoopOptions& options() const { return options_; }

  // Stops the current or next generation (see above). Async-signal-safe.
  void Cancel() { cancel_.store(true, std::memory_order_relaxed); }
  // Re-arms after a Cancel(); Generate does not clear the flag itself.
  void ClearCancel() { cancel_.store(false, std::memory_order_relaxed); }
  bool cancel_requested() const { return cancel_.load(std::memory_order_relaxed); }

 private:
  class Run;

  TokenizerPort& tokenizer_;
  ModelPort& model_;
  const LoopOptions options_;
  std::atomic<bool> cancel_{false};
  sampler::Sampler sampler_;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_GENERATE_LOOP_H_
