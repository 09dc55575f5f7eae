#include "client/transport/model_client.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/time/clock.h"
#include "client/transport/connect.h"
#include "client/transport/decode_steps.h"
#include "common/grpc/grpc_status.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "common/token_mask_proto.h"

namespace llm::client {
namespace {

using internal::WithContext;

constexpr absl::Duration kCancelPoll = absl::Milliseconds(20);
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);

}  // namespace

ModelClient::ModelClient(const ClientOptions& options, std::unique_ptr<ModelPool> pool)
    : options_(options), pool_(std::move(pool)) {}

absl::StatusOr<std::unique_ptr<ModelClient>> ModelClient::Create(
    const ClientOptions& options, const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  ModelPoolOptions pool_options;
  pool_options.probe_timeout = std::min(options.rpc_timeout, absl::Seconds(5));
  pool_options.refresh_interval = options.model_refresh_interval;
  LLM_ASSIGN_OR_RETURN(
      std::unique_ptr<ModelPool> pool,
      ModelPool::Create(
          options.model_address,
          [options, creds](const std::string& address, const std::string& server_name) {
            return internal::NewChannel(address, creds, options, server_name);
          },
          pool_options));
  return std::unique_ptr<ModelClient>(new ModelClient(options, std::move(pool)));
}

absl::Status ModelClient::Connect() {
  const std::string& address = options_.model_address;
  bool still_loading = false;
  const absl::Status s = internal::WaitReady(
      options_, "model", address, [&] { return pool_->Refresh(); },
      [&] { return pool_->any_loading(); }, &still_loading);
  if (still_loading) return s;
  if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
    std::string why(s.message());
    const std::string redundant = StrCat("no model server is up at ", address, ": ");
    if (why.rfind(redundant, 0) == 0) why.erase(0, redundant.size());
    return absl::UnavailableError(StrCat("cannot reach the model service at ", address, ": ", why));
  }
  LLM_RETURN_IF_ERROR(s);  // the replicas refused us: their own code and message
  info_ = pool_->info();
  return absl::OkStatus();
}

absl::StatusOr<ModelPool::Endpoint*> ModelClient::Owner(const Session& session) {
  if (session.id.empty()) return absl::NotFoundError("no model session yet");
  return session.named ? pool_->ForNamedSession(session.id) : pool_->ForSession(session.id);
}

absl::Status ModelClient::Release(Session& session) {
  absl::Status result;
  // A session whose replica is gone is released already; one that moved is
  // released where it went (a second try).
  for (int attempt = 0; attempt < 2 && !session.id.empty(); ++attempt) {
    absl::StatusOr<ModelPool::Endpoint*> owner = Owner(session);
    if (!owner.ok()) break;
    v1::ReleaseRequest request;
    request.set_session_id(session.id);
    v1::ReleaseResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    const grpc::Status s = pool_->Connect(*owner)->stub->Release(&context, request, &response);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND &&
        pool_->LearnLocation(session.id, context)) {
      continue;
    }
    if (!s.ok() && s.error_code() != grpc::StatusCode::NOT_FOUND) {
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
        pool_->MarkDown(*owner, FromGrpcStatus(s));
      }
      result = WithContext(FromGrpcStatus(s), StrCat("model service at ", (*owner)->address));
    }
    break;
  }
  pool_->Forget(session.id);
  session = Session();
  return result;
}

absl::StatusOr<std::string> ModelClient::ExportSession(const Session& session) {
  LLM_ASSIGN_OR_RETURN(ModelPool::Endpoint * owner, pool_->ForSession(session.id));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ExportSessionRequest request;
  request.set_session_id(session.id);
  auto reader = pool_->Connect(owner)->stub->ExportSession(&context, request);
  std::string bytes;
  v1::SessionChunk chunk;
  while (reader->Read(&chunk)) bytes += chunk.data();
  const grpc::Status s = reader->Finish();
  if (!s.ok()) return WithContext(FromGrpcStatus(s), StrCat("model service at ", owner->address));
  return bytes;
}

absl::StatusOr<std::string> ModelClient::ImportSession(const std::string& bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  LLM_ASSIGN_OR_RETURN(ModelPool::Endpoint * endpoint, pool_->ForNewSession());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  v1::ImportSessionResponse response;
  auto writer = pool_->Connect(endpoint)->stub->ImportSession(&context, &response);
  v1::SessionChunk chunk;
  for (size_t at = 0; at < bytes.size(); at += kChunk) {
    chunk.set_data(bytes.substr(at, kChunk));
    if (!writer->Write(chunk)) break;  // the server ended the call: Finish says why
  }
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  if (!s.ok()) {
    return WithContext(FromGrpcStatus(s), StrCat("model service at ", endpoint->address));
  }
  pool_->Learned(endpoint, response.session_id());
  return response.session_id();
}

bool ModelClient::Relocate(Session& session) {
  if (session.id.empty() || !pool_->Locate(session.id).ok()) return false;
  session.overhang = true;  // roll back what a step cut short may have added
  session.unsynced = false;
  ++session.relocations;
  return true;
}

absl::Status ModelClient::Truncate(Session& session, int64_t n) {
  if (n < 0 || n > static_cast<int64_t>(session.tokens.size())) {
    return absl::InvalidArgumentError(
        StrCat("cannot truncate a session of ", session.tokens.size(), " tokens to ", n));
  }
  if (session.named) {  // the next Prefill's sync_history rolls the model back
    session.unsynced = false;
    session.overhang = false;
    session.tokens.resize(static_cast<size_t>(n));
    session.pending.clear();
    return absl::OkStatus();
  }
  if (session.unsynced && !session.id.empty()) {  // its length on the server is unknown
    Session old;
    old.id = session.id;
    Release(old).IgnoreError();
    session.id.clear();
  }
  absl::StatusOr<ModelPool::Endpoint*> owner = Owner(session);
  if (owner.ok()) {
    v1::TruncateRequest request;
    request.set_session_id(session.id);
    request.set_num_tokens(n);
    v1::TruncateResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    const grpc::Status s = pool_->Connect(*owner)->stub->Truncate(&context, request, &response);
    if (!s.ok()) {
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
        pool_->MarkDown(*owner, FromGrpcStatus(s));
      }
      if (s.error_code() != grpc::StatusCode::NOT_FOUND &&
          s.error_code() != grpc::StatusCode::UNAVAILABLE) {
        return WithContext(FromGrpcStatus(s), StrCat("model service at ", (*owner)->address));
      }
      session.id.clear();  // lost: the next Prefill rebuilds it
    }
  } else {
    session.id.clear();
  }
  session.unsynced = false;
  session.overhang = false;
  session.tokens.resize(static_cast<size_t>(n));
  session.pending.clear();
  return absl::OkStatus();
}

absl::StatusOr<v1::ListSessionsResponse> ModelClient::ListSessions() {
  v1::ListSessionsResponse all;
  for (ModelPool::Endpoint* e : pool_->UpEndpoints()) {
    v1::ListSessionsResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    const grpc::Status s =
        pool_->Connect(e)->stub->ListSessions(&context, v1::ListSessionsRequest(), &response);
    if (!s.ok()) {
      return WithContext(FromGrpcStatus(s), StrCat("model service at ", e->address));
    }
    for (v1::SessionInfo& info : *response.mutable_sessions()) {
      *all.add_sessions() = std::move(info);
    }
  }
  return all;
}

std::unique_ptr<DecodeSteps> ModelClient::OpenSteps(const Session& session, int32_t max_steps) {
  return internal::NewDecodeSteps(
      *pool_, session.id, session.named, options_.rpc_timeout,
      absl::Now() + options_.rpc_timeout * (static_cast<int64_t>(max_steps) + 2));
}

grpc::Status ModelClient::PrefillOnce(const v1::PrefillRequest& request,
                                      v1::PrefillResponse* response,
                                      const std::atomic<bool>& cancel) {
  const std::span<const int32_t> prompt(request.tokens().data(),
                                        static_cast<size_t>(request.tokens_size()));
  absl::StatusOr<ModelPool::Endpoint*> endpoint =
      request.session_id().empty() ? pool_->ForNewSessionWithPrompt(prompt)
      : request.sync_history()     ? pool_->ForNamedSession(request.session_id())
                                   : pool_->ForSession(request.session_id());
  if (!endpoint.ok()) return ToGrpcStatus(endpoint.status());
  if (request.has_mask()) {
    if (absl::Status s = pool_->CheckAppliesTokenMasks(*endpoint); !s.ok()) return ToGrpcStatus(s);
  }
  const std::shared_ptr<const ModelPool::Connection> connection = pool_->Connect(*endpoint);
  (*endpoint)->in_flight.fetch_add(1, std::memory_order_relaxed);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  grpc::CompletionQueue queue;
  grpc::Status status;
  {
    auto call = connection->stub->PrepareAsyncPrefill(&context, request, &queue);
    call->StartCall();
    int tag = 0;
    call->Finish(response, &status, &tag);
    bool cancelled = false;
    while (true) {
      void* got = nullptr;
      bool ok = false;
      const auto r = queue.AsyncNext(&got, &ok, absl::ToChronoTime(absl::Now() + kCancelPoll));
      if (r == grpc::CompletionQueue::GOT_EVENT && got == &tag) break;
      if (r == grpc::CompletionQueue::SHUTDOWN) break;
      if (!cancelled && cancel.load(std::memory_order_relaxed)) {
        context.TryCancel();
        cancelled = true;
      }
    }
  }
  queue.Shutdown();
  void* tag;
  bool ok;
  while (queue.Next(&tag, &ok)) {
  }
  (*endpoint)->in_flight.fetch_sub(1, std::memory_order_relaxed);
  if (status.ok() && request.session_id().empty()) {
    pool_->Learned(*endpoint, response->session_id());
    pool_->PlacedPrompt(*endpoint, prompt);
  } else if (status.error_code() == grpc::StatusCode::NOT_FOUND &&
             !pool_->LearnLocation(request.session_id(), context)) {  // moved: where to
    pool_->Forget(request.session_id());                              // not there (any more)
  } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
             (status.error_code() == grpc::StatusCode::CANCELLED &&
              !cancel.load(std::memory_order_relaxed))) {
    // Gone, or cancelled by the server (its drain ran out): either way the
    // replica no longer serves this session.
    pool_->MarkDown(*endpoint, FromGrpcStatus(status));
  }
  return status;
}

absl::StatusOr<PrefillResult> ModelClient::Prefill(Session& session,
                                                   std::span<const int32_t> tokens,
                                                   const StepOptions& options,
                                                   const std::atomic<bool>& cancel,
                                                   int32_t* rebuilds) {
  const absl::Time give_up = absl::Now() + options_.reconnect_timeout;
  absl::Duration backoff = kFirstBackoff;
  int lost = 0;
  int relocations = 0;
  int new_session_refusals = 0;
  while (true) {
    v1::PrefillRequest request;
    request.set_session_id(session.id);
    if (session.named) {  // the whole history; the server keeps what it holds
      request.set_sync_history(true);
      request.mutable_tokens()->Add(session.tokens.begin(), session.tokens.end());
    } else if (session.id.empty()) {  // a new session: the whole history
      request.mutable_tokens()->Add(session.tokens.begin(), session.tokens.end());
    } else if (session.overhang) {  // rejected proposals: roll them back first
      request.set_truncate_to(static_cast<int64_t>(session.tokens.size()));
    }
    request.mutable_tokens()->Add(tokens.begin(), tokens.end());
    *request.mutable_logits() = options.logits;
    request.set_lookahead(options.lookahead);
    if (options.prompt_logprobs >= 0) {
      request.mutable_prompt_logprobs()->set_enabled(true);
      request.mutable_prompt_logprobs()->set_top_n(static_cast<uint32_t>(options.prompt_logprobs));
    }
    if (options.mask != nullptr) TokenMaskToProto(*options.mask, request.mutable_mask());
    v1::PrefillResponse response;
    const grpc::Status s = PrefillOnce(request, &response, cancel);
    // (0: not reported; a session holds a token at least after a Prefill.
    // A named session's sync_history reconciles its history itself.)
    const bool appended = !session.id.empty() && !session.named;
    if (s.ok() && appended && response.num_tokens() != 0 &&
        response.num_tokens() != static_cast<int64_t>(session.tokens.size() + tokens.size()) &&
        lost < kMaxRebuildsPerCall) {
      // The session holds another history than ours (its replica restored
      // it from an older checkpoint, --session_checkpoint_seconds): our
      // tokens went after the wrong ones. Drop it and rebuild.
      Session stale{.id = response.session_id()};
      Release(stale).IgnoreError();
      session.id.clear();
      session.overhang = false;
      ++lost;
      ++*rebuilds;
      continue;
    }
    if (s.ok()) {
      session.id = response.session_id();
      session.overhang = false;
      session.unsynced = false;  // a named session's sync; else it was not
      session.tokens.insert(session.tokens.end(), tokens.begin(), tokens.end());
      PrefillResult result;
      result.logits = std::move(*response.mutable_logits());
      result.cached_tokens = response.cached_tokens();
      result.kept_tokens = response.kept_tokens();
      if (options.prompt_logprobs >= 0) {
        // The scores of tokens[1..]: the last ones (a new session's history
        // comes first).
        auto& scores = *response.mutable_prompt_logprobs();
        const int wanted = std::min<int>(scores.size(), static_cast<int>(tokens.size()) - 1);
        result.prompt_logprobs.assign(std::make_move_iterator(scores.end() - std::max(wanted, 0)),
                                      std::make_move_iterator(scores.end()));
      }
      return result;
    }
    if (cancel.load(std::memory_order_relaxed) && s.error_code() == grpc::StatusCode::CANCELLED) {
      // The server may have appended some chunks: the length is unknown.
      session.unsynced = !session.id.empty();
      return absl::CancelledError("cancelled during the prefill");
    }
    // A lost session: gone from its replica (NOT_FOUND) or its replica gone
    // (UNAVAILABLE, or CANCELLED by a server whose drain ran out; marked
    // down by PrefillOnce): rebuild it from the history, on any replica.
    const bool replica_gone = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                              s.error_code() == grpc::StatusCode::CANCELLED;
    if ((s.error_code() == grpc::StatusCode::NOT_FOUND || replica_gone) && !session.id.empty() &&
        relocations < kMaxRebuildsPerCall && Relocate(session)) {
      ++relocations;  // it moved: go on there, no rebuild
      continue;
    }
    if ((s.error_code() == grpc::StatusCode::NOT_FOUND || replica_gone) && !session.id.empty() &&
        lost < kMaxRebuildsPerCall) {
      if (!session.named) session.id.clear();  // a name goes to its next replica
      ++lost;
      ++*rebuilds;
      continue;
    }
    // No replica took the new session: another may (the one that refused is
    // marked down), or after a while.
    if (replica_gone && absl::Now() + backoff < give_up &&
        !cancel.load(std::memory_order_relaxed)) {
      if (++new_session_refusals % static_cast<int>(pool_->size() + 1) == 0) {
        absl::SleepFor(backoff);
        backoff = std::min(backoff * 2, kMaxBackoff);
      }
      continue;
    }
    // A call the server refused before any work leaves the session as it
    // was; after a failure past that (a full KV pool, a deadline, a broken
    // step) it may hold part of `tokens`.
    if (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT &&
        s.error_code() != grpc::StatusCode::OUT_OF_RANGE &&
        s.error_code() != grpc::StatusCode::ABORTED &&
        s.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
      session.unsynced = !session.id.empty();
    }
    return WithContext(FromGrpcStatus(s), StrCat("model service at ", options_.model_address));
  }
}

}  // namespace llm::client
