#include "model_svc/engine/engine.h"

#include <pthread.h>

#include <algorithm>
#include <future>
#include <random>
#include <span>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/cpu_set.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "model_svc/engine/batch_window.h"
#include "model_svc/engine/request_queue.h"
#include "model_svc/engine/runner.h"
#include "model_svc/engine/scheduler.h"

namespace llm::engine {

model::LogitsSpec AppendRequest::row_spec(int64_t i) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (prompt_logprobs >= 0 && i + 1 < n) {
    return {model::LogitsEncoding::kTopN, prompt_logprobs, tokens[i + 1]};
  }
  model::LogitsSpec spec = logits;
  // The masks are the last rows': of every token's row, or of the last one.
  const int64_t rows = every_row() ? n : 1, row = every_row() ? i : 0;
  const int64_t first_masked = rows - static_cast<int64_t>(masks.size());
  if (row >= first_masked && row < rows) spec.mask = &masks[row - first_masked];
  return spec;
}

namespace {
// EngineOptions::prefill_step_tokens, -1 resolved by the backend.
int64_t PrefillStepTokens(const EngineOptions& options, const model::Backend& backend) {
  return options.prefill_step_tokens >= 0 ? options.prefill_step_tokens
                                          : backend.PrefillStepTokens();
}
}  // namespace

// The public API under one mutex, and the step-loop thread: plan, run,
// apply, deliver. The sessions and requests are a RequestQueue
// (request_queue.h), the batching window a BatchWindow (batch_window.h),
// the forward a Runner (runner.h).
class Engine::Impl {
 public:
  Impl(std::unique_ptr<model::LlamaModel> model, const EngineOptions& options, int64_t max_context,
       std::function<void()> before_step)
      : model_(std::move(model)),
        options_(options),
        before_step_(std::move(before_step)),
        queue_(options, max_context, model_->options().kv_blocks, model_->options().kv_block_size,
               SchedulerLimits{
                   std::min(options.max_batch_tokens, model_->options().max_step_tokens),
                   model_->options().max_logit_rows, PrefillStepTokens(options, model_->backend())},
               std::random_device{}(), &submitted_) {
    if (options_.spill != nullptr && model_->backend().KvLayout() != model::kKvLayoutNone) {
      // Under the lock, before eviction frees the blocks (engine.h, "Spilling").
      queue_.SetEvictHook([this](const std::string& id, std::vector<int32_t> tokens,
                                 const std::vector<int32_t>& blocks) {
        const absl::Time start = absl::Now();
        snapshot::Snapshot s;
        s.layout = SnapshotLayout();
        s.tokens = std::move(tokens);
        const bool copied = ReadKv(blocks, &s).ok();
        spill_copy_time_ += absl::Now() - start;
        if (copied) options_.spill->Spill(id, std::move(s));
      });
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

  // Puts the step loop on `cpus` (EngineOptions::step_cpus).
  absl::Status PlaceLoop(const std::vector<int>& cpus) {
    return PinThread(loop_.native_handle(), cpus);
  }

  model::LlamaModel& model() { return *model_; }

  void Submit(AppendRequest request, AppendCallback done) {
    std::vector<Completion> completions;
    absl::Status s = RequestQueue::Validate(request, model_->config().vocab_size);
    if (s.ok()) {
      absl::MutexLock lock(&mu_);
      s = admitting_ && !stop_ ? queue_.Admit(request, done, &completions)
                               : absl::UnavailableError("the model server is shutting down");
    }
    if (!s.ok()) done(std::move(s));
    for (Completion& c : completions) c.done(std::move(c.result));
  }

  void Truncate(const std::string& id, int64_t n, StatusCallback done) {
    Deferred call;
    {
      absl::MutexLock lock(&mu_);
      call = queue_.Truncate(id, n, std::move(done));
    }
    if (call) call();
  }

  void Fork(const std::string& id, ForkCallback done) {
    Deferred call;
    {
      absl::MutexLock lock(&mu_);
      call = queue_.Fork(id, std::move(done));
    }
    if (call) call();
  }

  absl::Status Release(const std::string& id) {
    absl::MutexLock lock(&mu_);
    return queue_.Release(id);
  }

  std::vector<SessionInfo> ListSessions() const {
    absl::MutexLock lock(&mu_);
    return queue_.ListSessions(absl::Now());
  }

  EngineStats Stats() const {
    absl::MutexLock lock(&mu_);
    EngineStats s = queue_.Stats();
    s.running = running_;
    s.waiting = queue_.Queued() - running_;
    s.steps = steps_;
    s.step_time = step_time_;
    s.heartbeat = heartbeat_;
    s.spill_copy_time = spill_copy_time_;
    return s;
  }

  bool Holds(const std::string& id) const {
    absl::MutexLock lock(&mu_);
    return queue_.Holds(id);
  }

  void StopAdmission() {
    absl::MutexLock lock(&mu_);
    admitting_ = false;
  }

  snapshot::SnapshotLayout SnapshotLayout() const {
    snapshot::SnapshotLayout l;
    l.fingerprint = options_.model_fingerprint;
    auto code = [](model::KvType t) {
      return t == model::KvType::kF16   ? snapshot::kKvF16
             : t == model::KvType::kF32 ? snapshot::kKvF32
                                        : snapshot::kKvQ8_0;
    };
    l.kv_type =
        snapshot::KvTypeCode(code(model_->options().k_type()), code(model_->options().v_type()));
    // Backend::KvLayout's values are the snapshot's (kKvLayoutCpu == 1).
    l.kv_layout = static_cast<uint32_t>(model_->backend().KvLayout());
    l.block_size = static_cast<uint32_t>(model_->options().kv_block_size);
    l.layers = static_cast<uint32_t>(model_->config().block_count);
    l.kv_dim = static_cast<uint64_t>(model_->config().kv_dim());
    return l;
  }

  // The KV of s->tokens, held in `blocks`, copied into s->kv (s->layout set).
  // Under the lock, with no step writing those blocks.
  absl::Status ReadKv(const std::vector<int32_t>& blocks, snapshot::Snapshot* s) {
    const int64_t block_bytes = s->layout.block_bytes();
    const int64_t n = static_cast<int64_t>(s->tokens.size());
    s->kv.resize(blocks.size() * block_bytes);
    for (size_t i = 0; i < blocks.size(); ++i) {
      const int64_t positions = std::min<int64_t>(
          s->layout.block_size, n - static_cast<int64_t>(i) * s->layout.block_size);
      LLM_RETURN_IF_ERROR(model_->backend().ReadKvBlock(
          blocks[i], static_cast<int32_t>(positions),
          std::span<uint8_t>(reinterpret_cast<uint8_t*>(s->kv.data()) + i * block_bytes,
                             block_bytes)));
    }
    return absl::OkStatus();
  }

  // The caller's tokens of session `id` and their KV, copied on the loop.
  absl::StatusOr<snapshot::Snapshot> Export(const std::string& id) {
    snapshot::Snapshot s;
    s.layout = SnapshotLayout();
    absl::Status st = BetweenSteps([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      std::vector<int32_t> blocks;
      LLM_RETURN_IF_ERROR(queue_.ExportView(id, &s.tokens, &blocks));
      return ReadKv(blocks, &s);
    });
    if (!st.ok()) return st;
    return s;
  }

  // Whether session `id` should be asked of the spill store: there is one,
  // the engine does not hold the id, and this is not the step-loop thread
  // (an import waits for it).
  bool MaySpillHold(const std::string& id) const {
    if (options_.spill == nullptr || std::this_thread::get_id() == loop_.get_id()) return false;
    absl::MutexLock lock(&mu_);
    return !queue_.Holds(id);
  }

  // A new session from a decoded snapshot, its KV written on the loop.
  absl::StatusOr<ImportedSession> Import(snapshot::Snapshot s, const std::string& session_id) {
    const int64_t block_bytes = s.layout.block_bytes();
    ImportedSession out;
    out.num_tokens = static_cast<int64_t>(s.tokens.size());
    absl::Status st = BetweenSteps([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      absl::StatusOr<std::string> id = queue_.Import(
          std::move(s.tokens),
          [&](const std::vector<int32_t>& blocks) {
            for (size_t i = 0; i < blocks.size(); ++i) {
              LLM_RETURN_IF_ERROR(model_->backend().WriteKvBlock(
                  blocks[i], std::span<const uint8_t>(
                                 reinterpret_cast<const uint8_t*>(s.kv.data()) + i * block_bytes,
                                 block_bytes)));
            }
            return absl::OkStatus();
          },
          session_id);
      if (!id.ok()) return id.status();
      out.session_id = *std::move(id);
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

 private:
  // Runs `job` on the step-loop thread between steps, under the lock (the
  // only place where another call may touch the backend's KV), and waits
  // for it. UNAVAILABLE when shutting down.
  absl::Status BetweenSteps(absl::AnyInvocable<absl::Status()> job) {
    std::promise<absl::Status> done;
    std::future<absl::Status> result = done.get_future();
    {
      absl::MutexLock lock(&mu_);
      // Not admitting_: a snapshot still runs after StopAdmission (the
      // server saves its sessions then), until the engine stops.
      if (stop_) return absl::UnavailableError("the model server is shutting down");
      jobs_.push_back([job = std::move(job), &done]() mutable { done.set_value(job()); });
    }
    return result.get();
  }

  // Waits (at most a second) for work, then for the gather window.
  void AwaitWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || queue_.Queued() > 0 || !jobs_.empty();
    };
    mu_.AwaitWithTimeout(absl::Condition(&has_work), absl::Seconds(1));
    // Work is here: let the backend's threads wake while the step is built.
    if (!stop_ && queue_.Queued() > 0) model_->backend().Prewarm();
    // Gather window: wait a little for the rest of the last step's
    // sessions (batch_window.h).
    if (!stop_ && window_.ShouldGather(queue_.Queued())) {
      auto gathered = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || queue_.Queued() >= window_.gather_target();
      };
      mu_.AwaitWithTimeout(absl::Condition(&gathered), window_.gather_timeout());
    }
  }

  // Makes the completions' and deferred calls, on EngineOptions::
  // callback_cpus when set (the loop's CPU set for them, then step_cpus
  // again), so that a thread that one of them starts starts there.
  void Deliver(std::vector<Completion>* completions, std::vector<Deferred>* calls) {
    if (completions->empty() && calls->empty()) return;
    // Checked by Create: the kernel refuses neither set.
    const bool move = !options_.callback_cpus.empty();
    if (move) PinThisThread(options_.callback_cpus).IgnoreError();
    for (Completion& c : *completions) c.done(std::move(c.result));
    completions->clear();
    for (Deferred& call : *calls) call();
    calls->clear();
    if (move) PinThisThread(options_.step_cpus).IgnoreError();
  }

  // The step loop: plan, run, apply, deliver.
  void Loop() {
    // Named for operators (top -H).
    pthread_setname_np(pthread_self(), "llm-step");
    Runner runner(model_.get());
    StepPlan plan;
    std::vector<model::Logits> logits;
    std::vector<Completion> completions;
    std::vector<Deferred> calls;     // of the Truncates and Forks that waited for a step
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
        // Snapshot copies, between steps (before this one is planned).
        for (absl::AnyInvocable<void()>& job : jobs_) job();
        jobs_.clear();
        const absl::Time now = absl::Now();
        heartbeat_ = now;
        if (now - last_sweep > absl::Seconds(1)) {
          queue_.ExpireIdle(now, options_.session_ttl);
          last_sweep = now;
        }
        stopping = stop_;
        if (stopping) {
          queue_.EndAll(&completions);  // no Truncate or Fork waits: no step is planned
        } else {
          queue_.Plan(&plan, &completions);
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
        ++steps_;
        step_time_ += step_end - step_start;
        queue_.Apply(plan, status, logits, &completions, &calls);
        running_ = 0;
        window_.Ran(step_end - step_start, step_end, had_decode, queue_.Queued() > 0);
        spin_until = window_.spin_until();
        // Admissions up to now are queued or done; watch for later ones.
        submitted_seen = submitted_.load(std::memory_order_acquire);
      }
      Deliver(&completions, &calls);
    }
  }

  std::unique_ptr<model::LlamaModel> model_;
  const EngineOptions options_;
  const std::function<void()> before_step_;  // tests only (Engine::CreateWithStepHook)

  std::atomic<uint64_t> submitted_{0};  // requests admitted, ever (RequestQueue's)
  mutable absl::Mutex mu_;
  RequestQueue queue_ ABSL_GUARDED_BY(mu_);
  BatchWindow window_ ABSL_GUARDED_BY(mu_);
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;  // requests and guesses in the step
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration step_time_ ABSL_GUARDED_BY(mu_);
  absl::Time heartbeat_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration spill_copy_time_ ABSL_GUARDED_BY(mu_);  // the evict hook's
  // BetweenSteps's jobs, for the loop to run before it plans a step.
  std::vector<absl::AnyInvocable<void()>> jobs_ ABSL_GUARDED_BY(mu_);
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
  if (!options.callback_cpus.empty() && options.step_cpus.empty()) {
    return absl::InvalidArgumentError("engine options: callback_cpus needs step_cpus");
  }
  std::unique_ptr<Engine> e(new Engine);
  e->options_ = options;
  const int64_t model_context = model->config().context_length;
  e->max_context_ =
      options.max_context > 0 ? std::min(options.max_context, model_context) : model_context;
  e->impl_ =
      std::make_unique<Impl>(std::move(model), options, e->max_context_, std::move(before_step));
  // Placed by this thread; callback_cpus tried first, for Deliver.
  for (const std::vector<int>* cpus : {&options.callback_cpus, &options.step_cpus}) {
    if (cpus->empty()) continue;
    if (absl::Status s = e->impl_->PlaceLoop(*cpus); !s.ok()) return s;
  }
  return e;
}

Engine::~Engine() = default;

const model::ModelConfig& Engine::config() const { return impl_->model().config(); }

std::string Engine::backend_description() const { return impl_->model().backend().description(); }
int64_t Engine::prefill_step_tokens() const {
  return PrefillStepTokens(options_, impl_->model().backend());
}
std::string Engine::backend_name() const { return impl_->model().backend().name(); }

void Engine::Submit(AppendRequest request, AppendCallback done) {
  MaybeRestore(request.session_id);  // a miss is the request's NOT_FOUND
  impl_->Submit(std::move(request), std::move(done));
}

absl::Status Engine::Restore(const std::string& id) {
  absl::Status st;
  if (impl_->MaySpillHold(id)) {
    const int64_t max_bytes = snapshot::MaxEncodedBytes(snapshot_layout(), max_context_);
    absl::StatusOr<std::string> bytes = options_.spill->Take(id, max_bytes);
    st = bytes.status();
    if (bytes.ok()) {
      st = ImportSession(*bytes, id).status();
      options_.spill->Restored(id, st);
    }
  }
  if (impl_->Holds(id)) return absl::OkStatus();
  return absl::NotFoundError(StrCat("unknown or expired session \"", id, "\"",
                                    st.ok() || absl::IsNotFound(st) ? "" : ": ", st.message()));
}

void Engine::MaybeRestore(const std::string& id) {
  if (options_.spill != nullptr && !id.empty()) Restore(id).IgnoreError();
}

absl::StatusOr<AppendResult> Engine::Append(AppendRequest request) {
  std::promise<absl::StatusOr<AppendResult>> promise;
  std::future<absl::StatusOr<AppendResult>> future = promise.get_future();
  Submit(std::move(request),
         [&promise](absl::StatusOr<AppendResult> r) { promise.set_value(std::move(r)); });
  return future.get();
}

void Engine::TruncateAsync(const std::string& id, int64_t n, StatusCallback done) {
  MaybeRestore(id);
  impl_->Truncate(id, n, std::move(done));
}

absl::Status Engine::Truncate(const std::string& id, int64_t n) {
  std::promise<absl::Status> promise;
  std::future<absl::Status> future = promise.get_future();
  TruncateAsync(id, n, [&promise](absl::Status s) { promise.set_value(std::move(s)); });
  return future.get();
}

void Engine::ForkAsync(const std::string& id, ForkCallback done) {
  MaybeRestore(id);
  impl_->Fork(id, std::move(done));
}

absl::StatusOr<std::string> Engine::Fork(const std::string& id) {
  std::promise<absl::StatusOr<std::string>> promise;
  std::future<absl::StatusOr<std::string>> future = promise.get_future();
  ForkAsync(id, [&promise](absl::StatusOr<std::string> s) { promise.set_value(std::move(s)); });
  return future.get();
}
absl::Status Engine::Release(const std::string& id) {
  absl::Status st = impl_->Release(id);
  // A spilled session is released where it is.
  if (absl::IsNotFound(st) && options_.spill != nullptr && options_.spill->Forget(id)) {
    return absl::OkStatus();
  }
  return st;
}
std::vector<SessionInfo> Engine::ListSessions() const { return impl_->ListSessions(); }
EngineStats Engine::Stats() const {
  EngineStats s = impl_->Stats();
  if (options_.spill != nullptr) s.spill = options_.spill->Counts();
  return s;
}
void Engine::StopAdmission() { impl_->StopAdmission(); }

snapshot::SnapshotLayout Engine::snapshot_layout() const { return impl_->SnapshotLayout(); }
snapshot::DecodeLimits Engine::snapshot_limits() const {
  return {max_context_, config().vocab_size};
}

absl::StatusOr<std::string> Engine::ExportSession(const std::string& session_id, bool compress,
                                                  bool restore) {
  if (impl_->model().backend().KvLayout() == model::kKvLayoutNone) {
    return absl::UnimplementedError(
        StrCat("session snapshots need a backend that reads its KV cache (cpu); this one is ",
               backend_name()));
  }
  if (restore) MaybeRestore(session_id);
  LLM_ASSIGN_OR_RETURN(snapshot::Snapshot s, impl_->Export(session_id));
  return snapshot::Encode(s, compress);
}

absl::StatusOr<ImportedSession> Engine::ImportSession(std::string_view bytes,
                                                      const std::string& session_id) {
  if (impl_->model().backend().KvLayout() == model::kKvLayoutNone) {
    return absl::UnimplementedError(
        StrCat("session snapshots need a backend that writes its KV cache (cpu); this one is ",
               backend_name()));
  }
  LLM_ASSIGN_OR_RETURN(snapshot::Snapshot s,
                       snapshot::Decode(bytes, snapshot_layout(), snapshot_limits()));
  return impl_->Import(std::move(s), session_id);
}

}  // namespace llm::engine
