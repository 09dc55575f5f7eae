#include "client/generator.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "client/generate/stop_strings.h"
#include "client/generate/utf8_text.h"
#include "client/transport/async_call.h"
#include "client/transport/health.h"
#include "common/grpc/grpc_status.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "sampler/rng.h"

namespace llm::client {
namespace {

using ModelStream = internal::BidiStream<v1::DecodeTokenRequest, v1::DecodeTokenResponse>;
using TokenizerStream = internal::BidiStream<v1::DecodeStreamRequest, v1::DecodeStreamResponse>;

// Lost sessions rebuilt within one generation before giving up (a server that
// keeps losing the session has another problem).
constexpr int kMaxRebuildsPerCall = 4;
constexpr absl::Duration kCancelPoll = absl::Milliseconds(20);
constexpr absl::Duration kFirstBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
// Bytes of a DecodeRequest besides its packed ids (tags, lengths, pieces).
constexpr uint64_t kDecodeRequestOverhead = 16;
// Failed prefetch calls split in two before the rest is left to the per-id
// fetch (a .tiktoken vocabulary's gaps take a few dozen).
constexpr int kMaxPrefetchSplits = 256;

// `server_name`: the name to verify a TLS certificate against when
// options.tls_server_name is empty ("": the address's host).
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address,
                                          const std::shared_ptr<grpc::ChannelCredentials>& creds,
                                          const ClientOptions& options,
                                          const std::string& server_name = "") {
  grpc::ChannelArguments args;
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  } else if (!server_name.empty()) {
    args.SetSslTargetNameOverride(server_name);
  }
  // Loopback and cluster peers come back fast: retry connecting often.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(64 << 20);
  return CreateAuthChannel(address, creds, args, options.auth_token);
}

// A session-losing failure: the session is gone (NOT_FOUND) or the server
// went away or is restarting (UNAVAILABLE; a server shutting down cancels
// its streams, CANCELLED, which this client never causes on its own).
bool IsRecoverable(const absl::Status& s) {
  return absl::IsNotFound(s) || absl::IsUnavailable(s) || absl::IsCancelled(s);
}

absl::Status WithContext(const absl::Status& s, std::string_view what) {
  if (s.ok()) return s;
  return absl::Status(s.code(), StrCat(what, ": ", s.message()));
}

}  // namespace

absl::Status ValidateParams(const GenerateParams& params) {
  LLM_RETURN_IF_ERROR(sampler::Validate(params.sampling));
  if (params.max_tokens < 1) {
    return absl::InvalidArgumentError(StrCat("max_tokens must be >= 1, got ", params.max_tokens));
  }
  return ValidateStopStrings(params.stop);
}

std::string_view StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kEos:
      return "eos";
    case StopReason::kStopString:
      return "stop";
    case StopReason::kMaxTokens:
      return "length";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kContext:
      return "context";
  }
  return "unknown";
}

double GenerateResult::tokens_per_second() const {
  const double seconds = absl::ToDoubleSeconds(decode_time);
  if (tokens.size() < 2 || seconds <= 0) return 0.0;
  return static_cast<double>(tokens.size() - 1) / seconds;
}

Generator::Generator(const ClientOptions& options) : options_(options) {}
Generator::~Generator() = default;

absl::StatusOr<std::unique_ptr<Generator>> Generator::Connect(const ClientOptions& options) {
  std::unique_ptr<Generator> g(new Generator(options));
  LLM_RETURN_IF_ERROR(g->Init());
  return g;
}

std::unique_ptr<grpc::ClientContext> Generator::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  return context;
}

absl::Status Generator::Init() {
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      MakeChannelCredentials(options_.tls);
  if (!creds.ok()) return creds.status();
  tokenizer_channel_ = NewChannel(options_.tokenizer_address, *creds, options_);
  tokenizer_ = v1::Tokenizer::NewStub(tokenizer_channel_);
  ModelPoolOptions pool_options;
  pool_options.probe_timeout = std::min(options_.rpc_timeout, absl::Seconds(5));
  pool_options.refresh_interval = options_.model_refresh_interval;
  absl::StatusOr<std::unique_ptr<ModelPool>> pool = ModelPool::Create(
      options_.model_address,
      [this, creds = *creds](const std::string& address, const std::string& server_name) {
        return NewChannel(address, creds, options_, server_name);
      },
      pool_options);
  if (!pool.ok()) return pool.status();
  pool_ = std::move(*pool);

  // Retries `attempt()` every 200 ms while `loading()` says the service is
  // up but still loading and ready_timeout has not run out, reporting to
  // on_wait. Returns the last attempt's status, or DEADLINE_EXCEEDED ("the
  // model service at ADDR is still loading after 2m") with *still_loading set
  // when the time ran out.
  const auto wait_ready = [&](std::string_view name, const std::string& address,
                              const std::function<absl::Status()>& attempt,
                              const std::function<bool()>& loading, bool* still_loading) {
    const absl::Time start = absl::Now();
    const absl::Time give_up = start + options_.ready_timeout;
    bool waited = false;
    absl::Status s;
    while (!(s = attempt()).ok() && loading() && absl::Now() < give_up) {
      waited = true;
      if (options_.on_wait) {
        options_.on_wait({name, address, absl::Now() - start, options_.ready_timeout, false});
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    *still_loading = !s.ok() && loading();
    if (waited && options_.on_wait) {
      options_.on_wait({name, address, absl::Now() - start, options_.ready_timeout, true});
    }
    if (*still_loading) {
      return absl::DeadlineExceededError(StrCat("the ", name, " service at ", address,
                                                " is still loading after ",
                                                absl::FormatDuration(options_.ready_timeout)));
    }
    return s;
  };
  const absl::Duration probe_timeout = std::min(options_.rpc_timeout, absl::Seconds(5));

  {  // The tokenizer.
    grpc::Status last;
    bool still_loading = false;
    const absl::Status s = wait_ready(
        "tokenizer", options_.tokenizer_address,
        [&] {
          auto context = NewContext();
          last = tokenizer_->Info(context.get(), v1::InfoRequest(), &tokenizer_info_);
          return FromGrpcStatus(last);
        },
        [&] {
          return last.error_code() == grpc::StatusCode::UNAVAILABLE &&
                 tokenizer_channel_->GetState(false) == GRPC_CHANNEL_READY;
        },
        &still_loading);
    if (still_loading) return s;
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      return absl::UnavailableError(StrCat("cannot reach the tokenizer service at ",
                                           options_.tokenizer_address, ": ", s.message()));
    }
    if (absl::IsUnimplemented(s)) {  // another service at this address
      return absl::UnimplementedError(
          StrCat("tokenizer service at ", options_.tokenizer_address, ": ",
                 WrongServiceMessage(tokenizer_channel_, Service::kTokenizer, probe_timeout)));
    }
    if (!s.ok()) {
      return absl::Status(
          s.code(), StrCat("tokenizer service at ", options_.tokenizer_address, ": ", s.message()));
    }
  }
  {  // The model replicas: wait for one that is loading.
    bool still_loading = false;
    const absl::Status s = wait_ready(
        "model", options_.model_address, [&] { return pool_->Refresh(); },
        [&] { return pool_->any_loading(); }, &still_loading);
    if (still_loading) return s;
    if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
      std::string why(s.message());
      const std::string redundant =
          StrCat("no model server is up at ", options_.model_address, ": ");
      if (why.rfind(redundant, 0) == 0) why.erase(0, redundant.size());
      return absl::UnavailableError(
          StrCat("cannot reach the model service at ", options_.model_address, ": ", why));
    }
    LLM_RETURN_IF_ERROR(s);  // the replicas refused us: their own code and message
    model_info_ = pool_->info();
  }
  if (tokenizer_info_.vocab_size() > model_info_.vocab_size()) {
    return absl::FailedPreconditionError(
        StrCat("the tokenizer at ", options_.tokenizer_address, " has ",
               tokenizer_info_.vocab_size(), " tokens but the model at ", options_.model_address,
               " only ", model_info_.vocab_size(), ": not the same vocabulary"));
  }
  if (tokenizer_info_.has_eos_id())
    end_ids_.push_back(static_cast<int32_t>(tokenizer_info_.eos_id()));
  if (tokenizer_info_.has_eot_id() &&
      std::find(end_ids_.begin(), end_ids_.end(), tokenizer_info_.eot_id()) == end_ids_.end()) {
    end_ids_.push_back(static_cast<int32_t>(tokenizer_info_.eot_id()));
  }
  token_bytes_ = std::make_unique<TokenBytesCache>([this](int32_t id) {
    const int32_t ids[] = {id};
    return Decode(ids);
  });
  if (options_.detokenize == ClientOptions::Detokenize::kCachedDecode) PrefetchTokenBytes();
  return absl::OkStatus();
}

void Generator::PrefetchTokenBytes() {
  const uint32_t n = tokenizer_info_.vocab_size();
  if (n == 0 || n > static_cast<uint32_t>(std::numeric_limits<int32_t>::max())) return;
  // Ids per call within the server's request limit (gRPC's default 4 MiB
  // when Info does not say): each packed id takes as many bytes as the
  // largest one, plus a few bytes of tags and lengths.
  const uint64_t max_request = tokenizer_info_.max_request_bytes() > 0
                                   ? tokenizer_info_.max_request_bytes()
                                   : uint64_t{4} << 20;
  uint64_t bytes_per_id = 1;
  for (uint64_t v = n - 1; v >= 0x80; v >>= 7) ++bytes_per_id;
  const uint32_t per_call = static_cast<uint32_t>(std::clamp<uint64_t>(
      (max_request - std::min<uint64_t>(max_request, kDecodeRequestOverhead)) / bytes_per_id, 1,
      n));
  // Ranges [begin, end) still to fetch, the lowest last (taken first).
  std::vector<std::pair<uint32_t, uint32_t>> todo;
  for (uint32_t end = n; end > 0;) {
    const uint32_t begin = end - std::min(end, per_call);
    todo.emplace_back(begin, end);
    end = begin;
  }
  int splits = 0;
  while (!todo.empty()) {
    const auto [begin, end] = todo.back();
    todo.pop_back();
    v1::DecodeRequest request;
    request.mutable_ids()->Reserve(static_cast<int>(end - begin));
    for (uint32_t id = begin; id < end; ++id) request.add_ids(id);
    request.set_pieces(true);
    v1::DecodeResponse response;
    auto context = NewContext();
    const grpc::Status s = tokenizer_->Decode(context.get(), request, &response);
    if (s.ok()) {
      // Fewer pieces than ids: a server that predates pieces (it answered text).
      if (response.pieces_size() != static_cast<int>(end - begin)) return;
      std::vector<std::string> pieces;
      pieces.reserve(end - begin);
      for (std::string& piece : *response.mutable_pieces()) pieces.push_back(std::move(piece));
      if (!token_bytes_->Preload(static_cast<int32_t>(begin), pieces).ok()) return;
      continue;
    }
    // An id that names no token (the gaps of a .tiktoken vocabulary), or an
    // answer over a size limit: halve the range, down to single ids. A bad
    // single id is left out (its per-id fetch fails as it always did), and so
    // is a failing range once kMaxPrefetchSplits halvings are spent.
    if (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT &&
        s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) {
      return;
    }
    if (end - begin == 1 || splits >= kMaxPrefetchSplits) continue;
    ++splits;
    const uint32_t mid = begin + (end - begin) / 2;
    todo.emplace_back(mid, end);
    todo.emplace_back(begin, mid);
  }
}

absl::StatusOr<std::vector<int32_t>> Generator::Encode(std::string_view text,
                                                       const EncodeOptions& options) {
  v1::EncodeRequest request;
  request.set_text(std::string(text));
  request.mutable_options()->set_allow_all_special(options.allow_special);
  request.mutable_options()->set_add_bos(options.add_bos && tokenizer_info_.has_bos_id());
  v1::EncodeResponse response;
  auto context = NewContext();
  const grpc::Status s = tokenizer_->Encode(context.get(), request, &response);
  if (!s.ok()) {
    return WithContext(FromGrpcStatus(s),
                       StrCat("tokenizer service at ", options_.tokenizer_address));
  }
  return std::vector<int32_t>(response.ids().begin(), response.ids().end());
}

absl::StatusOr<std::string> Generator::Decode(std::span<const int32_t> ids) {
  v1::DecodeRequest request;
  for (int32_t id : ids) request.add_ids(static_cast<uint32_t>(id));
  v1::DecodeResponse response;
  auto context = NewContext();
  const grpc::Status s = tokenizer_->Decode(context.get(), request, &response);
  if (!s.ok()) {
    return WithContext(FromGrpcStatus(s),
                       StrCat("tokenizer service at ", options_.tokenizer_address));
  }
  return response.text();
}

absl::Status Generator::Release(Session& session) {
  absl::Status result;
  // A session whose replica is gone is released already.
  absl::StatusOr<ModelPool::Endpoint*> owner =
      session.id.empty() ? absl::NotFoundError("") : pool_->ForSession(session.id);
  if (owner.ok()) {
    v1::ReleaseRequest request;
    request.set_session_id(session.id);
    v1::ReleaseResponse response;
    auto context = NewContext();
    const grpc::Status s = (*owner)->stub->Release(context.get(), request, &response);
    if (!s.ok() && s.error_code() != grpc::StatusCode::NOT_FOUND) {
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE) {
        pool_->MarkDown(*owner, FromGrpcStatus(s));
      }
      result = WithContext(FromGrpcStatus(s), StrCat("model service at ", (*owner)->address));
    }
  }
  session = Session();
  return result;
}

absl::StatusOr<v1::ListSessionsResponse> Generator::ListSessions() {
  v1::ListSessionsResponse all;
  for (const auto& e : pool_->endpoints()) {
    if (!e->up) continue;
    v1::ListSessionsResponse response;
    auto context = NewContext();
    const grpc::Status s =
        e->stub->ListSessions(context.get(), v1::ListSessionsRequest(), &response);
    if (!s.ok()) {
      return WithContext(FromGrpcStatus(s), StrCat("model service at ", e->address));
    }
    for (v1::SessionInfo& info : *response.mutable_sessions()) {
      *all.add_sessions() = std::move(info);
    }
  }
  return all;
}

grpc::Status Generator::PrefillOnce(const v1::PrefillRequest& request,
                                    v1::PrefillResponse* response) {
  absl::StatusOr<ModelPool::Endpoint*> endpoint = request.session_id().empty()
                                                      ? pool_->ForNewSession()
                                                      : pool_->ForSession(request.session_id());
  if (!endpoint.ok()) return ToGrpcStatus(endpoint.status());
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  grpc::CompletionQueue queue;
  grpc::Status status;
  {
    auto call = (*endpoint)->stub->PrepareAsyncPrefill(&context, request, &queue);
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
      if (!cancelled && cancel_requested()) {
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
  if (status.ok() && request.session_id().empty()) {
    pool_->Learned(*endpoint, response->session_id());
  } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
             (status.error_code() == grpc::StatusCode::CANCELLED && !cancel_requested())) {
    // Gone, or cancelled by the server (its drain ran out): either way the
    // replica no longer serves this session.
    pool_->MarkDown(*endpoint, FromGrpcStatus(status));
  }
  return status;
}

absl::StatusOr<v1::PrefillResponse> Generator::PrefillWithRecovery(Session& session,
                                                                   std::span<const int32_t> tokens,
                                                                   const v1::LogitsOptions& logits,
                                                                   bool lookahead,
                                                                   int32_t* rebuilds) {
  const absl::Time give_up = absl::Now() + options_.reconnect_timeout;
  absl::Duration backoff = kFirstBackoff;
  int lost = 0;
  int new_session_refusals = 0;
  while (true) {
    v1::PrefillRequest request;
    request.set_session_id(session.id);
    if (session.id.empty()) {  // a new session: the whole history
      request.mutable_tokens()->Add(session.tokens.begin(), session.tokens.end());
    }
    request.mutable_tokens()->Add(tokens.begin(), tokens.end());
    *request.mutable_logits() = logits;
    request.set_lookahead(lookahead);
    v1::PrefillResponse response;
    const grpc::Status s = PrefillOnce(request, &response);
    if (s.ok()) {
      session.id = response.session_id();
      session.tokens.insert(session.tokens.end(), tokens.begin(), tokens.end());
      return response;
    }
    if (cancel_requested() && s.error_code() == grpc::StatusCode::CANCELLED) {
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
        lost < kMaxRebuildsPerCall) {
      session.id.clear();
      ++lost;
      ++*rebuilds;
      continue;
    }
    // No replica took the new session: another may (the one that refused is
    // marked down), or after a while.
    if (replica_gone && absl::Now() + backoff < give_up && !cancel_requested()) {
      if (++new_session_refusals % static_cast<int>(pool_->endpoints().size() + 1) == 0) {
        absl::SleepFor(backoff);
        backoff = std::min(backoff * 2, kMaxBackoff);
      }
      continue;
    }
    return WithContext(FromGrpcStatus(s), StrCat("model service at ", options_.model_address));
  }
}

// One generation: the state shared by its steps.
class Generator::Run {
 public:
  Run(Generator& g, Session& session, const GenerateParams& params, const TokenCallback& on_token)
      : g_(g), session_(session), params_(params), on_token_(on_token), matcher_(params.stop) {}

  absl::StatusOr<GenerateResult> Go(std::span<const int32_t> new_tokens);

 private:
  std::string TokenizerWhat() const {
    return StrCat("tokenizer service at ", g_.options_.tokenizer_address);
  }
  absl::Time StreamDeadline() const {
    return absl::Now() + g_.options_.rpc_timeout * (static_cast<int64_t>(params_.max_tokens) + 2);
  }
  // Whether the request that follows the tokens generated so far may set
  // lookahead: the next token is the argmax of its logits, and another
  // request will follow that token (it is not the last).
  bool Lookahead() const {
    return g_.options_.lookahead && sampler::PicksArgmax(params_.sampling) &&
           static_cast<int64_t>(result_.tokens.size()) + 1 < params_.max_tokens;
  }
  bool IsEnd(int32_t id) const {
    return std::find(g_.end_ids_.begin(), g_.end_ids_.end(), id) != g_.end_ids_.end();
  }
  // Whether the model session is full: one more token would grow it past
  // ModelInfo.context_length (0: not known; then the OUT_OF_RANGE of the
  // step that overflows tells, AwaitStep).
  bool ContextFull() const {
    const int64_t n = g_.model_info_.context_length();
    return n > 0 && static_cast<int64_t>(session_.tokens.size()) >= n;
  }

  // Sends `token` on the model stream (opening it if needed) and starts
  // reading its logits. A failure is left for AwaitStep to handle.
  void SendStep(int32_t token);
  // Completes the step of `token`: on success the token joins the session
  // and, when need_logits, its logits are decoded. A lost session is rebuilt
  // (when need_logits) or left for the next call to rebuild.
  absl::Status AwaitStep(int32_t token, bool need_logits);
  // Detokenizes one token: the complete UTF-8 text it adds.
  absl::StatusOr<std::string> Detokenize(int32_t token);
  // Ends both streams; returns the tokenizer's held bytes, sanitized.
  absl::StatusOr<std::string> CloseStreams();
  void Emit(std::string_view text, int32_t token, float logprob);

  Generator& g_;
  Session& session_;
  const GenerateParams& params_;
  const TokenCallback& on_token_;
  StopStringMatcher matcher_;
  GenerateResult result_;
  DecodedLogits logits_;
  std::unique_ptr<ModelStream> model_stream_;
  ModelPool::Endpoint* stream_endpoint_ = nullptr;     // model_stream_'s replica
  absl::Status send_error_;                            // a failed SendStep, reported by AwaitStep
  bool context_ended_ = false;                         // a step answered OUT_OF_RANGE
  std::unique_ptr<TokenizerStream> tokenizer_stream_;  // kDecodeStream
  std::optional<Detokenizer> detokenizer_;             // kCachedDecode
};

void Generator::Run::Emit(std::string_view text, int32_t token, float logprob) {
  result_.text.append(text);
  if (on_token_) on_token_(TokenEvent{text, token, logprob});
}

void Generator::Run::SendStep(int32_t token) {
  send_error_ = absl::OkStatus();
  if (model_stream_ == nullptr) {  // to the session's replica
    absl::StatusOr<ModelPool::Endpoint*> owner = g_.pool_->ForSession(session_.id);
    if (!owner.ok()) {
      send_error_ = owner.status();  // lost: AwaitStep rebuilds it
      return;
    }
    stream_endpoint_ = *owner;
    model_stream_ =
        std::make_unique<ModelStream>(StrCat("model service at ", stream_endpoint_->address),
                                      g_.options_.rpc_timeout, StreamDeadline());
    send_error_ = model_stream_->Start([&](grpc::ClientContext* c, grpc::CompletionQueue* q) {
      return stream_endpoint_->stub->PrepareAsyncDecodeStream(c, q);
    });
    if (!send_error_.ok()) return;
  }
  v1::DecodeTokenRequest request;
  request.set_session_id(session_.id);
  request.set_token(token);
  *request.mutable_logits() = result_.logits;
  request.set_lookahead(Lookahead());
  send_error_ = model_stream_->Write(request);
  if (send_error_.ok()) model_stream_->StartRead();
}

absl::Status Generator::Run::AwaitStep(int32_t token, bool need_logits) {
  absl::Status s = send_error_;
  if (s.ok()) s = model_stream_->AwaitRead();
  if (s.ok()) {
    session_.tokens.push_back(token);
    if (!need_logits) return absl::OkStatus();
    return logits_.Decode(model_stream_->response().logits(), g_.model_info_.vocab_size());
  }
  model_stream_.reset();  // finished (or aborted by the destructor)
  if (absl::IsOutOfRange(s)) {
    // The session is full (its replica's context is shorter than Info said,
    // or Info said none): the end of the generation, not a failure. The
    // token was not fed.
    stream_endpoint_ = nullptr;
    session_.pending.push_back(token);
    context_ended_ = true;
    return absl::OkStatus();
  }
  // Its replica went away or is shutting down (it cancels streams then).
  if (stream_endpoint_ != nullptr && (absl::IsUnavailable(s) || absl::IsCancelled(s))) {
    g_.pool_->MarkDown(stream_endpoint_, s);
  }
  stream_endpoint_ = nullptr;
  if (!IsRecoverable(s) || result_.session_rebuilds >= kMaxRebuildsPerCall) {
    session_.pending.push_back(token);
    session_.unsynced = !session_.id.empty();
    return s;
  }
  // The session is lost, or may be half-updated on a server that came back:
  // drop it (best effort) and rebuild from the history.
  if (!absl::IsNotFound(s)) {
    Session old;
    old.id = session_.id;
    g_.Release(old).IgnoreError();
  }
  session_.id.clear();
  if (!need_logits) {
    session_.pending.push_back(token);  // the next call rebuilds
    return absl::OkStatus();
  }
  ++result_.session_rebuilds;
  const int32_t one[] = {token};
  LLM_ASSIGN_OR_RETURN(v1::PrefillResponse response,
                       g_.PrefillWithRecovery(session_, one, result_.logits, Lookahead(),
                                              &result_.session_rebuilds));
  return logits_.Decode(response.logits(), g_.model_info_.vocab_size());
}

absl::StatusOr<std::string> Generator::Run::Detokenize(int32_t token) {
  if (g_.options_.detokenize == ClientOptions::Detokenize::kCachedDecode) {
    if (!detokenizer_) detokenizer_.emplace(*g_.token_bytes_);
    return detokenizer_->Add(token);
  }
  if (tokenizer_stream_ == nullptr) {
    tokenizer_stream_ = std::make_unique<TokenizerStream>(TokenizerWhat(), g_.options_.rpc_timeout,
                                                          StreamDeadline());
    LLM_RETURN_IF_ERROR(
        tokenizer_stream_->Start([&](grpc::ClientContext* c, grpc::CompletionQueue* q) {
          return g_.tokenizer_->PrepareAsyncDecodeStream(c, q);
        }));
  }
  v1::DecodeStreamRequest request;
  request.add_ids(static_cast<uint32_t>(token));
  LLM_RETURN_IF_ERROR(tokenizer_stream_->Write(request));
  tokenizer_stream_->StartRead();
  LLM_RETURN_IF_ERROR(tokenizer_stream_->AwaitRead());
  return SanitizeUtf8(tokenizer_stream_->response().text());
}

absl::StatusOr<std::string> Generator::Run::CloseStreams() {
  std::string held;
  absl::Status model_status;
  if (model_stream_ != nullptr) model_status = model_stream_->Close();
  model_stream_.reset();
  if (tokenizer_stream_ != nullptr) {
    LLM_RETURN_IF_ERROR(
        tokenizer_stream_->Close([&](const v1::DecodeStreamResponse& r) { held += r.text(); }));
    tokenizer_stream_.reset();
  }
  if (detokenizer_) held += detokenizer_->Flush();
  // The model stream had no step in flight: its close status is informative only.
  (void)model_status;
  return SanitizeUtf8(held);
}

absl::StatusOr<GenerateResult> Generator::Run::Go(std::span<const int32_t> new_tokens) {
  const absl::Time start = absl::Now();
  result_.logits =
      ChooseLogitsOptions(g_.options_.logits, params_.sampling, g_.model_info_.vocab_size());
  if (session_.unsynced) {  // a cancelled call left the model's length unknown
    Session old;
    old.id = session_.id;
    g_.Release(old).IgnoreError();
    session_.id.clear();
    session_.unsynced = false;
  }
  std::vector<int32_t> append = session_.pending;
  append.insert(append.end(), new_tokens.begin(), new_tokens.end());
  if (append.empty()) return absl::InvalidArgumentError("nothing to prefill: no new tokens");
  LLM_ASSIGN_OR_RETURN(v1::PrefillResponse prefill,
                       g_.PrefillWithRecovery(session_, append, result_.logits, Lookahead(),
                                              &result_.session_rebuilds));
  session_.pending.clear();
  result_.prompt_tokens = static_cast<int64_t>(append.size());
  LLM_RETURN_IF_ERROR(logits_.Decode(prefill.logits(), g_.model_info_.vocab_size()));

  std::vector<int32_t> history = session_.tokens;  // for the penalties
  sampler::Rng rng(params_.sampling.seed);
  absl::Time first_token, last_token;
  std::optional<StopReason> stop;
  while (!stop) {
    absl::StatusOr<sampler::Sample> sample =
        g_.sampler_.SampleToken(logits_.input(), params_.sampling, history, rng);
    if (!sample.ok()) {
      CloseStreams().IgnoreError();
      return sample.status();
    }
    if (!sample->exact) ++result_.inexact_samples;
    const int32_t token = sample->id;
    if (!params_.ignore_eos && IsEnd(token)) {
      stop = StopReason::kEos;
      break;
    }
    last_token = absl::Now();
    if (result_.tokens.empty()) {
      first_token = last_token;
      result_.time_to_first_token = first_token - start;
    }
    result_.tokens.push_back(token);
    history.push_back(token);
    const bool last = static_cast<int32_t>(result_.tokens.size()) >= params_.max_tokens;
    // No room in the model session for this token: it is the last one.
    const bool full = ContextFull();
    // The model computes the next logits while the token is detokenized.
    if (!last && !full) SendStep(token);
    absl::StatusOr<std::string> text = Detokenize(token);
    if (!text.ok()) {
      if (!last && !full) AwaitStep(token, /*need_logits=*/false).IgnoreError();
      CloseStreams().IgnoreError();
      return text.status();
    }
    const StopStringMatcher::Step step = matcher_.Feed(*text);
    Emit(step.released, token, sample->logprob);
    if (step.stopped) {
      stop = StopReason::kStopString;
    } else if (last) {
      stop = StopReason::kMaxTokens;
    } else if (full) {
      stop = StopReason::kContext;
    } else if (g_.cancel_requested()) {
      stop = StopReason::kCancelled;
    }
    if (last || full) {
      session_.pending.push_back(token);  // sampled, never fed
    } else {
      absl::Status s = AwaitStep(token, /*need_logits=*/!stop.has_value());
      if (!s.ok()) {
        CloseStreams().IgnoreError();
        return s;
      }
      if (context_ended_ && !stop) stop = StopReason::kContext;
    }
  }
  if (!result_.tokens.empty()) result_.decode_time = last_token - first_token;
  result_.stop_reason = *stop;
  absl::StatusOr<std::string> held = CloseStreams();
  if (!held.ok()) return held.status();
  if (*stop != StopReason::kStopString) {
    std::string tail = matcher_.Feed(*held).released;
    if (matcher_.stopped()) {
      result_.stop_reason = StopReason::kStopString;
    } else {
      tail += matcher_.Finish();
    }
    if (!tail.empty()) Emit(tail, -1, 0.0f);
  }
  return std::move(result_);
}

absl::StatusOr<GenerateResult> Generator::Generate(Session& session,
                                                   std::span<const int32_t> new_tokens,
                                                   const GenerateParams& params,
                                                   const TokenCallback& on_token) {
  LLM_RETURN_IF_ERROR(ValidateParams(params));
  Run run(*this, session, params, on_token);
  return run.Go(new_tokens);
}

}  // namespace llm::client
