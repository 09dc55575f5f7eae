// The two services as the generation loop sees them: a tokenizer and a model
// that holds sessions. client/transport/ implements them over gRPC; tests
// implement them in memory. Nothing here knows of gRPC.
//
//   TokenizerPort: Encode / Decode, and one TextStream per generation (ids to
//     complete UTF-8, the bytes of a character split across tokens held).
//   ModelPort: Prefill (append to a session, or the whole history into a new
//     one), one DecodeSteps stream per generation (send a token, await the
//     logits after it), Release.
//
// Sessions: the client keeps its own copy of each session's tokens
// (Session::tokens), so that a lost session can be rebuilt by prefilling the
// whole history into a new one. ModelPort::Prefill does that by itself when
// the session is lost at the prefill; when a DecodeSteps stream loses it, the
// loop clears Session::id and calls Prefill.
//
// Threads: every method of a port may be called from several threads at
// once (a process's generations share one pair: client/services.h), unless
// the implementation says otherwise; a stream (TextStream, DecodeSteps)
// belongs to one generation. Ownership: the caller owns
// the streams a port opens; they must not outlive the port.
#ifndef LLM_CLIENT_GENERATE_PORTS_H_
#define LLM_CLIENT_GENERATE_PORTS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/token_mask.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "llm/v1/model.pb.h"

namespace llm::client {

// Lost sessions rebuilt within one call before giving up (a server that keeps
// losing the session has another problem): Prefill's own rebuilds, and the
// loop's over one generation.
inline constexpr int kMaxRebuildsPerCall = 4;

// The client's copy of one model session. A default-constructed Session has
// no model session yet: the next Prefill creates one.
struct Session {
  std::string id;                // the model session; empty: none (yet)
  std::vector<int32_t> tokens;   // every token the model session holds, in order
  std::vector<int32_t> pending;  // sampled but not fed yet (prefilled by the next call)
  bool unsynced = false;         // a failed Prefill left the model's length unknown
  // The model session holds tokens after `tokens`: proposals a speculative
  // decode step fed that were then rejected. The next Prefill or step rolls
  // it back to tokens.size() first (truncate_to), at no extra call.
  bool overhang = false;
  // A named session (docs/client.md, "Named sessions"): `id` is its name,
  // fixed by the caller (letters, digits, '-', '_', '.'; never a replica's
  // id prefix), and what the model holds under it is not known here. Every
  // Prefill sends the whole history (`tokens`, `pending`, then the new ones)
  // with sync_history: the server keeps what it holds of it and computes
  // the rest, creating the session when none has the name; the client then
  // knows `tokens`. So the id is never cleared, a lost or unsynced session
  // is not released (the next Prefill syncs it), and Truncate only cuts
  // `tokens` (the next Prefill rolls the model back). The model client
  // routes it by rendezvous hashing of the name (ModelPool::ForNamedSession).
  bool named = false;
  // Times the model session was found moved to another replica
  // (ModelPort::Relocate: live migration), over the session's life.
  int64_t relocations = 0;
};

struct EncodeOptions {
  bool allow_special = false;  // recognize special-token text (chat templates)
  bool add_bos = false;        // prepend the vocabulary's BOS
};

// The text of one generation, token by token.
class TextStream {
 public:
  virtual ~TextStream() = default;
  // The complete UTF-8 text that `token` adds (valid UTF-8, possibly empty).
  virtual absl::StatusOr<std::string> Add(int32_t token) = 0;
  // Ends the stream: the text still held (an incomplete character as
  // U+FFFD), valid UTF-8. Called at most once.
  virtual absl::StatusOr<std::string> Finish() = 0;
};

class TokenizerPort {
 public:
  virtual ~TokenizerPort() = default;
  // add_bos is honoured only when the vocabulary has a BOS.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                                      const EncodeOptions& options) = 0;
  // The concatenated bytes of `ids` (not necessarily valid UTF-8).
  virtual absl::StatusOr<std::string> Decode(std::span<const int32_t> ids) = 0;
  // The bytes of one token (an implementation may cache them).
  virtual absl::StatusOr<std::string> TokenBytes(int32_t id) {
    return Decode(std::span<const int32_t>(&id, 1));
  }
  // A stream for one generation of at most `max_tokens` tokens (its
  // deadline, if any, is sized by it).
  virtual absl::StatusOr<std::unique_ptr<TextStream>> OpenText(int32_t max_tokens) = 0;
  // The ids that end a generation (the vocabulary's EOS and EOT).
  virtual std::span<const int32_t> end_ids() const = 0;
  // Whether a plain prompt starts with the vocabulary's BOS.
  virtual bool add_bos() const = 0;
};

// What one Prefill or decode step asks of the model.
struct StepOptions {
  v1::LogitsOptions logits;  // the encoding of the logits returned
  bool lookahead = false;    // the next token is the argmax of these logits
  // Prefill only: >= 0 scores the appended tokens (PrefillResult::
  // prompt_logprobs) with this many alternatives each (0..20); -1: off.
  int32_t prompt_logprobs = -1;
  // Decode steps only (speculative decoding): tokens fed after the step's
  // token in the same request, at most kMaxProposedTokens, whose logits come
  // back too (DecodeSteps::proposed_logits); and the length the model
  // session is rolled back to first (-1: none; Session::overhang). A
  // Prefill rolls back by itself when the session says so.
  std::vector<int32_t> proposed;
  int64_t truncate_to = -1;
  // Structured generation: the tokens allowed in the returned logits (a
  // grammar's next tokens; masked ones come back as -inf, or not at all in
  // top-N, and log_sum_exp is over the allowed ones), of the model's
  // vocabulary; null: none. Borrowed: it must stay alive until the call
  // that takes these options (Prefill, DecodeSteps::Send) has returned.
  // The transport sends it in its cheapest wire encoding
  // (common/token_mask_proto.h); a server that does not apply masks
  // (ModelInfo.token_mask false) gets FAILED_PRECONDITION before any call.
  const TokenMask* mask = nullptr;
  // Decode steps with `proposed` and a `mask`: the masks of the proposed
  // tokens' rows, one per proposed token (borrowed, as `mask`); empty
  // without a mask.
  std::span<const TokenMask> proposed_masks;
};

// What a Prefill returns.
struct PrefillResult {
  v1::Logits logits;  // after the last token: the next token's distribution
  // With StepOptions::prompt_logprobs >= 0: the score of each of the tokens
  // passed after the first (tokens[1..], in order; the history a rebuild
  // prefills too is not scored). Empty otherwise.
  std::vector<v1::TokenLogprob> prompt_logprobs;
  // Tokens of the request that the model server found in its prefix cache
  // (PrefillResponse.cached_tokens; a rebuild counts its history's).
  int64_t cached_tokens = 0;
  // A named session's: of the history sent, the tokens the model session
  // held already (PrefillResponse.kept_tokens). 0 otherwise.
  int64_t kept_tokens = 0;
};

// One stream of decode steps on one session, one step in flight at a time:
// Send(token), then Await() its logits. A failed step ends the stream.
class DecodeSteps {
 public:
  virtual ~DecodeSteps() = default;
  // Feeds `token` and starts computing the logits after it; returns at
  // once or when the request is on its way. A failure is kept for Await.
  virtual void Send(int32_t token, const StepOptions& options) = 0;
  // The logits after the token sent; valid until the next Send. OK: the token
  // (and StepOptions::proposed) joined the session. Errors: OUT_OF_RANGE (the session is full; the
  // token was not fed), NOT_FOUND (the session is lost), UNAVAILABLE or CANCELLED (its server went
  // away or is shutting down: lost too), DEADLINE_EXCEEDED, or the server's own.
  virtual absl::StatusOr<const v1::Logits*> Await() = 0;
  // After an OK Await: the logits after each proposed token, in order (one
  // per StepOptions::proposed; fewer only from a server that does not
  // speculate). Valid until the next Send.
  virtual const google::protobuf::RepeatedPtrField<v1::Logits>& proposed_logits() const = 0;
  // Ends the stream cleanly (no step in flight); the status is informative.
  virtual absl::Status Close() = 0;
};

class ModelPort {
 public:
  virtual ~ModelPort() = default;
  virtual int64_t vocab_size() const = 0;
  // Tokens a session holds at most; 0: not known (then a step that would
  // overflow answers OUT_OF_RANGE).
  virtual int64_t context_length() const = 0;

  // Appends `tokens` to the session: into a new session, after the whole
  // history session.tokens, when session.id is empty or the session is lost
  // (then *rebuilds is incremented, at most kMaxRebuildsPerCall times); an
  // existing session with an overhang is rolled back to session.tokens
  // first, in the same call. On
  // success session.id names the session and session.tokens has `tokens`
  // appended; returns the logits after the last token (and the scores
  // StepOptions::prompt_logprobs asks for). `cancel` is polled
  // while the call runs: when set, the call is abandoned with CANCELLED and
  // session.unsynced set (the model may hold part of `tokens`), as after any
  // failure on an existing session other than a refusal before work
  // (INVALID_ARGUMENT, OUT_OF_RANGE, ABORTED).
  virtual absl::StatusOr<PrefillResult> Prefill(Session& session, std::span<const int32_t> tokens,
                                                const StepOptions& options,
                                                const std::atomic<bool>& cancel,
                                                int32_t* rebuilds) = 0;

  // A stream of steps on `session` (its id, named or not) for at most
  // `max_steps` steps (its whole-call deadline, if any, is sized by it).
  // Opening is lazy: a failure to reach the session shows at the first Await.
  virtual std::unique_ptr<DecodeSteps> OpenSteps(const Session& session, int32_t max_steps) = 0;

  // Ends the model session (best effort: a session that is gone is fine)
  // and clears `session`.
  virtual absl::Status Release(Session& session) = 0;

  // Keeps the first n tokens of the session (0 <= n <= session.tokens.size(),
  // else InvalidArgument) and drops session.pending. A session that is lost
  // (or has no model session yet) only has its copy trimmed: the next
  // Prefill rebuilds it. Other errors are returned, the session unchanged.
  virtual absl::Status Truncate(Session& session, int64_t n) = 0;
  // The model session's snapshot (ExportSession; model_svc/snapshot), and
  // a new session made from one (ImportSession; its id). UNIMPLEMENTED from
  // a port without snapshots.
  virtual absl::StatusOr<std::string> ExportSession(const Session& session) {
    return absl::UnimplementedError("this model port has no session snapshots");
  }
  virtual absl::StatusOr<std::string> ImportSession(const std::string& bytes) {
    return absl::UnimplementedError("this model port has no session snapshots");
  }

  // After a step on `session` failed as lost (NOT_FOUND, UNAVAILABLE,
  // CANCELLED): true when the model session was found on a replica (it
  // moved there: live migration on drain, docs/client.md "Sessions that
  // move"); then the next call goes there and rolls the session back to
  // session.tokens first (Session::overhang: a step cut short may have
  // appended more), and nothing needs a re-prefill; session.relocations
  // counts it. False: it is lost.
  virtual bool Relocate(Session& session) { return false; }
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATE_PORTS_H_
