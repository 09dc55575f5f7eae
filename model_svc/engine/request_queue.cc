#include "model_svc/engine/request_queue.h"

#include <algorithm>
#include <utility>

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

// Whether `r` appends the guess `token` and can take its logits (`spec`).
// A request for every row's logits in that encoding (a speculative decode's
// all_logits) takes the guess's as its first row; scored rows (prompt
// logprobs) are encoded otherwise.
bool TakesGuess(const AppendRequest& r, int32_t token, const model::LogitsSpec& spec) {
  return r.truncate_to < 0 && r.tokens.front() == token && r.prompt_logprobs < 0 &&
         SameSpec(r.logits, spec);
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

std::vector<SessionInfo> RequestQueue::ListSessions(absl::Time now) const {
  std::vector<SessionInfo> out;
  sessions_.ForEach([&](const Session& s) {
    SessionInfo info;
    info.id = s.id;
    info.num_tokens = static_cast<int64_t>(s.tokens.size()) - (s.ahead ? 1 : 0);
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

// Whether a Truncate or Fork of session `id` must wait: a lookahead step
// of the session (and no request of the caller's) is being computed.
bool RequestQueue::AwaitsGuess(const std::string& id) {
  const Session* s = sessions_.Find(id);
  return s != nullptr && s->guessing && !s->work.has_value() && s->guess_in_step;
}

// FindIdle, after settling the session's lookahead (none may be running:
// see AwaitsGuess): a guess still queued is dropped unrun, a computed one
// forgotten.
absl::Status RequestQueue::FindSettled(const std::string& id, Session** out) {
  Session* s = sessions_.Find(id);
  if (s != nullptr && s->guessing && !s->work.has_value()) {
    std::vector<Completion> none;  // no parked request: nothing to complete
    CancelQueuedAhead(s, &none);
  }
  if (absl::Status st = FindIdle(id, out); !st.ok()) return st;
  DropAhead(*out);
  return absl::OkStatus();
}

// Truncates now, or, while the session's lookahead step is being
// computed, queues the command for the loop (which runs it once the step
// is applied). Returns the call of `done` to make outside the lock (empty
// when queued).
Deferred RequestQueue::Truncate(const std::string& id, int64_t n, StatusCallback done) {
  if (AwaitsGuess(id)) {
    commands_.push_back([this, id, n, done = std::move(done)]() mutable {  // by RunCommands
      return Truncate(id, n, std::move(done));
    });
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
  if (AwaitsGuess(id)) {
    commands_.push_back([this, id, done = std::move(done)]() mutable {  // by RunCommands
      return Fork(id, std::move(done));
    });
    return nullptr;
  }
  Session* parent = nullptr;
  absl::Status st = FindSettled(id, &parent);
  if (st.ok()) st = MakeRoomForSession(parent);
  absl::StatusOr<std::string> child =
      st.ok() ? sessions_.Fork(*parent, absl::Now())->id : absl::StatusOr<std::string>(st);
  return [done = std::move(done), child = std::move(child)]() mutable { done(std::move(child)); };
}

// Runs the queued commands (their sessions' lookahead steps have ended).
void RequestQueue::RunCommands(std::vector<Deferred>* calls) {
  std::vector<Command> commands = std::move(commands_);
  commands_.clear();
  for (Command& c : commands) {
    if (Deferred call = c(); call) calls->push_back(std::move(call));
  }
}

// Requests and guesses queued or in the step.
int64_t RequestQueue::Queued() const {
  return static_cast<int64_t>(active_.size() + guesses_.size());
}

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
    sessions_.Release(lru);
    ++stats_.evicted_for_session_limit;
  }
  return absl::OkStatus();
}

absl::Status RequestQueue::Admit(AppendRequest& request, AppendCallback& done,
                                 std::vector<Completion>* completions) {
  const int64_t pool_tokens = int64_t{blocks_.num_blocks()} * blocks_.block_size();
  Work work;
  Session* s = nullptr;
  if (!request.session_id.empty()) {
    s = sessions_.Find(request.session_id);
    if (s == nullptr) return NotFound(request.session_id);
    // During a lookahead step alone, the caller's next request waits for it.
    if (CallerBusy(*s)) return Busy(request.session_id);
  }
  const int64_t have =
      s != nullptr ? static_cast<int64_t>(s->tokens.size()) - (s->ahead ? 1 : 0) : 0;
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
    s = sessions_.Create(absl::Now());
    work.new_session = true;
  }
  work.request = std::move(request);
  work.done = std::move(done);
  // A request that will not take a queued guess need not wait for it.
  if (s->guessing && !s->guess_in_step &&
      !TakesGuess(work.request, s->ahead_token, s->ahead_spec)) {
    CancelQueuedAhead(s, completions);
  }
  s->work = std::move(work);
  if (!s->guessing) Resume(s, completions);  // else EndAhead resumes it
  return absl::OkStatus();
}

// Ends the guess of s, queued and not yet in a step, unrun.
void RequestQueue::CancelQueuedAhead(Session* s, std::vector<Completion>* out) {
  guesses_.erase(std::find(guesses_.begin(), guesses_.end(), s));
  EndAhead(s, absl::CancelledError("lookahead not taken"), {}, out);
}

// Starts a request on its idle session, which becomes busy. An unconfirmed
// guess is settled first: a request that appends it (with the same logits
// encoding) takes its logits, done at once when that was its only token;
// any other request drops it.
void RequestQueue::Resume(Session* s, std::vector<Completion>* out) {
  s->busy = true;
  Work& p = *s->work;
  const AppendRequest& r = p.request;
  if (s->ahead && !TakesGuess(r, s->ahead_token, s->ahead_spec)) DropAhead(s);
  // Checked at admission (CheckTruncateTo): the length is the same now.
  if (r.truncate_to >= 0) {
    stats_.rolled_back_tokens += static_cast<int64_t>(s->tokens.size()) - r.truncate_to;
    sessions_.Truncate(*s, r.truncate_to, absl::Now());
  }
  stats_.proposed_tokens += r.proposed;
  if (s->ahead) {
    s->ahead = false;
    ++stats_.lookahead_hits;
    (r.decode ? s->decoded : s->prefilled) += 1;
    (r.decode ? stats_.decode_tokens : stats_.prefill_tokens) += 1;
    p.offset = 1;
    if (p.remaining() == 0) {
      AppendResult result;
      result.session_id = s->id;
      result.num_tokens = static_cast<int64_t>(s->tokens.size());
      result.logits = std::move(s->ahead_logits);
      s->busy = false;
      s->last_used = absl::Now();
      Work done = *std::move(s->work);
      s->work.reset();
      if (done.request.lookahead) {
        StartAhead(s, model::Argmax(result.logits.back()), done.request.logits,
                   done.request.cancel);
      }
      out->push_back(Completion{std::move(done.done), std::move(result)});
      return;
    }
    if (r.every_row()) p.logits.push_back(std::move(s->ahead_logits.back()));
    s->ahead_logits.clear();
  }
  active_.push_back(s);
  submitted_->fetch_add(1, std::memory_order_release);
}

// Prefix cache: a queued request of which nothing was computed yet, on a
// session ending on a block boundary, skips the longest run of cached
// blocks holding its next tokens (BlockManager::Reuse), which the session
// then shares. Looked up before every step until the request's first chunk
// runs, so that requests queued behind one computing the same prefix find
// the blocks that each step completes.
void RequestQueue::ReuseCachedPrefix(Session* s) {
  Work& p = *s->work;
  const int64_t n = p.remaining();
  if (p.offset != p.reused || n < 2 || p.request.every_row()) return;
  if (!blocks_.CanReuse(s->kv.table())) return;  // not on a block boundary
  if (!p.looked_up) {
    p.looked_up = true;
    stats_.prefix_cache_queries += n;
  }
  const int64_t reused = s->kv.Reuse(p.request.tokens.data() + p.offset, n);
  if (reused == 0) return;
  s->tokens.insert(s->tokens.end(), p.request.tokens.begin() + p.offset,
                   p.request.tokens.begin() + p.offset + reused);
  p.offset += reused;
  p.reused += reused;
  (p.request.decode ? s->decoded : s->prefilled) += reused;
  stats_.prefix_cache_hits += reused;
}

// Queues the computation of `token`, the guess at the next token of the
// idle session s, whose last request asked for `spec` and had `cancel`.
void RequestQueue::StartAhead(Session* s, int32_t token, const model::LogitsSpec& spec,
                              const CancelFlag& cancel) {
  if (token < 0 || s->released || static_cast<int64_t>(s->tokens.size()) >= max_context_ ||
      (cancel != nullptr && cancel->load())) {
    return;
  }
  s->busy = true;
  s->guessing = true;
  s->guess_cancel = cancel;
  s->ahead_token = token;
  s->ahead_spec = spec;
  ++stats_.lookahead_steps;
  guesses_.push_back(s);
  submitted_->fetch_add(1, std::memory_order_release);
}

// Ends the guess of s (out of guesses_ already): its token becomes the
// session's unconfirmed last token, with `logits` (or is forgotten when
// its row did not run), and a request that arrived meanwhile goes on.
void RequestQueue::EndAhead(Session* s, const absl::Status& status,
                            std::vector<model::Logits> logits, std::vector<Completion>* out) {
  s->guessing = false;
  s->guess_in_step = false;
  s->guess_cancel = nullptr;
  s->busy = false;  // last_used stays the caller's last request's end
  if (s->released) {
    if (s->work.has_value()) {
      out->push_back(
          Completion{std::move(s->work->done), absl::CancelledError("the session was released")});
    }
    sessions_.Reclaim(s);
    return;
  }
  if (status.ok()) {
    s->ahead = true;
    s->ahead_logits = std::move(logits);
  } else {
    s->kv.Truncate(s->kv.num_tokens());
  }
  if (s->work.has_value()) Resume(s, out);  // the request parked meanwhile
}

// Forgets a session's unconfirmed guess, if it has one.
void RequestQueue::DropAhead(Session* s) {
  if (!s->ahead) return;
  s->ahead = false;
  s->ahead_logits.clear();
  s->tokens.pop_back();
  s->kv.Truncate(static_cast<int64_t>(s->tokens.size()));
}

// Frees idle sessions, least recently used first, until `needed` blocks are
// free. False when not enough can be freed.
bool RequestQueue::EvictFor(int32_t needed) {
  // Idle sessions' unconfirmed guesses go first (a guess's position may
  // have a block of its own).
  if (blocks_.num_free() < needed) {
    sessions_.ForEach([this](Session& s) {
      if (!s.busy) DropAhead(&s);
    });
  }
  while (blocks_.num_free() < needed) {
    Session* lru = sessions_.LeastRecentlyUsedIdle();
    if (lru == nullptr) return false;
    sessions_.Erase(lru);
    ++stats_.evicted_sessions;
  }
  return true;
}

// Ends the request of s (out of active_ already): the session becomes
// idle (or is freed when it was released, or when the request created it
// and failed).
void RequestQueue::Finish(Session* s, absl::StatusOr<AppendResult> result,
                          std::vector<Completion>* out) {
  AppendCallback done = std::move(s->work->done);
  const bool new_session = s->work->new_session;
  // A failed request that computed nothing leaves its session as it found
  // it, also when the prefix cache had given it tokens: its caller does not
  // know of them.
  const int64_t undo = !result.ok() && s->work->offset == s->work->reused ? s->work->reused : 0;
  const bool decode = s->work->request.decode;
  s->work.reset();
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
    for (Session* s : active_) {
      if (!s->cancelled()) ReuseCachedPrefix(s);
    }
  }
  Schedule(
      active_, guesses_, limits_, blocks_, [this](int32_t needed) { return EvictFor(needed); },
      plan);
  for (const ScheduledChunk& sc : plan->chunks) {
    if (sc.guess) sc.session->guess_in_step = true;
  }
  if (plan->cancelled.empty() && plan->failed.empty() && plan->dropped.empty()) return;
  // They leave the queues first: ending a guess may queue the request
  // parked on it (active_.push_back, which would invalidate an iterator).
  for (Session* s : plan->dropped) guesses_.erase(std::find(guesses_.begin(), guesses_.end(), s));
  auto in = [](const std::vector<Session*>& v, const Session* s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  std::vector<std::pair<Session*, absl::Status>> ending;
  for (auto it = active_.begin(); it != active_.end();) {
    Session* p = *it;
    const bool is_failed = in(plan->failed, p);
    if (is_failed || in(plan->cancelled, p)) {
      absl::Status st =
          is_failed ? WithLimit(absl::ResourceExhaustedError(
                                    "KV cache full and no idle session to evict; retry later"),
                                Limit::kKvCache)
                    : absl::CancelledError("request cancelled");
      ending.emplace_back(p, std::move(st));
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [s, st] : ending) Finish(s, std::move(st), completions);
  for (Session* s : plan->dropped) {
    EndAhead(s, absl::CancelledError("request cancelled"), {}, completions);
  }
}

// Applies a step's result (vLLM's update_from_output): the computed tokens
// join their sessions, the logits their requests, and finished requests
// complete (a lookahead request's guess is queued); a computed guess
// becomes its session's unconfirmed last token. A failed step fails every
// request in it.
void RequestQueue::Apply(const StepPlan& plan, const absl::Status& status,
                         std::vector<model::Logits>& logits, std::vector<Completion>* completions) {
  size_t next_logits = 0;
  for (const ScheduledChunk& sc : plan.chunks) {
    if (sc.guess) {
      Session* s = sc.session;
      std::vector<model::Logits> guess_logits;
      if (status.ok()) {
        s->tokens.push_back(s->ahead_token);
        s->kv.Commit(1, s->tokens);
        guess_logits.push_back(std::move(logits[next_logits++]));
      }
      guesses_.erase(std::find(guesses_.begin(), guesses_.end(), s));
      EndAhead(s, status, std::move(guess_logits), completions);
      continue;
    }
    Session& s = *sc.session;
    Work& p = *s.work;
    if (status.ok()) {
      s.tokens.insert(s.tokens.end(), p.request.tokens.begin() + p.offset,
                      p.request.tokens.begin() + p.offset + sc.chunk);
      s.kv.Commit(sc.chunk, s.tokens);
      (p.request.decode ? s.decoded : s.prefilled) += sc.chunk;
      (p.request.decode ? stats_.decode_tokens : stats_.prefill_tokens) += sc.chunk;
      const int64_t rows = sc.logit_rows();
      for (int64_t i = 0; i < rows; ++i) p.logits.push_back(std::move(logits[next_logits++]));
      p.offset += sc.chunk;
    }
    if (!status.ok() || p.remaining() == 0) {
      active_.erase(std::find(active_.begin(), active_.end(), &s));
      absl::StatusOr<AppendResult> result;
      int32_t guess = -1;
      if (status.ok()) {
        AppendResult r;
        r.session_id = s.id;
        r.num_tokens = static_cast<int64_t>(s.tokens.size());
        r.cached_tokens = p.reused;
        r.logits = std::move(p.logits);
        if (p.request.lookahead && !s.released && !r.logits.empty()) {
          guess = model::Argmax(r.logits.back());
        }
        result = std::move(r);
      } else {
        result = status;
      }
      const model::LogitsSpec spec = p.request.logits;
      const CancelFlag cancel = p.request.cancel;
      Finish(&s, std::move(result), completions);  // frees s only if it returns no guess
      if (guess >= 0) StartAhead(&s, guess, spec, cancel);
    }
  }
}

// Ends every request and guess (shutting down).
void RequestQueue::EndAll(std::vector<Completion>* completions) {
  const absl::Status unavailable = absl::UnavailableError("the model server is shutting down");
  // Ending a guess may queue the request parked on it, which may take the
  // guess and start another: until both queues are empty.
  while (!guesses_.empty() || !active_.empty()) {
    if (!guesses_.empty()) {
      Session* s = guesses_.front();
      guesses_.pop_front();
      EndAhead(s, unavailable, {}, completions);
    } else {
      Session* s = active_.front();
      active_.pop_front();
      Finish(s, unavailable, completions);
    }
  }
}

}  // namespace llm::engine
