#include "model_svc/engine/request_queue.h"

#include <algorithm>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/status/status.h"
#include "common/strings.h"
#include "model_svc/engine/limits.h"

namespace llm::engine {
namespace {

// One model per pool: the KV of a position depends only on the tokens up to
// it, so every chain of block names starts from the same seed.
constexpr uint64_t kPrefixSeed = 0x6c6c6d2d6b762d31;  // "llm-kv-1"

bool SameSpec(const model::LogitsSpec& a, const model::LogitsSpec& b) {
  return a.encoding == b.encoding &&
         (a.encoding != model::LogitsEncoding::kTopN || a.top_n == b.top_n);
}

absl::Status NotFound(const std::string& id) {
  return absl::NotFoundError(StrCat("unknown or expired session \"", id, "\""));
}
absl::Status Busy(const std::string& id) {
  return absl::AbortedError(StrCat("session \"", id, "\" is busy with another request"));
}

// INVALID_ARGUMENT when `r` rolls back a session it does not have, or past
// the `have` tokens of its session.
absl::Status CheckTruncateTo(const AppendRequest& r, int64_t have, bool has_session) {
  if (r.truncate_to < 0) return absl::OkStatus();
  if (!has_session) return absl::InvalidArgumentError("truncate_to needs an existing session");
  if (r.truncate_to > have) {
    return absl::InvalidArgumentError(
        StrCat("truncate_to ", r.truncate_to, " is past the session's length of ", have));
  }
  return absl::OkStatus();
}

// sync_history (engine.h): turns `r`'s whole history into an append on
// session `s` (null: none has the id yet): drops the tokens the session
// holds already, all but the last at most, rolling back what differs.
// Returns how many were kept.
int64_t SyncHistory(const Session* s, AppendRequest& r) {
  if (s == nullptr) return 0;
  const int64_t have = s->caller_tokens();
  const int64_t limit = std::min<int64_t>(have, static_cast<int64_t>(r.tokens.size()) - 1);
  int64_t keep = 0;
  while (keep < limit && s->tokens[keep] == r.tokens[keep]) ++keep;
  // All the session's tokens kept: no rollback, so that a computed guess
  // that the history appends next keeps its logits.
  r.truncate_to = keep == have ? -1 : keep;
  r.tokens.erase(r.tokens.begin(), r.tokens.begin() + keep);
  return keep;
}

// Whether `r` appends the guess's token and can take its logits.
// A request for every row's logits in that encoding (a speculative decode's
// all_logits) takes the guess's as its first row; scored rows (prompt
// logprobs) are encoded otherwise. A raw guess's row is encoded as the
// request asks (its mask too); an encoded one only fits a request without
// a mask that asks for the same encoding.
bool TakesGuess(const AppendRequest& r, const Guess& guess) {
  return r.truncate_to < 0 && r.tokens.front() == guess.token && r.prompt_logprobs < 0 &&
         (guess.raw || (r.masks.empty() && SameSpec(r.logits, guess.spec)));
}

// A raw guess's row (float32 logits) encoded as row 0 of `r`, the request
// that takes it, asks: its encoding and its mask.
void EncodeRawGuess(const AppendRequest& r, model::Logits* row) {
  std::vector<float> values = std::move(row->values);
  model::EncodeLogitsInPlace(values, r.row_spec(0), row);
}

// The caller's tokens of s (a lookahead guess left out) and the blocks
// holding their KV, in order.
void CallerView(const Session& s, int64_t block_size, std::vector<int32_t>* tokens,
                std::vector<int32_t>* blocks) {
  const int64_t n = s.caller_tokens();
  const int64_t used = (n + block_size - 1) / block_size;
  tokens->assign(s.tokens.begin(), s.tokens.begin() + n);
  blocks->assign(s.kv.blocks().begin(), s.kv.blocks().begin() + used);
}

}  // namespace

RequestQueue::RequestQueue(const EngineOptions& options, int64_t max_context, int32_t kv_blocks,
                           int32_t kv_block_size, SchedulerLimits limits, uint64_t id_seed,
                           std::atomic<uint64_t>* submitted)
    : max_context_(max_context),
      limits_(limits),
      blocks_(kv_blocks, kv_block_size),
      sessions_(&blocks_, options.session_prefix, options.max_sessions, id_seed),
      submitted_(submitted) {
  if (options.prefix_cache) blocks_.EnablePrefixCache(kPrefixSeed);
}

absl::Status RequestQueue::Validate(const AppendRequest& request, int32_t vocab_size) {
  if (request.tokens.empty()) return absl::InvalidArgumentError("no tokens to append");
  if (request.sync_history) {
    if (request.session_id.empty()) {
      return absl::InvalidArgumentError("sync_history needs a session_id (the session's name)");
    }
    if (request.truncate_to >= 0) {
      return absl::InvalidArgumentError(
          "truncate_to with sync_history: the history says what to keep; send one of them");
    }
    if (request.every_row()) {
      return absl::InvalidArgumentError(
          "sync_history computes only what the session lacks: it cannot score the prompt or "
          "return every row's logits");
    }
  }
  for (size_t i = 0; i < request.tokens.size(); ++i) {
    const int32_t t = request.tokens[i];
    if (t < 0 || t >= vocab_size) {
      return absl::InvalidArgumentError(
          StrCat("token id ", t, " at index ", i, " is out of range [0, ", vocab_size, ")"));
    }
  }
  if (request.logits.encoding == model::LogitsEncoding::kTopN &&
      (request.logits.top_n < 1 || request.logits.top_n > vocab_size)) {
    return absl::InvalidArgumentError(
        StrCat("top_n ", request.logits.top_n, " is out of range [1, ", vocab_size, "]"));
  }
  if (request.prompt_logprobs > vocab_size) {
    return absl::InvalidArgumentError(StrCat("prompt_logprobs ", request.prompt_logprobs,
                                             " is more than the vocabulary's ", vocab_size));
  }
  const size_t rows = request.every_row() ? request.tokens.size() : 1;
  if (request.masks.size() > rows) {
    return absl::InvalidArgumentError(
        StrCat(request.masks.size(), " token masks for ", rows, " rows of logits"));
  }
  for (size_t i = 0; i < request.masks.size(); ++i) {
    const TokenMask& m = request.masks[i];
    if (m.vocab_size() != vocab_size) {
      return absl::InvalidArgumentError(StrCat("token mask ", i, " is of a vocabulary of ",
                                               m.vocab_size(), " tokens, not the model's ",
                                               vocab_size));
    }
    if (m.AllowsNone()) {
      return absl::InvalidArgumentError(StrCat("token mask ", i, " allows no token"));
    }
  }
  return absl::OkStatus();
}

absl::Status RequestQueue::Release(const std::string& id) {
  Session* s = sessions_.Find(id);
  if (s == nullptr) return NotFound(id);
  // A busy session is marked released: its request or guess ends at the
  // next step, and the loop frees it.
  sessions_.Release(s);
  return absl::OkStatus();
}

absl::Status RequestQueue::ExportView(const std::string& id, std::vector<int32_t>* tokens,
                                      std::vector<int32_t>* blocks) {
  Session* s = sessions_.Find(id);
  if (s == nullptr) return NotFound(id);
  if (CallerBusy(*s)) return Busy(id);
  CallerView(*s, blocks_.block_size(), tokens, blocks);
  s->last_used = absl::Now();
  return absl::OkStatus();
}

// Before an idle session is evicted: the hook gets its caller's tokens and
// their blocks (still its own until the eviction frees them).
void RequestQueue::BeforeEvict(const Session& s) {
  if (!on_evict_ || s.busy) return;
  std::vector<int32_t> tokens, blocks;
  CallerView(s, blocks_.block_size(), &tokens, &blocks);
  on_evict_(s.id, std::move(tokens), blocks);
}

absl::StatusOr<std::string> RequestQueue::Import(
    std::vector<int32_t> tokens, absl::FunctionRef<absl::Status(const std::vector<int32_t>&)> write,
    const std::string& id) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (!id.empty() && sessions_.Find(id) != nullptr) {
    return absl::AlreadyExistsError(StrCat("a session with id ", id, " exists already"));
  }
  if (n > max_context_) {
    return WithLimit(
        absl::OutOfRangeError(
            StrCat("the snapshot holds ", n, " tokens, past the context length of ", max_context_)),
        Limit::kContext);
  }
  if (absl::Status st = MakeRoomForSession(nullptr); !st.ok()) return st;
  const int32_t needed =
      static_cast<int32_t>((n + blocks_.block_size() - 1) / blocks_.block_size());
  if (needed > blocks_.num_blocks() || !EvictFor(needed)) {
    return WithLimit(absl::ResourceExhaustedError(StrCat(
                         "the KV cache has no room for the snapshot's ", needed, " blocks (",
                         blocks_.num_free(), " free of ", blocks_.num_blocks(), "); retry later")),
                     Limit::kKvCache);
  }
  Session* s = sessions_.Create(absl::Now(), id);
  s->kv.MarkForeign();
  std::vector<kv::BlockCopy> copies;  // a new table: nothing to copy
  absl::Status st = s->kv.Reserve(n, &copies);
  if (st.ok()) st = write(s->kv.blocks());
  if (!st.ok()) {
    sessions_.Erase(s);
    return st;
  }
  s->tokens = std::move(tokens);
  s->kv.Commit(n, s->tokens);
  return s->id;
}

std::vector<SessionInfo> RequestQueue::ListSessions(absl::Time now) const {
  std::vector<SessionInfo> out;
  sessions_.ForEach([&](const Session& s) {
    SessionInfo info;
    info.id = s.id;
    info.num_tokens = s.caller_tokens();
    info.prefilled_tokens = s.prefilled;
    info.decoded_tokens = s.decoded;
    info.kv_blocks = static_cast<int64_t>(s.kv.blocks().size());
    info.busy = CallerBusy(s);
    info.idle = info.busy ? absl::ZeroDuration() : now - s.last_used;
    out.push_back(std::move(info));
  });
  std::sort(out.begin(), out.end(),
            [](const SessionInfo& a, const SessionInfo& b) { return a.id < b.id; });
  return out;
}

EngineStats RequestQueue::Stats() const {
  EngineStats s = stats_;
  s.sessions = sessions_.size();
  s.kv_blocks_total = blocks_.num_blocks();
  s.kv_blocks_free = blocks_.num_free();
  s.kv_blocks_cached = blocks_.num_cached();
  return s;
}

void RequestQueue::ExpireIdle(absl::Time now, absl::Duration ttl) {
  stats_.expired_sessions += sessions_.ExpireIdle(now, ttl);
}

// Finds a session that has no request in flight.
absl::Status RequestQueue::FindIdle(const std::string& id, Session** out) {
  Session* s = sessions_.Find(id);
  if (s == nullptr) return NotFound(id);
  if (s->busy) return Busy(id);
  *out = s;
  return absl::OkStatus();
}

// Settles the lookahead of the session `id` for a Truncate or Fork (its
// guess is not in a step: see WaitsForGuess): a guess still queued is
// dropped unrun, a computed one forgotten. Then FindIdle.
absl::Status RequestQueue::FindSettled(const std::string& id, Session** out) {
  Session* s = sessions_.Find(id);
  if (s != nullptr && !s->request.has_value()) {
    std::vector<Completion> none;  // no parked request: nothing to complete
    DropGuess(s, &none);
  }
  return FindIdle(id, out);
}

// Whether a Truncate or Fork of session `id` waits (in the session's
// `pending`, run when the step is applied): the session's guess is in the
// step being computed, and no request of the caller's is parked on it.
Session* RequestQueue::WaitsForGuess(const std::string& id) {
  Session* s = sessions_.Find(id);
  return s != nullptr && s->guess_is(Guess::State::kInStep) && !s->request.has_value() ? s
                                                                                       : nullptr;
}

// Truncates now, or, while the session's guess is in the step being
// computed, once that step is applied. Returns the call of `done` to make
// outside the lock (empty when it waits).
Deferred RequestQueue::Truncate(const std::string& id, int64_t n, StatusCallback done) {
  if (Session* s = WaitsForGuess(id); s != nullptr) {
    s->pending.push_back(PendingTruncate{n, std::move(done)});
    return nullptr;
  }
  Session* s = nullptr;
  absl::Status st = FindSettled(id, &s);
  if (st.ok() && (n < 0 || n > static_cast<int64_t>(s->tokens.size()))) {
    st = absl::InvalidArgumentError(
        StrCat("cannot truncate session ", id, " to ", n, " tokens: it holds ", s->tokens.size()));
  }
  if (st.ok()) sessions_.Truncate(*s, n, absl::Now());
  return [done = std::move(done), st = std::move(st)]() mutable { done(std::move(st)); };
}

// As Truncate, for Fork.
Deferred RequestQueue::Fork(const std::string& id, ForkCallback done) {
  if (Session* s = WaitsForGuess(id); s != nullptr) {
    s->pending.push_back(PendingFork{std::move(done)});
    return nullptr;
  }
  Session* parent = nullptr;
  absl::Status st = FindSettled(id, &parent);
  if (st.ok()) st = MakeRoomForSession(parent);
  absl::StatusOr<std::string> child =
      st.ok() ? sessions_.Fork(*parent, absl::Now())->id : absl::StatusOr<std::string>(st);
  return [done = std::move(done), child = std::move(child)]() mutable { done(std::move(child)); };
}

// Requests and guesses queued or in the step.
int64_t RequestQueue::Queued() const { return static_cast<int64_t>(queue_.size()); }

// Takes s out of the queue.
void RequestQueue::Unqueue(Session* s) { queue_.erase(std::find(queue_.begin(), queue_.end(), s)); }

// At the session limit, makes room for a new session: the least recently
// used session without a request of its caller's in flight (not `keep`, a
// Fork's parent) is released (at once when idle; a lookahead guess of it
// ends at the next step) and counted. RESOURCE_EXHAUSTED (marked with the
// limit) when every other session has a request in flight.
absl::Status RequestQueue::MakeRoomForSession(const Session* keep) {
  while (sessions_.full()) {
    Session* lru = sessions_.LeastRecentlyUsedCallerIdle(keep);
    if (lru == nullptr) {
      return WithLimit(absl::ResourceExhaustedError(
                           StrCat("session limit reached (", sessions_.max_sessions(),
                                  " sessions, each with a request in flight); retry later")),
                       Limit::kMaxSessions);
    }
    BeforeEvict(*lru);
    sessions_.Release(lru);
    ++stats_.evicted_for_session_limit;
  }
  return absl::OkStatus();
}

absl::Status RequestQueue::Admit(AppendRequest& request, AppendCallback& done,
                                 std::vector<Completion>* completions) {
  const int64_t pool_tokens = int64_t{blocks_.num_blocks()} * blocks_.block_size();
  Request r;
  Session* s = nullptr;
  if (!request.session_id.empty()) {
    s = sessions_.Find(request.session_id);
    if (s == nullptr && !request.sync_history) return NotFound(request.session_id);
    // While a guess alone is queued or in a step, the caller's next request
    // waits for it.
    if (s != nullptr && CallerBusy(*s)) return Busy(request.session_id);
  }
  if (request.sync_history) r.kept = SyncHistory(s, request);
  const int64_t have = s != nullptr ? s->caller_tokens() : 0;
  if (absl::Status st = CheckTruncateTo(request, have, s != nullptr); !st.ok()) return st;
  const int64_t total = (request.truncate_to >= 0 ? request.truncate_to : have) +
                        static_cast<int64_t>(request.tokens.size());
  if (total > max_context_) {
    return WithLimit(
        absl::OutOfRangeError(StrCat("the session would hold ", total,
                                     " tokens, past the context length of ", max_context_)),
        Limit::kContext);
  }
  if (total > pool_tokens) {
    return WithLimit(
        absl::ResourceExhaustedError(StrCat("the session would hold ", total,
                                            " tokens, more than the whole KV cache (", pool_tokens,
                                            " tokens); raise --kv_cache_mb")),
        Limit::kKvCache);
  }
  if (s == nullptr) {
    // Last: a request refused for another reason evicts no one.
    if (absl::Status st = MakeRoomForSession(nullptr); !st.ok()) return st;
    s = sessions_.Create(absl::Now(), request.sync_history ? request.session_id : "");
    r.new_session = true;
  }
  r.append = std::move(request);
  r.done = std::move(done);
  // A request that will not take a queued guess need not wait for it.
  if (s->guess_is(Guess::State::kQueued) && !TakesGuess(r.append, *s->guess)) {
    DropGuess(s, completions);
  }
  s->request = std::move(r);
  if (!s->guess_pending()) Resume(s, completions);  // else EndGuess resumes it
  return absl::OkStatus();
}

// Starts a request on its idle session, which becomes busy. A computed
// guess is settled first: a request that appends it (with the same logits
// encoding) takes its logits, done at once when that was its only token;
// any other request drops it.
void RequestQueue::Resume(Session* s, std::vector<Completion>* out) {
  s->busy = true;
  Request& p = *s->request;
  const AppendRequest& r = p.append;
  if (s->guess.has_value() && !TakesGuess(r, *s->guess)) DropGuess(s, out);
  // Checked at admission (CheckTruncateTo): the length is the same now.
  if (r.truncate_to >= 0) {
    stats_.rolled_back_tokens += static_cast<int64_t>(s->tokens.size()) - r.truncate_to;
    sessions_.Truncate(*s, r.truncate_to, absl::Now());
  }
  stats_.proposed_tokens += r.proposed;
  if (s->guess.has_value()) {
    std::vector<model::Logits> guess_logits = std::move(s->guess->logits);
    const bool raw = s->guess->raw;
    s->guess.reset();
    ++stats_.lookahead_hits;
    (r.decode ? s->decoded : s->prefilled) += 1;
    (r.decode ? stats_.decode_tokens : stats_.prefill_tokens) += 1;
    p.offset = 1;
    // The guess's row is the request's first, when it returns one.
    if (raw && (p.remaining() == 0 || r.every_row())) EncodeRawGuess(r, &guess_logits.back());
    if (p.remaining() == 0) {
      AppendResult result;
      result.session_id = s->id;
      result.num_tokens = static_cast<int64_t>(s->tokens.size());
      result.kept_tokens = p.kept;
      result.logits = std::move(guess_logits);
      s->busy = false;
      s->last_used = absl::Now();
      Request done = *std::move(s->request);
      s->request.reset();
      if (done.append.lookahead) {
        StartGuess(s, model::Argmax(result.logits.back()), done.append.logits, done.append.cancel,
                   !done.append.masks.empty());
      }
      out->push_back(Completion{std::move(done.done), std::move(result)});
      return;
    }
    if (r.every_row()) p.logits.push_back(std::move(guess_logits.back()));
  }
  queue_.push_back(s);
  submitted_->fetch_add(1, std::memory_order_release);
}

// Prefix cache: a queued request of which nothing was computed yet, on a
// session ending on a block boundary, skips the longest run of cached
// blocks holding its next tokens (BlockManager::Reuse), which the session
// then shares. Looked up before every step until the request's first chunk
// runs, so that requests queued behind one computing the same prefix find
// the blocks that each step completes.
void RequestQueue::ReuseCachedPrefix(Session* s) {
  Request& p = *s->request;
  const int64_t n = p.remaining();
  if (p.offset != p.reused || n < 2 || p.append.every_row()) return;
  if (!blocks_.CanReuse(s->kv.table())) return;  // not on a block boundary
  if (!p.looked_up) {
    p.looked_up = true;
    stats_.prefix_cache_queries += n;
  }
  const int64_t reused = s->kv.Reuse(p.append.tokens.data() + p.offset, n);
  if (reused == 0) return;
  s->tokens.insert(s->tokens.end(), p.append.tokens.begin() + p.offset,
                   p.append.tokens.begin() + p.offset + reused);
  p.offset += reused;
  p.reused += reused;
  (p.append.decode ? s->decoded : s->prefilled) += reused;
  stats_.prefix_cache_hits += reused;
}

// Queues the computation of `token`, the guess at the next token of the
// idle session s, whose last request asked for `spec` and had `cancel`; a
// `raw` guess (after a masked request) keeps float32 logits.
void RequestQueue::StartGuess(Session* s, int32_t token, const model::LogitsSpec& spec,
                              const CancelFlag& cancel, bool raw) {
  if (token < 0 || s->released || static_cast<int64_t>(s->tokens.size()) >= max_context_ ||
      (cancel != nullptr && cancel->load())) {
    return;
  }
  s->busy = true;
  s->guess = Guess{.token = token,
                   .state = Guess::State::kQueued,
                   .spec = raw ? model::LogitsSpec{} : spec,
                   .raw = raw,
                   .cancel = cancel};
  ++stats_.lookahead_steps;
  queue_.push_back(s);
  submitted_->fetch_add(1, std::memory_order_release);
}

// Ends the pending guess of s (out of the queue already): computed when
// `status` is OK (its token, already appended, with `logits`), else
// forgotten; then a request parked on it goes on.
void RequestQueue::EndGuess(Session* s, const absl::Status& status,
                            std::vector<model::Logits> logits, std::vector<Completion>* out) {
  s->busy = false;  // last_used stays the caller's last request's end
  if (s->released) {
    if (s->request.has_value()) {
      out->push_back(Completion{std::move(s->request->done),
                                absl::CancelledError("the session was released")});
    }
    sessions_.Reclaim(s);
    return;
  }
  if (status.ok()) {
    s->guess->state = Guess::State::kComputed;
    s->guess->cancel = nullptr;
    s->guess->logits = std::move(logits);
  } else {
    s->guess.reset();
    s->kv.Truncate(s->kv.num_tokens());
  }
  if (s->request.has_value()) Resume(s, out);  // the request parked meanwhile
}

// Drops the guess of s, if it has one not in a step: a queued one ends
// unrun (a request parked on it goes on), a computed one is forgotten (its
// token and KV position given back).
void RequestQueue::DropGuess(Session* s, std::vector<Completion>* out) {
  if (s->guess_is(Guess::State::kQueued)) {
    Unqueue(s);
    EndGuess(s, absl::CancelledError("lookahead not taken"), {}, out);
  } else if (s->guess_is(Guess::State::kComputed)) {
    s->guess.reset();
    s->tokens.pop_back();
    s->kv.Truncate(static_cast<int64_t>(s->tokens.size()));
  }
}

// Frees idle sessions, least recently used first, until `needed` blocks are
// free. False when not enough can be freed.
bool RequestQueue::EvictFor(int32_t needed) {
  // Idle sessions' unconfirmed guesses go first (a guess's position may
  // have a block of its own).
  if (blocks_.num_free() < needed) {
    std::vector<Completion> none;  // an idle session's guess is computed: nothing to complete
    sessions_.ForEach([&](Session& s) {
      if (!s.busy) DropGuess(&s, &none);
    });
  }
  while (blocks_.num_free() < needed) {
    Session* lru = sessions_.LeastRecentlyUsedIdle();
    if (lru == nullptr) return false;
    BeforeEvict(*lru);
    sessions_.Erase(lru);
    ++stats_.evicted_sessions;
  }
  return true;
}

// Ends the request of s (out of the queue already): the session becomes
// idle (or is freed when it was released, or when the request created it
// and failed).
void RequestQueue::Finish(Session* s, absl::StatusOr<AppendResult> result,
                          std::vector<Completion>* out) {
  AppendCallback done = std::move(s->request->done);
  const bool new_session = s->request->new_session;
  // A failed request that computed nothing leaves its session as it found
  // it, also when the prefix cache had given it tokens: its caller does not
  // know of them.
  const int64_t undo =
      !result.ok() && s->request->offset == s->request->reused ? s->request->reused : 0;
  const bool decode = s->request->append.decode;
  s->request.reset();
  s->busy = false;
  s->last_used = absl::Now();
  if (s->released) {
    sessions_.Reclaim(s);
  } else if (new_session && !result.ok()) {
    sessions_.Erase(s);
  } else if (undo > 0) {
    sessions_.Truncate(*s, static_cast<int64_t>(s->tokens.size()) - undo, s->last_used);
    (decode ? s->decoded : s->prefilled) -= undo;
  } else {
    // Drop KV blocks reserved for tokens that were never computed.
    s->kv.Truncate(s->kv.num_tokens());
  }
  out->push_back(Completion{std::move(done), std::move(result)});
}

// Plans the next step (scheduler.h) and ends the requests that the plan
// ends: the cancelled ones and, when nothing can run, the blocked ones.
void RequestQueue::Plan(StepPlan* plan, std::vector<Completion>* completions) {
  if (blocks_.prefix_cache()) {
    for (Session* s : queue_) {
      if (!s->guess_pending() && !s->cancelled()) ReuseCachedPrefix(s);
    }
  }
  Schedule(
      queue_, limits_, blocks_, [this](int32_t needed) { return EvictFor(needed); }, plan);
  for (const ScheduledChunk& sc : plan->chunks) {
    if (sc.guess) sc.session->guess->state = Guess::State::kInStep;
  }
  if (plan->cancelled.empty() && plan->failed.empty() && plan->dropped.empty()) return;
  // They leave the queue first: ending a guess may queue the request parked
  // on it (queue_.push_back, which would invalidate an iterator).
  auto in = [](const std::vector<Session*>& v, const Session* s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  std::vector<std::pair<Session*, absl::Status>> ending;
  for (auto it = queue_.begin(); it != queue_.end();) {
    Session* p = *it;
    const bool is_failed = in(plan->failed, p);
    if (in(plan->dropped, p)) {
      it = queue_.erase(it);
    } else if (is_failed || in(plan->cancelled, p)) {
      absl::Status st =
          is_failed ? WithLimit(absl::ResourceExhaustedError(
                                    "KV cache full and no idle session to evict; retry later"),
                                Limit::kKvCache)
                    : absl::CancelledError("request cancelled");
      ending.emplace_back(p, std::move(st));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [s, st] : ending) Finish(s, std::move(st), completions);
  for (Session* s : plan->dropped) {
    EndGuess(s, absl::CancelledError("request cancelled"), {}, completions);
  }
}

// Applies a step's result (vLLM's update_from_output): the computed tokens
// join their sessions, the logits their requests, and finished requests
// complete (a lookahead request's guess is queued); a computed guess
// becomes its session's unconfirmed last token, and the Truncate and Fork
// calls that waited for it run. A failed step fails every request in it.
void RequestQueue::Apply(const StepPlan& plan, const absl::Status& status,
                         std::vector<model::Logits>& logits, std::vector<Completion>* completions,
                         std::vector<Deferred>* calls) {
  size_t next_logits = 0;
  std::vector<std::pair<std::string, PendingCall>> waited;  // by session id
  for (const ScheduledChunk& sc : plan.chunks) {
    if (sc.guess) {
      Session* s = sc.session;
      std::vector<model::Logits> guess_logits;
      if (status.ok()) {
        s->tokens.push_back(s->guess->token);
        s->kv.Commit(1, s->tokens);
        guess_logits.push_back(std::move(logits[next_logits++]));
      }
      for (PendingCall& call : s->pending) waited.emplace_back(s->id, std::move(call));
      s->pending.clear();
      Unqueue(s);
      EndGuess(s, status, std::move(guess_logits), completions);
      continue;
    }
    Session& s = *sc.session;
    Request& p = *s.request;
    if (status.ok()) {
      s.tokens.insert(s.tokens.end(), p.append.tokens.begin() + p.offset,
                      p.append.tokens.begin() + p.offset + sc.chunk);
      s.kv.Commit(sc.chunk, s.tokens);
      (p.append.decode ? s.decoded : s.prefilled) += sc.chunk;
      (p.append.decode ? stats_.decode_tokens : stats_.prefill_tokens) += sc.chunk;
      const int64_t rows = sc.logit_rows();
      for (int64_t i = 0; i < rows; ++i) p.logits.push_back(std::move(logits[next_logits++]));
      p.offset += sc.chunk;
    }
    if (!status.ok() || p.remaining() == 0) {
      Unqueue(&s);
      absl::StatusOr<AppendResult> result;
      int32_t guess = -1;
      if (status.ok()) {
        AppendResult r;
        r.session_id = s.id;
        r.num_tokens = static_cast<int64_t>(s.tokens.size());
        r.cached_tokens = p.reused;
        r.kept_tokens = p.kept;
        r.logits = std::move(p.logits);
        if (p.append.lookahead && !s.released && !r.logits.empty()) {
          guess = model::Argmax(r.logits.back());
        }
        result = std::move(r);
      } else {
        result = status;
      }
      const model::LogitsSpec spec = p.append.logits;
      const CancelFlag cancel = p.append.cancel;
      const bool masked = !p.append.masks.empty();
      Finish(&s, std::move(result), completions);  // frees s only if it returns no guess
      if (guess >= 0) StartGuess(&s, guess, spec, cancel, masked);
    }
  }
  // The Truncates and Forks that waited for a guess in the step, in the
  // order they came; a released session's answer NOT_FOUND.
  for (auto& waiting : waited) {
    // Not a structured binding: clang 14 (the fuzz preset) cannot capture one.
    const auto& id = waiting.first;
    auto& pending = waiting.second;
    Deferred call = std::visit(
        [&](auto& c) {
          if constexpr (std::is_same_v<std::decay_t<decltype(c)>, PendingTruncate>) {
            return Truncate(id, c.n, std::move(c.done));
          } else {
            return Fork(id, std::move(c.done));
          }
        },
        pending);
    if (call) calls->push_back(std::move(call));
  }
}

// Ends every request and guess (shutting down).
void RequestQueue::EndAll(std::vector<Completion>* completions) {
  const absl::Status unavailable = absl::UnavailableError("the model server is shutting down");
  // Guesses first, as they were: ending one may queue the request parked on
  // it, which may take the guess and start another: until the queue is
  // empty.
  while (!queue_.empty()) {
    auto guess = std::find_if(queue_.begin(), queue_.end(),
                              [](const Session* s) { return s->guess_pending(); });
    Session* s = guess != queue_.end() ? *guess : queue_.front();
    queue_.erase(guess != queue_.end() ? guess : queue_.begin());
    if (s->guess_pending()) {
      EndGuess(s, unavailable, {}, completions);
    } else {
      Finish(s, unavailable, completions);
    }
  }
}

}  // namespace llm::engine
