// The engine: sessions with persistent KV caches, and the step loop that
// batches every session's pending work into one forward per step.
//
// Requests append tokens to a session (Prefill: many; Decode: one, or one
// plus the client's proposals with the logits of every row, for
// speculative decoding) and receive the logits of the last one (of every
// one when asked), after rolling the session back first when they ask
// (AppendRequest::truncate_to). The step loop (one thread) takes, each
// step, every waiting decode (one token, or 1 + k speculative ones) and then
// prefill chunks in arrival order up to `max_batch_tokens` (chunked prefill:
// a long prompt spreads over several steps and never stalls the decodes of
// other sessions).
//
// Prefix cache (EngineOptions::prefix_cache): the full KV blocks that any
// session computed stay named by their prefix, also after the session ends
// (until the pool needs them, least recently freed first); a request on a
// session whose tokens end on a block boundary (a new one, for instance)
// shares the longest run of them that holds its first tokens and computes
// only the rest. Requests that want every row's logits compute everything.
//
// Errors (ARCHITECTURE.md's table): unknown session NOT_FOUND; token id out
// of range, an empty request, a truncate_to past the session's length or a
// bad token mask INVALID_ARGUMENT; past the context OUT_OF_RANGE; KV pool full, or the
// session limit reached with a request in flight on every session,
// RESOURCE_EXHAUSTED; a session that already has a request in flight
// ABORTED; shutting down UNAVAILABLE. The session limit, the KV pool and the
// context mark their statuses with the limit (limits.h: LimitOf), for the
// service's metrics.
//
// Session limit (EngineOptions::max_sessions): a new session (a request
// without a session id, or Fork) beyond it takes the slot of the session
// used least recently among those without a request of their caller's in
// flight (a lookahead guess alone does not count; a Fork's parent is kept):
// that session is evicted (EngineStats::evicted_for_session_limit), and its
// next request gets NOT_FOUND, as after expiry, for its owner to rebuild.
//
// A cancelled request ends with CANCELLED at the next step; its session
// keeps the tokens of the chunks already computed and stays usable.
//
// Lookahead (AppendRequest::lookahead, for greedy decoding): when such a
// request ends, the engine appends the argmax of its logits at once, before
// the caller sends it, so that the next request finds its logits computed or
// being computed, and a round trip to the caller overlaps a step. The guessed
// token is not the caller's until a request appends it: ListSessions does not
// count it, and Truncate, Fork or a request that appends another token (or
// asks for another logits encoding, scores its tokens, or rolls the session
// back) drops it first. A request that appends the guess and more (a
// speculative decode of it and proposals) takes its row and computes the
// rest. With token masks (AppendRequest::masks) the guess is the masked
// argmax and its row is kept raw (float32, unmasked): the request that
// appends it, masked or not, in any encoding, takes it, masked and encoded
// as it asks (on the thread that resumes it, under the lock: one encoding
// of a row); a masked request does not take an unmasked guess's encoded
// row. A wrong guess costs one row of a step. Guesses are scheduled with the
// decodes, before prefill chunks (a guess is a greedy generation's next
// decode: after the prefills, a burst of prompts held every running
// generation at its first token until the last prompt was computed), never
// evict a session for KV space, and are the first thing eviction drops.
//
// Snapshots (snapshot/snapshot.h): ExportSession copies the caller's tokens
// of a session (a lookahead guess left out) and their KV blocks into
// snapshot bytes; ImportSession makes a new session from such bytes, its
// blocks ordinary blocks of it except that the prefix cache never shares
// them (BlockTable::foreign: their KV was not computed here). The next
// request on it computes what it would have computed on the original, bit
// for bit, on the same backend. The KV is copied on the step-loop thread
// between steps (so the call waits for the step in progress); encoding and
// decoding run on the caller's thread. Errors: a busy session ABORTED
// (NOT_FOUND as above), a backend that cannot read its KV (CUDA) UNIMPLEMENTED,
// a snapshot of another model or layout FAILED_PRECONDITION, a corrupt one
// DATA_LOSS or INVALID_ARGUMENT, past the context OUT_OF_RANGE, no room
// RESOURCE_EXHAUSTED (snapshot.h and RequestQueue::Import).
//
// Spilling (EngineOptions::spill, spill_store.h): a session evicted while
// idle (for KV space, or for a slot under the session limit; not one whose
// lookahead guess is in the step) has its tokens and KV copied, under the
// lock, into a snapshot for the store (a fresh buffer and a memcpy of its
// KV, during which the step loop waits: 38 ms for a 2k-token session of
// SmolLM2-135M, 47 MB of f16 KV, on a loaded 2-core VM, bench/README.md;
// EngineStats::spill_copy_time counts it; the store encodes and writes it
// on a thread of its own). Submit, TruncateAsync,
// ForkAsync, ExportSession and Release on an id the engine does not hold
// ask the store first, and import what it returns under that id (Restore),
// then go on: they wait for the store's read and one step then (not on the
// step-loop thread: a call there finds the session unknown). A restore the
// store or the import fails is NOT_FOUND, as without a store.
//
// Threads: every public method is thread-safe. Completion callbacks run on
// the step-loop thread and must not block.
#ifndef LLM_MODEL_SVC_ENGINE_ENGINE_H_
#define LLM_MODEL_SVC_ENGINE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/token_mask.h"
#include "model_svc/core/logits.h"
#include "model_svc/engine/spill_store.h"
#include "model_svc/model/llama_model.h"
#include "model_svc/snapshot/snapshot.h"

namespace llm::engine {

struct EngineOptions {
  int64_t max_batch_tokens = 512;  // tokens per step (decodes + prefill chunks)
  // > 0: a step takes the next request's prefill chunk only while it holds
  // fewer prefill tokens than this (SchedulerLimits::prefill_tokens): the
  // requests that arrive together get their first tokens one after another
  // (bench/README.md, "Serving"). 0: prefill chunks fill max_batch_tokens.
  // -1: the backend's Backend::PrefillStepTokens() (32 on the CPU, 0 on CUDA).
  int64_t prefill_step_tokens = -1;
  int64_t max_sessions = 256;                      // beyond it, the LRU idle session is evicted
  absl::Duration session_ttl = absl::Minutes(10);  // idle time before expiry
  int64_t max_context = 0;  // tokens per session; 0: the model's context length
  // Prepended to the 16 hex characters of every session id; the model server
  // passes "<--session_prefix><pod>.<epoch>." (its replica id and a dot).
  std::string session_prefix;
  // Automatic prefix caching (kv/block_manager.h): a request starts after
  // the longest run of cached full KV blocks that hold its first tokens, so
  // that sessions sharing a prompt prefix compute it once. Exact: a cached
  // prefix gives the same logits, bit for bit, as computing it.
  bool prefix_cache = true;
  // The CPUs the step-loop thread runs on (it computes too: with the CPU
  // backend it is its pool's worker 0); empty: its creator's.
  std::vector<int> step_cpus;
  // The CPUs it runs the completion callbacks on (it changes its set for
  // them after a step, and back), so that a thread one of them starts (gRPC
  // may start one) starts there, not confined to step_cpus; empty:
  // step_cpus. Needs step_cpus. Cost: two system calls per step that
  // delivers, and two migrations if the loop's CPU is not among them.
  std::vector<int> callback_cpus;
  // The model file's fingerprint (fingerprint.h; the loader sets it), which
  // session snapshots carry.
  uint64_t model_fingerprint = 0;
  // Where evicted sessions go instead of being dropped, and come back from
  // (spill_store.h; see "Spilling" above); null: dropped. Needs a backend
  // that reads its KV (cpu); ignored otherwise.
  std::shared_ptr<SpillStore> spill;
};

// A session made from a snapshot.
struct ImportedSession {
  std::string session_id;
  int64_t num_tokens = 0;
};

// A cancellation flag shared between a caller and the engine.
using CancelFlag = std::shared_ptr<std::atomic<bool>>;

struct AppendRequest {
  std::string session_id;  // empty: create a new session
  std::vector<int32_t> tokens;
  model::LogitsSpec logits;
  bool all_logits = false;  // logits of every appended token (perplexity, tests)
  // >= 0: score the appended tokens: the result's logits has one row per
  // appended token; row i < k-1 is encoded as the top `prompt_logprobs` ids
  // (kTopN; 0: none) with target = token i+1 (so that log p(token i+1) =
  // target_logit - log_sum_exp), the last row as `logits` asks. -1: off.
  int32_t prompt_logprobs = -1;
  // Counted as decoded rather than prefilled (statistics), and scheduled
  // first as a decode, whatever its length (a speculative decode: the
  // sampled token and the client's proposals, with all_logits).
  bool decode = false;
  // >= 0: before appending, the session is rolled back to this many tokens
  // (as Truncate, its lookahead guess dropped first): how a speculative
  // client drops the proposals it rejected without another call. At most
  // the session's length (INVALID_ARGUMENT otherwise, the session
  // unchanged); needs an existing session. -1: off.
  int64_t truncate_to = -1;
  // Named sessions (model.proto's PrefillRequest.sync_history): `tokens` are
  // the session's whole history, not an append. The engine keeps the
  // longest common prefix of the session's tokens (its caller's: a lookahead
  // guess left out) and `tokens`, but at most all of them but the last (the
  // logits are the last token's: computed, or a computed guess's), rolls
  // back the rest (as truncate_to) and appends the remainder; a session_id
  // that names no session creates a session under that id (the caller
  // checks the id's characters). Needs session_id; truncate_to, all_logits
  // and prompt_logprobs must be off (INVALID_ARGUMENT otherwise).
  // AppendResult::kept_tokens says how many were kept.
  bool sync_history = false;
  // Of `tokens`, how many at the end are a speculating client's proposals
  // (statistics only).
  int32_t proposed = 0;
  // The caller will likely append the argmax of this request's logits next
  // (see "Lookahead" above). The guess's step shares `cancel`.
  bool lookahead = false;
  CancelFlag cancel;  // may be null
  // Token masks (structured generation, common/token_mask.h) of the last
  // masks.size() rows of the result, in order, each applied to its row
  // before it is encoded (core/logits.h): one for a request's last row (a
  // Prefill's next-token logits, scored rows before it unmasked), or one
  // per row of a speculative decode. At most one per row of the result, of
  // the model's vocabulary, each allowing a token (INVALID_ARGUMENT
  // otherwise). Empty: none.
  std::vector<TokenMask> masks;

  // Whether the result carries a row per appended token.
  bool every_row() const { return all_logits || prompt_logprobs >= 0; }
  // How row `i` (of tokens[i]; the last token's for a request without
  // every_row) is encoded: `logits` with its mask, or for a scored prompt's
  // rows before the last the top `prompt_logprobs` ids and the next token's
  // logit. Points into `masks`.
  model::LogitsSpec row_spec(int64_t i) const;
};

struct AppendResult {
  std::string session_id;
  int64_t num_tokens = 0;     // tokens in the session afterwards
  int64_t cached_tokens = 0;  // appended tokens found in the prefix cache, not computed
  int64_t kept_tokens = 0;    // sync_history: the history's tokens the session held already
  // The last token's, or every token's with all_logits / prompt_logprobs.
  std::vector<model::Logits> logits;
};

using AppendCallback = absl::AnyInvocable<void(absl::StatusOr<AppendResult>)>;
using StatusCallback = absl::AnyInvocable<void(absl::Status)>;
using ForkCallback = absl::AnyInvocable<void(absl::StatusOr<std::string>)>;

struct SessionInfo {
  std::string id;
  int64_t num_tokens = 0;
  int64_t prefilled_tokens = 0;  // tokens appended by prefill requests so far
  int64_t decoded_tokens = 0;    // tokens appended by decode requests so far
  int64_t kv_blocks = 0;
  absl::Duration idle;
  bool busy = false;
};

struct EngineStats {
  int64_t sessions = 0;
  // Requests being computed, and queued (lookahead guesses included; not a
  // request waiting for its session's guess).
  int64_t running = 0;
  int64_t waiting = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_free = 0;
  int64_t steps = 0;
  absl::Duration step_time;  // spent in forward steps, in total
  int64_t prefill_tokens = 0;
  int64_t decode_tokens = 0;
  int64_t lookahead_steps = 0;   // guesses computed (or started)
  int64_t lookahead_hits = 0;    // guesses a request then appended
  int64_t evicted_sessions = 0;  // idle sessions evicted for KV space
  // Sessions evicted to make room for a new one under max_sessions.
  int64_t evicted_for_session_limit = 0;
  int64_t expired_sessions = 0;
  // Prefix cache: tokens of the requests that looked a prefix up (on a
  // session ending on a block boundary, with at least two tokens, not
  // scoring), and tokens found cached (not computed).
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  int32_t kv_blocks_cached = 0;  // free blocks holding a cached prefix
  // Speculative decoding: proposed tokens admitted, and tokens that
  // truncate_to rolled back (a speculating client's rejected proposals).
  int64_t proposed_tokens = 0;
  int64_t rolled_back_tokens = 0;
  // When the step loop last went round (it does at least once a second, idle
  // or not, unless a step hangs); InfinitePast before it starts.
  absl::Time heartbeat = absl::InfinitePast();
  // The spill store's counts (EngineOptions::spill; zero without one), and
  // the time spent copying evicted sessions' KV for it, under the lock.
  SpillCounts spill;
  absl::Duration spill_copy_time;
};

class Engine {
 public:
  // Takes the loaded model and starts the step loop.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(std::unique_ptr<model::LlamaModel> model,
                                                        const EngineOptions& options);
  // Fails pending requests with UNAVAILABLE and joins the step loop.
  ~Engine();

  const model::ModelConfig& config() const;
  const EngineOptions& options() const { return options_; }
  int64_t max_context() const { return max_context_; }
  std::string backend_description() const;
  std::string backend_name() const;  // Backend::name(): "cpu", "cuda"
  // EngineOptions::prefill_step_tokens as the scheduler uses it (-1 resolved).
  int64_t prefill_step_tokens() const;

  // Queues a request; `done` is called exactly once (possibly before Submit
  // returns: for an invalid request, or one whose token a finished lookahead
  // step guessed).
  void Submit(AppendRequest request, AppendCallback done);
  // Submit and wait.
  absl::StatusOr<AppendResult> Append(AppendRequest request);

  // Keeps the first n tokens of a session. Never waits (but for a restore
  // from the spill store, see "Spilling"): `done` is called
  // exactly once, before TruncateAsync returns, or, when the session's
  // lookahead guess is in the step being computed, on the step-loop thread
  // once that step ends (the call waits on the session).
  void TruncateAsync(const std::string& session_id, int64_t n, StatusCallback done);
  // TruncateAsync and wait (one step at most): not to be called from a
  // completion callback.
  absl::Status Truncate(const std::string& session_id, int64_t n);
  // A new session sharing the KV blocks of `session_id` (copy-on-write).
  // `done` is called as TruncateAsync's is.
  void ForkAsync(const std::string& session_id, ForkCallback done);
  // ForkAsync and wait, as Truncate does.
  absl::StatusOr<std::string> Fork(const std::string& session_id);
  absl::Status Release(const std::string& session_id);
  // Brings session `session_id` back from the spill store when the engine
  // does not hold it and the store does (see "Spilling"); OK when the engine
  // holds it afterwards, NOT_FOUND otherwise. The calls named there do this
  // themselves; the server's ListSessions filter calls it.
  absl::Status Restore(const std::string& session_id);
  std::vector<SessionInfo> ListSessions() const;
  EngineStats Stats() const;

  // Session snapshots (see "Snapshots" above). Both wait for the step in
  // progress: not to be called from a completion callback. `compress`: zstd
  // when it pays. `restore` false: a session in the spill store stays there
  // (NOT_FOUND; the server's checkpoints must not bring spilled ones back).
  absl::StatusOr<std::string> ExportSession(const std::string& session_id, bool compress = true,
                                            bool restore = true);
  // `session_id` not empty: the new session gets that id (ALREADY_EXISTS
  // when a session has it; the model server's --session_dir restores
  // sessions under their old ids); empty: a fresh id.
  absl::StatusOr<ImportedSession> ImportSession(std::string_view bytes,
                                                const std::string& session_id = "");
  // What this engine's snapshots say of the model and its KV, and the bounds
  // on one it imports.
  snapshot::SnapshotLayout snapshot_layout() const;
  snapshot::DecodeLimits snapshot_limits() const;

  // Stops admitting requests (UNAVAILABLE); requests in flight finish.
  // ExportSession and ImportSession still run (the server's --session_dir
  // saves the sessions after it).
  void StopAdmission();

 private:
  class Impl;
  friend class EngineTestPeer;  // engine_testing.h: the step gate
  Engine() = default;
  // Restore when there is a spill store and an id (its miss ignored).
  void MaybeRestore(const std::string& session_id);
  // Create, with `before_step` called on the step-loop thread before each
  // forward step (with no lock held): tests only, to hold the loop while a
  // test races a call.
  static absl::StatusOr<std::unique_ptr<Engine>> CreateWithStepHook(
      std::unique_ptr<model::LlamaModel> model, const EngineOptions& options,
      std::function<void()> before_step);
  EngineOptions options_;
  int64_t max_context_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace llm::engine

#endif  // LLM_MODEL_SVC_ENGINE_ENGINE_H_
