#include "model_svc/engine/engine.h"

#include <pthread.h>

#include <algorithm>
#include <deque>
#include <future>
#include <random>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/strings.h"
#include "model_svc/engine/batch_window.h"
#include "model_svc/engine/limits.h"
#include "model_svc/engine/runner.h"
#include "model_svc/engine/scheduler.h"
#include "model_svc/engine/sequence.h"
#include "model_svc/engine/session_table.h"
#include "model_svc/kv/block_manager.h"

namespace llm::engine {
namespace {

constexpr uint64_t kPrefixSeed = 0x6c6c6d2d6b762d31;  // "llm-kv-1"

bool SameSpec(const model::LogitsSpec& a, const model::LogitsSpec& b) {
  return a.encoding == b.encoding &&
         (a.encoding != model::LogitsEncoding::kTopN || a.top_n == b.top_n);
}

// One completion to deliver outside the lock.
struct Completion {
  AppendCallback done;
  absl::StatusOr<AppendResult> result;
};

// A callback's call to make outside the lock.
using Deferred = absl::AnyInvocable<void()>;

}  // namespace

class Engine::Impl {
 public:
  Impl(std::unique_ptr<model::LlamaModel> model, const EngineOptions& options, int64_t max_context,
       std::function<void()> before_step)
      : model_(std::move(model)),
        options_(options),
        max_context_(max_context),
        before_step_(std::move(before_step)),
        blocks_(model_->options().kv_blocks, model_->options().kv_block_size),
        sessions_(&blocks_, options.session_prefix, options.max_sessions, std::random_device{}()) {
    if (options.prefix_cache) {
      absl::MutexLock lock(&mu_);
      // One model per pool: the KV of a position depends only on the tokens
      // up to it, so every chain starts from the same seed.
      blocks_.EnablePrefixCache(kPrefixSeed);
    }
    loop_ = std::thread([this] { Loop(); });
  }

  ~Impl() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    loop_.join();
  }

  model::LlamaModel& model() { return *model_; }

  void Submit(AppendRequest request, AppendCallback done) {
    std::vector<Completion> completions;
    absl::Status s = Admit(request, done, &completions);
    if (!s.ok()) done(std::move(s));
    for (Completion& c : completions) c.done(std::move(c.result));
  }

  void Truncate(const std::string& id, int64_t n, StatusCallback done) {
    Deferred call;
    {
      absl::MutexLock lock(&mu_);
      call = TruncateLocked(id, n, std::move(done));
    }
    if (call) call();
  }

  void Fork(const std::string& id, ForkCallback done) {
    Deferred call;
    {
      absl::MutexLock lock(&mu_);
      call = ForkLocked(id, std::move(done));
    }
    if (call) call();
  }

  absl::Status Release(const std::string& id) {
    absl::MutexLock lock(&mu_);
    Session* s = sessions_.Find(id);
    if (s == nullptr) return NotFound(id);
    // A busy session is marked released: its request or guess ends at the
    // next step, and the loop frees it.
    sessions_.Release(s);
    return absl::OkStatus();
  }

  std::vector<SessionInfo> ListSessions() const {
    absl::MutexLock lock(&mu_);
    std::vector<SessionInfo> out;
    const absl::Time now = absl::Now();
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

  EngineStats Stats() const {
    absl::MutexLock lock(&mu_);
    EngineStats s = stats_;
    s.sessions = sessions_.size();
    s.running = running_;
    s.waiting = Queued() - running_;
    s.kv_blocks_total = blocks_.num_blocks();
    s.kv_blocks_free = blocks_.num_free();
    s.kv_blocks_cached = blocks_.num_cached();
    return s;
  }

  void StopAdmission() {
    absl::MutexLock lock(&mu_);
    admitting_ = false;
  }

 private:
  static absl::Status NotFound(const std::string& id) {
    return absl::NotFoundError(StrCat("unknown or expired session \"", id, "\""));
  }
  static absl::Status Busy(const std::string& id) {
    return absl::AbortedError(StrCat("session \"", id, "\" is busy with another request"));
  }

  // Finds a session that has no request in flight.
  absl::Status FindIdle(const std::string& id, Session** out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Session* s = sessions_.Find(id);
    if (s == nullptr) return NotFound(id);
    if (s->busy) return Busy(id);
    *out = s;
    return absl::OkStatus();
  }

  // Whether a Truncate or Fork of session `id` must wait: a lookahead step
  // of the session (and no request of the caller's) is being computed.
  bool AwaitsGuess(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Session* s = sessions_.Find(id);
    return s != nullptr && s->guessing && !s->work.has_value() && s->guess_in_step;
  }

  // FindIdle, after settling the session's lookahead (none may be running:
  // see AwaitsGuess): a guess still queued is dropped unrun, a computed one
  // forgotten.
  absl::Status FindSettled(const std::string& id, Session** out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
  Deferred TruncateLocked(const std::string& id, int64_t n, StatusCallback done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (AwaitsGuess(id)) {
      commands_.push_back(
          // Run by RunCommands, with mu_ held. (No lock annotation on the
          // lambda: clang takes none after `mutable`.)
          [this, id, n, done = std::move(done)]() mutable {
            return TruncateLocked(id, n, std::move(done));
          });
      return nullptr;
    }
    Session* s = nullptr;
    absl::Status st = FindSettled(id, &s);
    if (st.ok() && (n < 0 || n > static_cast<int64_t>(s->tokens.size()))) {
      st = absl::InvalidArgumentError(StrCat("cannot truncate session ", id, " to ", n,
                                             " tokens: it holds ", s->tokens.size()));
    }
    if (st.ok()) sessions_.Truncate(*s, n, absl::Now());
    return [done = std::move(done), st = std::move(st)]() mutable { done(std::move(st)); };
  }

  // As TruncateLocked, for Fork.
  Deferred ForkLocked(const std::string& id, ForkCallback done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (AwaitsGuess(id)) {
      commands_.push_back([this, id, done = std::move(done)]() mutable {  // with mu_ held, as above
        return ForkLocked(id, std::move(done));
      });
      return nullptr;
    }
    Session* parent = nullptr;
    absl::Status st = FindSettled(id, &parent);
    if (st.ok()) st = CheckSessionLimit();
    absl::StatusOr<std::string> child =
        st.ok() ? sessions_.Fork(*parent, absl::Now())->id : absl::StatusOr<std::string>(st);
    return [done = std::move(done), child = std::move(child)]() mutable { done(std::move(child)); };
  }

  // Runs the queued commands (their sessions' lookahead steps have ended).
  void RunCommands(std::vector<Deferred>* calls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Command> commands = std::move(commands_);
    commands_.clear();
    for (Command& c : commands) {
      if (Deferred call = c(); call) calls->push_back(std::move(call));
    }
  }

  // Requests and guesses queued or in the step.
  int64_t Queued() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int64_t>(active_.size() + guesses_.size());
  }

  absl::Status CheckSessionLimit() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (sessions_.full()) {
      return WithLimit(
          absl::ResourceExhaustedError(
              StrCat("session limit reached (", options_.max_sessions, " sessions); retry later")),
          Limit::kMaxSessions);
    }
    return absl::OkStatus();
  }

  absl::Status Admit(AppendRequest& request, AppendCallback& done,
                     std::vector<Completion>* completions) {
    const model::ModelConfig& c = model_->config();
    if (request.tokens.empty()) return absl::InvalidArgumentError("no tokens to append");
    for (size_t i = 0; i < request.tokens.size(); ++i) {
      const int32_t t = request.tokens[i];
      if (t < 0 || t >= c.vocab_size) {
        return absl::InvalidArgumentError(
            StrCat("token id ", t, " at index ", i, " is out of range [0, ", c.vocab_size, ")"));
      }
    }
    if (request.logits.encoding == model::LogitsEncoding::kTopN &&
        (request.logits.top_n < 1 || request.logits.top_n > c.vocab_size)) {
      return absl::InvalidArgumentError(
          StrCat("top_n ", request.logits.top_n, " is out of range [1, ", c.vocab_size, "]"));
    }
    if (request.prompt_logprobs > c.vocab_size) {
      return absl::InvalidArgumentError(StrCat("prompt_logprobs ", request.prompt_logprobs,
                                               " is more than the vocabulary's ", c.vocab_size));
    }
    const int64_t pool_tokens = int64_t{blocks_.num_blocks()} * blocks_.block_size();
    absl::MutexLock lock(&mu_);
    if (!admitting_ || stop_) return absl::UnavailableError("the model server is shutting down");
    Work work;
    Session* s = nullptr;
    if (request.session_id.empty()) {
      if (absl::Status st = CheckSessionLimit(); !st.ok()) return st;
    } else {
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
                                              " tokens, more than the whole KV cache (",
                                              pool_tokens, " tokens); raise --kv_cache_mb")),
          Limit::kKvCache);
    }
    if (s == nullptr) {
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

  // INVALID_ARGUMENT when `r` rolls back a session it does not have, or past
  // the `have` tokens of its session.
  static absl::Status CheckTruncateTo(const AppendRequest& r, int64_t have, bool has_session) {
    if (r.truncate_to < 0) return absl::OkStatus();
    if (!has_session) return absl::InvalidArgumentError("truncate_to needs an existing session");
    if (r.truncate_to > have) {
      return absl::InvalidArgumentError(
          StrCat("truncate_to ", r.truncate_to, " is past the session's length of ", have));
    }
    return absl::OkStatus();
  }

  // Whether `r` appends the guess `token` and can take its logits (`spec`).
  static bool TakesGuess(const AppendRequest& r, int32_t token, const model::LogitsSpec& spec) {
    return r.truncate_to < 0 && r.tokens.front() == token && !r.every_row() &&
           SameSpec(r.logits, spec);
  }

  // Ends the guess of s, queued and not yet in a step, unrun.
  void CancelQueuedAhead(Session* s, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    guesses_.erase(std::find(guesses_.begin(), guesses_.end(), s));
    EndAhead(s, absl::CancelledError("lookahead not taken"), {}, out);
  }

  // Starts a request on its idle session, which becomes busy. An unconfirmed
  // guess is settled first: a request that appends it (with the same logits
  // encoding) takes its logits, done at once when that was its only token;
  // any other request drops it.
  void Resume(Session* s, std::vector<Completion>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    s->busy = true;
    Work& p = *s->work;
    const AppendRequest& r = p.request;
    if (s->ahead && !TakesGuess(r, s->ahead_token, s->ahead_spec)) DropAhead(s);
    // Checked at admission (CheckTruncateTo): the length is the same now.
    if (r.truncate_to >= 0) sessions_.Truncate(*s, r.truncate_to, absl::Now());
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
      s->ahead_logits.clear();
    }
    active_.push_back(s);
    submitted_.fetch_add(1, std::memory_order_release);
  }

  // Prefix cache: a queued request of which nothing was computed yet, on a
  // session ending on a block boundary, skips the longest run of cached
  // blocks holding its next tokens (BlockManager::Reuse), which the session
  // then shares. Looked up before every step until the request's first chunk
  // runs, so that requests queued behind one computing the same prefix find
  // the blocks that each step completes.
  void ReuseCachedPrefix(Session* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Work& p = *s->work;
    const int64_t n = p.remaining();
    if (p.offset != p.reused || n < 2 || p.request.every_row()) return;
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
  void StartAhead(Session* s, int32_t token, const model::LogitsSpec& spec,
                  const CancelFlag& cancel) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
    submitted_.fetch_add(1, std::memory_order_release);
  }

  // Ends the guess of s (out of guesses_ already): its token becomes the
  // session's unconfirmed last token, with `logits` (or is forgotten when
  // its row did not run), and a request that arrived meanwhile goes on.
  void EndAhead(Session* s, const absl::Status& status, std::vector<model::Logits> logits,
                std::vector<Completion>* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
  void DropAhead(Session* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!s->ahead) return;
    s->ahead = false;
    s->ahead_logits.clear();
    s->tokens.pop_back();
    s->kv.Truncate(static_cast<int64_t>(s->tokens.size()));
  }

  // Frees idle sessions, least recently used first, until `needed` blocks are
  // free. False when not enough can be freed.
  bool EvictFor(int32_t needed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // Idle sessions' unconfirmed guesses go first (a guess's position may
    // have a block of its own).
    if (blocks_.num_free() < needed) {
      sessions_.ForEach([this](Session& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
  void Finish(Session* s, absl::StatusOr<AppendResult> result, std::vector<Completion>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    AppendCallback done = std::move(s->work->done);
    const bool new_session = s->work->new_session;
    s->work.reset();
    s->busy = false;
    s->last_used = absl::Now();
    if (s->released) {
      sessions_.Reclaim(s);
    } else if (new_session && !result.ok()) {
      sessions_.Erase(s);
    } else {
      // Drop KV blocks reserved for tokens that were never computed.
      s->kv.Truncate(s->kv.num_tokens());
    }
    out->push_back(Completion{std::move(done), std::move(result)});
  }

  // Plans the next step (scheduler.h) and ends the requests that the plan
  // ends: the cancelled ones and, when nothing can run, the blocked ones.
  void Plan(StepPlan* plan, std::vector<Completion>* completions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const SchedulerLimits limits{
        std::min(options_.max_batch_tokens, model_->options().max_step_tokens),
        model_->options().max_logit_rows};
    if (blocks_.prefix_cache()) {
      for (Session* s : active_) {
        if (!s->cancelled()) ReuseCachedPrefix(s);
      }
    }
    Schedule(
        active_, guesses_, limits, blocks_,
        [this](int32_t needed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return EvictFor(needed); },
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
  void Apply(const StepPlan& plan, const absl::Status& status, std::vector<model::Logits>& logits,
             std::vector<Completion>* completions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
  void EndAll(std::vector<Completion>* completions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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

  // Waits (at most a second) for work, then for the gather window.
  void AwaitWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || Queued() > 0; };
    mu_.AwaitWithTimeout(absl::Condition(&has_work), absl::Seconds(1));
    // Work is here: let the backend's threads wake while the step is built.
    if (!stop_ && Queued() > 0) model_->backend().Prewarm();
    // Gather window: wait a little for the rest of the last step's
    // sessions (batch_window.h).
    if (!stop_ && window_.ShouldGather(Queued())) {
      auto gathered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || Queued() >= window_.gather_target();
      };
      mu_.AwaitWithTimeout(absl::Condition(&gathered), window_.gather_timeout());
    }
  }

  static void Deliver(std::vector<Completion>* completions, std::vector<Deferred>* calls) {
    for (Completion& c : *completions) c.done(std::move(c.result));
    completions->clear();
    for (Deferred& call : *calls) call();
    calls->clear();
  }

  // The step loop: plan, run, apply, deliver.
  void Loop() {
    // Named for operators (top -H) and for model_server --pin_threads, which
    // finds the compute threads by name.
    pthread_setname_np(pthread_self(), "llm-step");
    Runner runner(model_.get());
    StepPlan plan;
    std::vector<model::Logits> logits;
    std::vector<Completion> completions;
    std::vector<Deferred> calls;     // of the commands run
    std::vector<uint64_t> decoders;  // serials of the sessions decoding in the step
    absl::Time last_sweep = absl::Now();
    absl::Time spin_until = absl::InfinitePast();
    uint64_t submitted_seen = 0;
    for (;;) {
      // After a step of decodes, watch for their next tokens (batch_window.h).
      SpinWhileUnchanged(submitted_, submitted_seen, spin_until);
      bool stopping = false;
      {
        absl::MutexLock lock(&mu_);
        AwaitWork();
        const absl::Time now = absl::Now();
        stats_.heartbeat = now;
        if (now - last_sweep > absl::Seconds(1)) {
          stats_.expired_sessions += sessions_.ExpireIdle(now, options_.session_ttl);
          last_sweep = now;
        }
        stopping = stop_;
        if (stopping) {
          EndAll(&completions);
          RunCommands(&calls);
        } else {
          Plan(&plan, &completions);
          running_ = static_cast<int64_t>(plan.chunks.size());
          decoders.clear();
          for (const ScheduledChunk& sc : plan.chunks) {
            if (sc.decode()) decoders.push_back(sc.session->serial);
          }
          window_.Scheduled(running_, decoders);
        }
      }
      Deliver(&completions, &calls);
      if (stopping) return;
      if (plan.chunks.empty()) continue;

      runner.Prepare(plan);
      if (before_step_) before_step_();
      const absl::Time step_start = absl::Now();
      const absl::Status status = runner.Forward(&logits);
      const absl::Time step_end = absl::Now();
      bool had_decode = false;
      for (const ScheduledChunk& sc : plan.chunks) had_decode |= sc.decode();

      {
        absl::MutexLock lock(&mu_);
        ++stats_.steps;
        stats_.step_time += step_end - step_start;
        Apply(plan, status, logits, &completions);
        RunCommands(&calls);  // those that waited for a lookahead step in it
        running_ = 0;
        window_.Ran(step_end - step_start, step_end, had_decode, Queued() > 0);
        spin_until = window_.spin_until();
        // Admissions up to now are queued or done; watch for later ones.
        submitted_seen = submitted_.load(std::memory_order_acquire);
      }
      Deliver(&completions, &calls);
    }
  }

  std::unique_ptr<model::LlamaModel> model_;
  const EngineOptions options_;
  const int64_t max_context_;
  const std::function<void()> before_step_;  // tests only (Engine::CreateWithStepHook)

  mutable absl::Mutex mu_;
  kv::BlockManager blocks_ ABSL_GUARDED_BY(mu_);
  SessionTable sessions_ ABSL_GUARDED_BY(mu_);  // leases from blocks_: declared after it
  // Sessions whose request is queued or in the step, in arrival order.
  std::deque<Session*> active_ ABSL_GUARDED_BY(mu_);
  // Sessions whose lookahead guess waits for its row or is in the step, in
  // the order they were made.
  std::deque<Session*> guesses_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  BatchWindow window_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> submitted_{0};  // requests admitted, ever
  // Truncates and Forks waiting for their sessions' lookahead steps: each
  // runs (or queues itself again) and returns the call to make.
  using Command = absl::AnyInvocable<Deferred()>;
  std::vector<Command> commands_ ABSL_GUARDED_BY(mu_);
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  bool admitting_ ABSL_GUARDED_BY(mu_) = true;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread loop_;
};

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(std::unique_ptr<model::LlamaModel> model,
                                                       const EngineOptions& options) {
  return CreateWithStepHook(std::move(model), options, nullptr);
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::CreateWithStepHook(
    std::unique_ptr<model::LlamaModel> model, const EngineOptions& options,
    std::function<void()> before_step) {
  if (model == nullptr) return absl::InvalidArgumentError("no model");
  if (options.max_batch_tokens < 1 || options.max_sessions < 1 ||
      options.session_ttl <= absl::ZeroDuration() || options.max_context < 0) {
    return absl::InvalidArgumentError(
        "engine options: max_batch_tokens, max_sessions and session_ttl must be positive");
  }
  std::unique_ptr<Engine> e(new Engine);
  e->options_ = options;
  const int64_t model_context = model->config().context_length;
  e->max_context_ =
      options.max_context > 0 ? std::min(options.max_context, model_context) : model_context;
  e->impl_ =
      std::make_unique<Impl>(std::move(model), options, e->max_context_, std::move(before_step));
  return e;
}

Engine::~Engine() = default;

const model::ModelConfig& Engine::config() const { return impl_->model().config(); }

std::string Engine::backend_description() const { return impl_->model().backend().description(); }
std::string Engine::backend_name() const { return impl_->model().backend().name(); }

void Engine::Submit(AppendRequest request, AppendCallback done) {
  impl_->Submit(std::move(request), std::move(done));
}

absl::StatusOr<AppendResult> Engine::Append(AppendRequest request) {
  std::promise<absl::StatusOr<AppendResult>> promise;
  std::future<absl::StatusOr<AppendResult>> future = promise.get_future();
  Submit(std::move(request),
         [&promise](absl::StatusOr<AppendResult> r) { promise.set_value(std::move(r)); });
  return future.get();
}

void Engine::TruncateAsync(const std::string& id, int64_t n, StatusCallback done) {
  impl_->Truncate(id, n, std::move(done));
}

absl::Status Engine::Truncate(const std::string& id, int64_t n) {
  std::promise<absl::Status> promise;
  std::future<absl::Status> future = promise.get_future();
  TruncateAsync(id, n, [&promise](absl::Status s) { promise.set_value(std::move(s)); });
  return future.get();
}

void Engine::ForkAsync(const std::string& id, ForkCallback done) {
  impl_->Fork(id, std::move(done));
}

absl::StatusOr<std::string> Engine::Fork(const std::string& id) {
  std::promise<absl::StatusOr<std::string>> promise;
  std::future<absl::StatusOr<std::string>> future = promise.get_future();
  ForkAsync(id, [&promise](absl::StatusOr<std::string> s) { promise.set_value(std::move(s)); });
  return future.get();
}
absl::Status Engine::Release(const std::string& id) { return impl_->Release(id); }
std::vector<SessionInfo> Engine::ListSessions() const { return impl_->ListSessions(); }
EngineStats Engine::Stats() const { return impl_->Stats(); }
void Engine::StopAdmission() { impl_->StopAdmission(); }

}  // namespace llm::engine
