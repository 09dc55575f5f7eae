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
// Speculation (GenerateParams::speculate = k > 0): each decode step sends the
// sampled token and up to k proposals (ngram_proposer.h: what followed the
// latest earlier occurrence of the conversation's last tokens), and gets the
// logits after each. The loop then samples from those rows in order, exactly
// as without speculation (same sampler, same history, one rng draw per
// token), and keeps a proposal when the sampler drew it: greedy keeps the
// longest prefix of proposals equal to each row's argmax, and sampling keeps
// a proposal x with probability p(x) (p: the distribution the sampler draws
// from, after temperature and filters) and otherwise emits a draw from p
// with x excluded: Leviathan et al.'s rejection rule for a draft that
// proposes x with certainty. So the output's distribution is unchanged, and
// with the same seed and the same logits it is the same output, token for
// token. Accepted tokens are emitted one at a time through the same path
// (EOS, stop strings, max_tokens, logprobs), so a stop in the middle of an
// accepted run stops there. The proposals after a rejection stay in the
// model session until the next request rolls them back (truncate_to;
// Session::overhang). Lookahead is not asked for on a step with proposals
// (a guess would be used only if every proposal were accepted), except on
// one whose proposals are tokens a constraint forces, which are sure to be
// kept: its guess follows the last of them. A model server that
// predates speculation (no proposed logits in its answer: it appended the
// token alone) is decoded without for the rest of the generation.
//
// Cancellation: Cancel() (async-signal-safe: it only sets a flag) stops the
// generation at the next token; the streams are closed cleanly, so the
// session stays consistent. A Prefill in progress is abandoned at once
// (ModelPort::Prefill); the session is then marked unsynced and rebuilt by
// the next call.
//
// Threads: one generation at a time (calls from several threads must be
// serialized: one that overlaps another, or comes from its on_token, fails
// with FAILED_PRECONDITION); Cancel() may be called from any thread or a
// signal handler.
// Ownership: borrows both ports, which must outlive the loop.
// Cost: per token, one sample (sampler.h) and one step of each stream (a
// step for every 1 + accepted tokens with speculation, plus the n-gram scan).
#ifndef LLM_CLIENT_GENERATE_GENERATE_LOOP_H_
#define LLM_CLIENT_GENERATE_GENERATE_LOOP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/generate/logits.h"
#include "client/generate/ngram_proposer.h"
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
  // Speculation: the shortest suffix of the conversation whose earlier
  // occurrence proposes tokens (ngram_proposer.h).
  int min_ngram = kDefaultMinNgram;
  // Replaces the n-gram proposer (tests): *out = at most max_tokens tokens
  // proposed after `history`.
  std::function<void(std::span<const int32_t> history, int32_t max_tokens,
                     std::vector<int32_t>* out)>
      propose;
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
  std::atomic<bool> running_{false};  // a Generate is in progress
  sampler::Sampler sampler_;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_GENERATE_LOOP_H_
