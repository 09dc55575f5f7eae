#include "model_svc/server/model_service.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/request_log.h"
#include "common/strings.h"
#include "common/token_mask_proto.h"
#include "model_svc/engine/limits.h"
#include "model_svc/server/session_dir.h"
#include "model_svc/server/snapshot_rpc.h"

namespace llm {
namespace {

absl::Status Loading() {
  return absl::UnavailableError("the model is still loading; retry when the server is SERVING");
}

absl::Status Draining() {
  return absl::UnavailableError(
      "the server is draining (shutting down): start new sessions on another replica");
}

// The limit an engine status was refused by, as a metrics reason; "" if none.
// A context overflow is a prompt that does not fit when it comes from a
// Prefill (`prefill`), the context itself from a Decode.
std::string_view LimitReason(const absl::Status& status, bool prefill) {
  switch (engine::LimitOf(status)) {
    case engine::Limit::kMaxSessions:
      return "max_sessions";
    case engine::Limit::kKvCache:
      return "kv_cache";
    case engine::Limit::kContext:
      return prefill ? "prompt_tokens" : "context_length";
    case engine::Limit::kNone:
      break;
  }
  return "";
}

// The call's final status, counted in the metrics (with the engine limit
// that refused it, if any) and written to the call's log line (either may be
// null).
grpc::Status Counted(ModelMetrics* metrics, RequestLog* log, const absl::Status& status,
                     bool prefill = false) {
  if (metrics != nullptr) {
    metrics->CountStatus(status.code());
    if (std::string_view reason = LimitReason(status, prefill); !reason.empty()) {
      metrics->CountLimit(reason);
    }
  }
  if (log != nullptr) log->Finish(status);
  return ToGrpcStatus(status);
}

// A refusal by one of the service's own limits, counted under `reason`.
absl::Status OverLimit(ModelMetrics* metrics, std::string_view reason, absl::Status status) {
  if (metrics != nullptr) metrics->CountLimit(reason);
  return status;
}

// RESOURCE_EXHAUSTED (counted as message_size) for a request over `max_bytes`
// (0: no limit).
absl::Status CheckMessageSize(ModelMetrics* metrics, const google::protobuf::MessageLite& request,
                              int64_t max_bytes) {
  if (max_bytes <= 0) return absl::OkStatus();
  const size_t bytes = request.ByteSizeLong();
  if (bytes <= static_cast<size_t>(max_bytes)) return absl::OkStatus();
  return OverLimit(metrics, "message_size",
                   absl::ResourceExhaustedError(StrCat("the request has ", bytes,
                                                       " bytes, more than the server's limit of ",
                                                       max_bytes, " (--max_message_bytes)")));
}

// Counts itself in a counter for its lifetime; moves, never copies.
class CallCount {
 public:
  explicit CallCount(std::atomic<int64_t>* n)
      : n_(n), count_(n_->fetch_add(1, std::memory_order_acq_rel) + 1) {}
  // The count this call made (itself included): one atomic step, so two
  // calls arriving together see different counts.
  int64_t count() const { return count_; }
  CallCount(CallCount&& other) noexcept
      : n_(std::exchange(other.n_, nullptr)), count_(other.count_) {}
  CallCount& operator=(CallCount&&) = delete;
  ~CallCount() {
    if (n_ != nullptr) n_->fetch_sub(1, std::memory_order_acq_rel);
  }

 private:
  std::atomic<int64_t>* n_;
  int64_t count_;
};

grpc::ServerUnaryReactor* FinishNow(ModelMetrics* metrics, RequestLog* log,
                                    grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(Counted(metrics, log, status));
  return reactor;
}

// A session id as a request carries it: at most kMaxSessionIdBytes (never
// echoed whole: the status names its length only), and not empty where the
// call needs one.
absl::Status CheckSessionId(const std::string& id, bool required) {
  if (id.empty() && required) return absl::InvalidArgumentError("session_id is required");
  if (id.size() > kMaxSessionIdBytes) {
    return absl::InvalidArgumentError(StrCat("session_id has ", id.size(),
                                             " bytes, more than the limit of ", kMaxSessionIdBytes,
                                             " (ids this server issues are shorter)"));
  }
  return absl::OkStatus();
}

// A named session's id (PrefillRequest.sync_history): not empty, and a name
// --session_dir can store (session_dir.h's SessionFileName: 1 to 200
// letters, digits, '-', '_' and '.', not starting with '.').
absl::Status CheckSessionName(const std::string& id) {
  if (id.empty()) {
    return absl::InvalidArgumentError("sync_history needs session_id: the session's name");
  }
  if (absl::StatusOr<std::string> file = SessionFileName(id); !file.ok()) {
    return absl::InvalidArgumentError(
        StrCat("session_id of a named session (sync_history): ", file.status().message()));
  }
  return absl::OkStatus();
}

// The most bytes a response carrying `rows` rows of `spec`'s logits of a
// `vocab_size` vocabulary and a session id of `session_id_bytes` may
// serialize to: the payloads plus a bound on every tag, length and scalar
// field (64 bytes, and 16 more per extra row).
int64_t ResponseBytesBound(const model::LogitsSpec& spec, int64_t vocab_size,
                           size_t session_id_bytes, int64_t rows = 1) {
  int64_t payload = 0;
  switch (spec.encoding) {
    case model::LogitsEncoding::kFloat32:
      payload = 4 * vocab_size;
      break;
    case model::LogitsEncoding::kFloat16:
      payload = 2 * vocab_size;
      break;
    case model::LogitsEncoding::kTopN:
      payload = int64_t{9} * spec.top_n;  // a varint id (<= 5 bytes) and a float
      break;
  }
  return 64 + 16 * (rows - 1) + static_cast<int64_t>(session_id_bytes) + rows * payload;
}

std::string_view EncodingName(model::LogitsEncoding encoding) {
  switch (encoding) {
    case model::LogitsEncoding::kFloat32:
      return "LOGITS_FLOAT32";
    case model::LogitsEncoding::kFloat16:
      return "LOGITS_FLOAT16";
    case model::LogitsEncoding::kTopN:
      return "LOGITS_TOP_N";
  }
  return "";
}

// RESOURCE_EXHAUSTED (counted as message_size) when the response could exceed
// `max_bytes` (0: no limit), checked before any work so that a call whose
// answer cannot be sent changes nothing.
absl::Status CheckResponseSize(ModelMetrics* metrics, const model::LogitsSpec& spec,
                               int64_t vocab_size, size_t session_id_bytes, int64_t max_bytes,
                               int64_t rows = 1) {
  if (max_bytes <= 0) return absl::OkStatus();
  const int64_t bytes = ResponseBytesBound(spec, vocab_size, session_id_bytes, rows);
  if (bytes <= max_bytes) return absl::OkStatus();
  return OverLimit(
      metrics, "message_size",
      absl::ResourceExhaustedError(
          StrCat("the response would have up to ", bytes, " bytes (", EncodingName(spec.encoding),
                 " logits of ",
                 spec.encoding == model::LogitsEncoding::kTopN ? spec.top_n : vocab_size, " ids",
                 rows > 1 ? StrCat(", ", rows, " rows") : "", "), more than the server's limit of ",
                 max_bytes, " (--max_message_bytes); ask for LOGITS_FLOAT16 or LOGITS_TOP_N")));
}

// A Prefill's scoring option as the engine takes it (-1: off), after the
// same before-any-work checks as the logits: INVALID_ARGUMENT past
// kMaxPromptLogprobsTopN, RESOURCE_EXHAUSTED when the response with the
// scores of every appended token could exceed `max_bytes` (beside the
// `base_bytes` of the rest of the response).
absl::StatusOr<int32_t> PromptLogprobsOf(ModelMetrics* metrics, const v1::PrefillRequest& request,
                                         int64_t base_bytes, int64_t max_bytes) {
  const v1::PromptLogprobsOptions& options = request.prompt_logprobs();
  if (!options.enabled()) return -1;
  if (options.top_n() > kMaxPromptLogprobsTopN) {
    return absl::InvalidArgumentError(StrCat("prompt_logprobs.top_n ", options.top_n(),
                                             " is over the limit of ", kMaxPromptLogprobsTopN));
  }
  // A TokenLogprob: its tag and length, the token, the logprob and the two
  // packed lists (<= 5 + 6 + 5 + 2 x 6 + 9 x top_n bytes).
  const int64_t per_token = 40 + int64_t{9} * options.top_n();
  const int64_t bytes = base_bytes + per_token * std::max(request.tokens_size() - 1, 0);
  if (max_bytes > 0 && bytes > max_bytes) {
    return OverLimit(metrics, "message_size",
                     absl::ResourceExhaustedError(
                         StrCat("the response would have up to ", bytes, " bytes (the logprobs of ",
                                request.tokens_size(), " tokens with top_n ", options.top_n(),
                                "), more than the server's limit of ", max_bytes,
                                " (--max_message_bytes); score fewer tokens per call")));
  }
  return static_cast<int32_t>(options.top_n());
}

// The scores of a Prefill's appended tokens after the first, from the rows
// the engine encoded for them (AppendRequest::prompt_logprobs).
void ScoresToProto(const std::vector<int32_t>& tokens, const std::vector<model::Logits>& rows,
                   v1::PrefillResponse* response) {
  for (size_t i = 0; i + 1 < rows.size() && i + 1 < tokens.size(); ++i) {
    const model::Logits& l = rows[i];
    v1::TokenLogprob* t = response->add_prompt_logprobs();
    t->set_token(tokens[i + 1]);
    t->set_logprob(l.target_logit - l.log_sum_exp);
    for (size_t j = 0; j < l.top_ids.size(); ++j) {
      t->add_top_ids(l.top_ids[j]);
      t->add_top_logprobs(l.top_logits[j] - l.log_sum_exp);
    }
  }
}

// INTERNAL (counted) when the logits of a completed call are not finite: a
// NaN or +infinity anywhere in the row makes log_sum_exp non-finite. The
// weights or the backend are broken; no client should sample from them.
absl::Status CheckFinite(ModelMetrics* metrics, const engine::AppendResult& result) {
  if (std::all_of(result.logits.begin(), result.logits.end(),
                  [](const model::Logits& l) { return std::isfinite(l.log_sum_exp); })) {
    return absl::OkStatus();
  }
  if (metrics != nullptr) metrics->CountNonFiniteLogits();
  return absl::InternalError(
      StrCat("the model produced non-finite logits (NaN or infinity) at position ",
             result.num_tokens - 1, "; its weights or the compute backend are broken"));
}

// The values as packed little-endian bytes.
template <typename T>
void SetLittleEndian(const std::vector<T>& values, std::string* out) {
  out->resize(values.size() * sizeof(T));
  if (values.empty()) return;
  std::memcpy(out->data(), values.data(), out->size());
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i < out->size(); i += sizeof(T)) {
      std::reverse(out->begin() + static_cast<ptrdiff_t>(i),
                   out->begin() + static_cast<ptrdiff_t>(i + sizeof(T)));
    }
  }
}

// A request's truncate_to as the engine takes it (-1: absent);
// INVALID_ARGUMENT when negative. (The engine checks it against the
// session's length.)
template <typename Request>
absl::StatusOr<int64_t> TruncateToOf(const Request& request) {
  if (!request.has_truncate_to()) return -1;
  if (request.truncate_to() < 0) {
    return absl::InvalidArgumentError(
        StrCat("truncate_to ", request.truncate_to(), " is negative"));
  }
  return request.truncate_to();
}

// Decodes a request's `mask` (named `field` in errors) onto `masks`.
absl::Status AddMask(const v1::TokenMask& mask, int64_t vocab_size, std::string_view field,
                     std::vector<TokenMask>* masks) {
  absl::StatusOr<TokenMask> m = TokenMaskFromProto(mask, vocab_size, field);
  if (!m.ok()) return m.status();
  masks->push_back(*std::move(m));
  return absl::OkStatus();
}

// A Decode's token masks as the engine takes them (one per row, or none),
// INVALID_ARGUMENT for a bad mask, or proposed_masks that do not match the
// proposed tokens (all or none, with `mask`).
absl::Status DecodeMasksOf(const v1::DecodeTokenRequest& request, int64_t vocab_size,
                           std::vector<TokenMask>* masks) {
  const int k = request.proposed_size(), m = request.proposed_masks_size();
  if (m > 0 && m != k) {
    return absl::InvalidArgumentError(StrCat("proposed_masks has ", m, " masks for ", k,
                                             " proposed tokens: send none, or one per token"));
  }
  if (request.has_mask() && k > 0 && m == 0) {
    return absl::InvalidArgumentError(
        StrCat("a masked decode with ", k,
               " proposed tokens needs proposed_masks, one per proposed token"));
  }
  if (m > 0 && !request.has_mask()) {
    return absl::InvalidArgumentError("proposed_masks needs mask (the token's row) as well");
  }
  if (!request.has_mask()) return absl::OkStatus();
  masks->reserve(1 + m);
  if (absl::Status s = AddMask(request.mask(), vocab_size, "mask", masks); !s.ok()) return s;
  for (int i = 0; i < m; ++i) {
    if (absl::Status s = AddMask(request.proposed_masks(i), vocab_size,
                                 StrCat("proposed_masks[", i, "]"), masks);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// The engine request of a Decode / DecodeStream message.
absl::StatusOr<engine::AppendRequest> DecodeRequestOf(const v1::DecodeTokenRequest& request,
                                                      int64_t vocab_size, ModelMetrics* metrics,
                                                      int64_t max_message_bytes,
                                                      const engine::CancelFlag& cancel) {
  if (absl::Status s = CheckSessionId(request.session_id(), /*required=*/true); !s.ok()) return s;
  absl::StatusOr<model::LogitsSpec> spec = FromProto(request.logits(), vocab_size);
  if (!spec.ok()) return spec.status();
  if (request.proposed_size() > kMaxProposedTokens) {
    return absl::InvalidArgumentError(StrCat(
        request.proposed_size(), " proposed tokens, more than the limit of ", kMaxProposedTokens));
  }
  absl::StatusOr<int64_t> truncate_to = TruncateToOf(request);
  if (!truncate_to.ok()) return truncate_to.status();
  if (absl::Status s = CheckResponseSize(metrics, *spec, vocab_size, 0, max_message_bytes,
                                         1 + request.proposed_size());
      !s.ok()) {
    return s;
  }
  engine::AppendRequest out;
  if (absl::Status s = DecodeMasksOf(request, vocab_size, &out.masks); !s.ok()) return s;
  out.session_id = request.session_id();
  out.tokens.reserve(1 + request.proposed_size());
  out.tokens.push_back(request.token());
  out.tokens.insert(out.tokens.end(), request.proposed().begin(), request.proposed().end());
  out.all_logits = request.proposed_size() > 0;  // a row for the token and each proposal
  out.proposed = request.proposed_size();
  out.truncate_to = *truncate_to;
  out.logits = *spec;
  out.decode = true;
  out.lookahead = request.lookahead();
  out.cancel = cancel;
  return out;
}

// A Decode's response from the engine's rows: the token's, then one per
// proposed token.
void DecodeResponseOf(engine::AppendResult& result, v1::DecodeTokenResponse* response) {
  response->set_num_tokens(result.num_tokens);
  if (result.logits.empty()) return;
  if (result.logits.size() == 1) {
    ToProto(result.logits.back(), response->mutable_logits());
    return;
  }
  ToProto(result.logits.front(), response->mutable_logits());
  for (size_t i = 1; i < result.logits.size(); ++i) {
    ToProto(result.logits[i], response->add_proposed_logits());
  }
}

// A unary call answered by the engine's completion callback. The callback
// calls Finish as its last action; OnDone (which deletes the reactor) comes
// only after Finish, so the reactor outlives the callback.
class AppendReactor final : public grpc::ServerUnaryReactor {
 public:
  AppendReactor() : cancel_(std::make_shared<std::atomic<bool>>(false)) {}

  const engine::CancelFlag& cancel() const { return cancel_; }

  void OnCancel() override { cancel_->store(true); }
  void OnDone() override { delete this; }

 private:
  engine::CancelFlag cancel_;
};

// One DecodeStream call: read a request, submit it, write its response when
// the engine completes it, read the next. Errors end the call with their
// status; the client's half-close ends it with OK (no request is in flight
// then: the next read starts only after the previous write).
//
// Lifetime: two references, one released by OnDone and one held by each
// engine request in flight, so that the reactor survives until both gRPC and
// the engine are done with it, whatever the order.
//
// Cancellation: each request gets a flag of its own, which the engine also
// gives the lookahead step the request starts; OnCancel sets the current
// (latest) one, stopping that request or its guess.
class DecodeStreamReactor final
    : public grpc::ServerBidiReactor<v1::DecodeTokenRequest, v1::DecodeTokenResponse> {
 public:
  // `admitted`: not OK ends the call with it at once (authentication,
  // loading, the stream limit). The counts last as long as the reactor.
  DecodeStreamReactor(engine::Engine* engine, ModelMetrics* metrics, int64_t max_message_bytes,
                      const absl::Status& admitted, std::vector<CallCount> counts,
                      absl::AnyInvocable<absl::Status(const std::string&)> check_not_moved)
      : check_not_moved_(std::move(check_not_moved)),
        engine_(engine),
        metrics_(metrics),
        max_message_bytes_(max_message_bytes),
        counts_(std::move(counts)) {
    if (!admitted.ok()) {
      Finish(Counted(metrics_, &log_, admitted));
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client closed its side (or the call broke)
      log_.Finish(absl::OkStatus());
      Finish(grpc::Status::OK);
      return;
    }
    log_.set_session(request_.session_id());
    log_.add_tokens(1 + request_.proposed_size());
    if (absl::Status s = CheckMessageSize(metrics_, request_, max_message_bytes_); !s.ok()) {
      Finish(Counted(metrics_, &log_, s));
      return;
    }
    if (absl::Status s = check_not_moved_(request_.session_id()); !s.ok()) {
      Finish(Counted(metrics_, &log_, s));
      return;
    }
    engine::CancelFlag cancel = NewCancelFlag();
    if (cancel->load()) {
      // Read after the client cancelled: start no new work on its session.
      log_.Finish(absl::CancelledError("stream cancelled by the client"));
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled by the client"));
      return;
    }
    absl::StatusOr<engine::AppendRequest> request = DecodeRequestOf(
        request_, engine_->config().vocab_size, metrics_, max_message_bytes_, std::move(cancel));
    if (!request.ok()) {
      Finish(Counted(metrics_, &log_, request.status()));
      return;
    }
    refs_.fetch_add(1, std::memory_order_relaxed);
    submitted_ = absl::Now();
    engine_->Submit(std::move(*request), [this](absl::StatusOr<engine::AppendResult> result) {
      OnAppended(std::move(result));
    });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      log_.Finish(absl::CancelledError("stream closed by the client"));
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed by the client"));
      return;
    }
    StartRead(&request_);
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(cancel_mu_);
    cancelled_ = true;
    if (cancel_ != nullptr) cancel_->store(true);
  }

  void OnDone() override { Unref(); }

 private:
  // The flag of the next request; already set if the call is cancelled.
  engine::CancelFlag NewCancelFlag() {
    std::lock_guard<std::mutex> lock(cancel_mu_);
    cancel_ = std::make_shared<std::atomic<bool>>(cancelled_);
    return cancel_;
  }

  // The engine's completion (on its step-loop thread, or inline in Submit).
  void OnAppended(absl::StatusOr<engine::AppendResult> result) {
    if (result.ok()) {
      if (absl::Status s = CheckFinite(metrics_, *result); !s.ok()) result = s;
    }
    if (!result.ok()) {
      Finish(Counted(metrics_, &log_, result.status()));
    } else {
      if (metrics_ != nullptr) metrics_->ObserveDecodeStep(absl::Now() - submitted_);
      response_.Clear();
      DecodeResponseOf(*result, &response_);
      StartWrite(&response_);
    }
    Unref();
  }

  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // ModelServiceImpl::CheckNotMoved on this call.
  absl::AnyInvocable<absl::Status(const std::string&)> check_not_moved_;
  engine::Engine* const engine_;
  ModelMetrics* const metrics_;
  const int64_t max_message_bytes_;
  const std::vector<CallCount> counts_;      // in flight, open streams: released with the reactor
  RequestLog log_{"model", "DecodeStream"};  // the whole stream: session, steps
  absl::Time submitted_;                     // of the request in flight
  std::atomic<int> refs_{1};                 // OnDone's, plus one per engine request in flight
  std::mutex cancel_mu_;
  bool cancelled_ = false;     // guarded by cancel_mu_
  engine::CancelFlag cancel_;  // the current request's; guarded by cancel_mu_
  v1::DecodeTokenRequest request_;
  v1::DecodeTokenResponse response_;
};

}  // namespace

absl::StatusOr<model::LogitsSpec> FromProto(const v1::LogitsOptions& options, int64_t vocab_size) {
  model::LogitsSpec spec;
  switch (options.encoding()) {
    case v1::LogitsOptions::LOGITS_FLOAT32:
      spec.encoding = model::LogitsEncoding::kFloat32;
      return spec;
    case v1::LogitsOptions::LOGITS_FLOAT16:
      spec.encoding = model::LogitsEncoding::kFloat16;
      return spec;
    case v1::LogitsOptions::LOGITS_TOP_N:
      if (options.top_n() < 1 || options.top_n() > static_cast<uint64_t>(vocab_size)) {
        return absl::InvalidArgumentError(
            StrCat("top_n ", options.top_n(), " is out of range [1, ", vocab_size, "]"));
      }
      spec.encoding = model::LogitsEncoding::kTopN;
      spec.top_n = static_cast<int32_t>(options.top_n());
      return spec;
    default:
      return absl::InvalidArgumentError(
          StrCat("unknown logits encoding ", static_cast<int>(options.encoding())));
  }
}

void ToProto(const model::Logits& logits, v1::Logits* out) {
  switch (logits.encoding) {
    case model::LogitsEncoding::kFloat32:
      out->set_encoding(v1::LogitsOptions::LOGITS_FLOAT32);
      SetLittleEndian(logits.values, out->mutable_float32());
      break;
    case model::LogitsEncoding::kFloat16:
      out->set_encoding(v1::LogitsOptions::LOGITS_FLOAT16);
      SetLittleEndian(logits.halves, out->mutable_float16());
      break;
    case model::LogitsEncoding::kTopN:
      out->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
      out->mutable_top_ids()->Assign(logits.top_ids.begin(), logits.top_ids.end());
      out->mutable_top_logits()->Assign(logits.top_logits.begin(), logits.top_logits.end());
      break;
  }
  out->set_log_sum_exp(logits.log_sum_exp);
}

void ModelServiceImpl::SetEngine(engine::Engine* engine, const ModelServiceOptions& options) {
  options_ = options;
  engine_.store(engine, std::memory_order_release);
}

absl::StatusOr<engine::Engine*> ModelServiceImpl::Admit(
    const grpc::CallbackServerContext& context, const google::protobuf::MessageLite& request,
    const std::string* session_id, bool session_required) const {
  if (grpc::Status auth = CheckAuth(auth_, context); !auth.ok()) return FromGrpcStatus(auth);
  engine::Engine* e = engine();
  if (e == nullptr) return Loading();
  if (session_id != nullptr) {
    if (absl::Status s = CheckSessionId(*session_id, session_required); !s.ok()) return s;
  }
  if (absl::Status s = CheckMessageSize(metrics_, request, options_.max_message_bytes); !s.ok()) {
    return s;
  }
  return e;
}

absl::Status ModelServiceImpl::CheckNotDraining() const {
  return draining_.load(std::memory_order_acquire) ? Draining() : absl::OkStatus();
}

absl::Status ModelServiceImpl::CheckNotMoved(grpc::CallbackServerContext* context,
                                             const std::string& id) const {
  if (id.empty()) return absl::OkStatus();
  const std::string replica = moved_.Wait(id);
  if (replica.empty()) return absl::OkStatus();
  context->AddTrailingMetadata(kSessionLocationKey, replica);
  return absl::NotFoundError(StrCat("session \"", id, "\" moved to replica \"", replica,
                                    "\" (this one is draining): send its calls there"));
}

grpc::ServerUnaryReactor* ModelServiceImpl::Prefill(grpc::CallbackServerContext* context,
                                                    const v1::PrefillRequest* request,
                                                    v1::PrefillResponse* response) {
  CallCount in_flight(&in_flight_);
  RequestLog log("model", "Prefill");
  log.set_session(request->session_id());
  log.add_tokens(request->tokens_size());
  absl::StatusOr<engine::Engine*> admitted =
      Admit(*context, *request, &request->session_id(), /*session_required=*/false);
  if (admitted.ok() && request->sync_history()) {
    if (absl::Status s = CheckSessionName(request->session_id()); !s.ok()) admitted = s;
  }
  if (admitted.ok()) {
    if (absl::Status s = CheckNotMoved(context, request->session_id()); !s.ok()) admitted = s;
  }
  // A draining replica creates no session: not an unnamed one, nor a named
  // one it does not hold (the client's pool routes names to the replicas
  // that are not draining). A named session it holds goes on, as calls on
  // any existing session do, until the drain moves it.
  if (admitted.ok() && (request->session_id().empty() || request->sync_history())) {
    if (absl::Status s = CheckNotDraining();
        !s.ok() &&
        (request->session_id().empty() || !(*admitted)->Restore(request->session_id()).ok())) {
      admitted = s;
    }
  }
  if (!admitted.ok()) return FinishNow(metrics_, &log, context, admitted.status());
  engine::Engine* e = *admitted;
  absl::StatusOr<model::LogitsSpec> spec = FromProto(request->logits(), e->config().vocab_size);
  if (!spec.ok()) return FinishNow(metrics_, &log, context, spec.status());
  // A new session's id is replica_id + "." + 16 hex digits.
  const size_t id_bytes = request->session_id().empty() ? options_.replica_id.size() + 17
                                                        : request->session_id().size();
  if (absl::Status s = CheckResponseSize(metrics_, *spec, e->config().vocab_size, id_bytes,
                                         options_.max_message_bytes);
      !s.ok()) {
    return FinishNow(metrics_, &log, context, s);
  }
  absl::StatusOr<int32_t> prompt_logprobs = PromptLogprobsOf(
      metrics_, *request, ResponseBytesBound(*spec, e->config().vocab_size, id_bytes),
      options_.max_message_bytes);
  if (!prompt_logprobs.ok()) return FinishNow(metrics_, &log, context, prompt_logprobs.status());
  absl::StatusOr<int64_t> truncate_to = TruncateToOf(*request);
  if (!truncate_to.ok()) return FinishNow(metrics_, &log, context, truncate_to.status());
  engine::AppendRequest append;
  if (request->has_mask()) {
    if (absl::Status s = AddMask(request->mask(), e->config().vocab_size, "mask", &append.masks);
        !s.ok()) {
      return FinishNow(metrics_, &log, context, s);
    }
  }
  auto* reactor = new AppendReactor();
  append.session_id = request->session_id();
  append.tokens.assign(request->tokens().begin(), request->tokens().end());
  append.logits = *spec;
  append.prompt_logprobs = *prompt_logprobs;
  append.truncate_to = *truncate_to;
  append.lookahead = request->lookahead();
  append.sync_history = request->sync_history();
  append.cancel = reactor->cancel();
  const bool reused = !request->session_id().empty();
  const bool scored = append.prompt_logprobs >= 0;
  std::vector<int32_t> tokens;
  if (scored) tokens = append.tokens;
  e->Submit(std::move(append),
            [reactor, response, metrics = metrics_, reused, scored, tokens = std::move(tokens),
             start = absl::Now(), log = std::move(log), in_flight = std::move(in_flight)](
                absl::StatusOr<engine::AppendResult> result) mutable {
              if (result.ok()) {
                if (absl::Status s = CheckFinite(metrics, *result); !s.ok()) result = s;
              }
              if (result.ok()) {
                if (metrics != nullptr) metrics->ObservePrefill(absl::Now() - start, reused);
                log.set_session(result->session_id);
                response->set_session_id(std::move(result->session_id));
                response->set_num_tokens(result->num_tokens);
                response->set_cached_tokens(result->cached_tokens);
                response->set_kept_tokens(result->kept_tokens);
                if (!result->logits.empty()) {
                  ToProto(result->logits.back(), response->mutable_logits());
                }
                if (scored) ScoresToProto(tokens, result->logits, response);
              }
              reactor->Finish(Counted(metrics, &log, result.status(), /*prefill=*/true));
            });
  return reactor;
}

grpc::ServerUnaryReactor* ModelServiceImpl::Decode(grpc::CallbackServerContext* context,
                                                   const v1::DecodeTokenRequest* request,
                                                   v1::DecodeTokenResponse* response) {
  CallCount in_flight(&in_flight_);
  RequestLog log("model", "Decode");
  log.set_session(request->session_id());
  log.add_tokens(1 + request->proposed_size());
  absl::StatusOr<engine::Engine*> admitted = Admit(*context, *request);
  if (admitted.ok()) {
    if (absl::Status s = CheckNotMoved(context, request->session_id()); !s.ok()) admitted = s;
  }
  if (!admitted.ok()) return FinishNow(metrics_, &log, context, admitted.status());
  engine::Engine* e = *admitted;
  auto* reactor = new AppendReactor();
  absl::StatusOr<engine::AppendRequest> append = DecodeRequestOf(
      *request, e->config().vocab_size, metrics_, options_.max_message_bytes, reactor->cancel());
  if (!append.ok()) {
    reactor->Finish(Counted(metrics_, &log, append.status()));
    return reactor;
  }
  e->Submit(std::move(*append), [reactor, response, metrics = metrics_, start = absl::Now(),
                                 log = std::move(log), in_flight = std::move(in_flight)](
                                    absl::StatusOr<engine::AppendResult> result) mutable {
    if (result.ok()) {
      if (absl::Status s = CheckFinite(metrics, *result); !s.ok()) result = s;
    }
    if (result.ok()) {
      if (metrics != nullptr) metrics->ObserveDecodeStep(absl::Now() - start);
      DecodeResponseOf(*result, response);
    }
    reactor->Finish(Counted(metrics, &log, result.status()));
  });
  return reactor;
}

grpc::ServerBidiReactor<v1::DecodeTokenRequest, v1::DecodeTokenResponse>*
ModelServiceImpl::DecodeStream(grpc::CallbackServerContext* context) {
  std::vector<CallCount> counts;
  counts.emplace_back(&in_flight_);
  absl::Status admitted = FromGrpcStatus(CheckAuth(auth_, *context));
  engine::Engine* e = engine();
  if (admitted.ok() && e == nullptr) admitted = Loading();
  if (admitted.ok()) {
    CallCount stream(&open_streams_);  // this one included
    if (options_.max_streams > 0 && stream.count() > options_.max_streams) {
      admitted = OverLimit(metrics_, "max_streams",
                           absl::ResourceExhaustedError(StrCat(
                               "too many open DecodeStreams (the limit is ", options_.max_streams,
                               ", --max_streams); retry later or use unary Decode")));
    } else {
      counts.push_back(std::move(stream));
    }
  }
  return new DecodeStreamReactor(
      e, metrics_, options_.max_message_bytes, admitted, std::move(counts),
      [this, context](const std::string& id) { return CheckNotMoved(context, id); });
}

grpc::ServerUnaryReactor* ModelServiceImpl::Truncate(grpc::CallbackServerContext* context,
                                                     const v1::TruncateRequest* request,
                                                     v1::TruncateResponse* response) {
  RequestLog log("model", "Truncate");
  log.set_session(request->session_id());
  absl::StatusOr<engine::Engine*> admitted = Admit(*context, *request, &request->session_id());
  if (admitted.ok()) {
    if (absl::Status s = CheckNotMoved(context, request->session_id()); !s.ok()) admitted = s;
  }
  if (!admitted.ok()) return FinishNow(metrics_, &log, context, admitted.status());
  engine::Engine* e = *admitted;
  // The engine answers at once, or after one step when the session's
  // lookahead step is being computed: the callback thread never waits.
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  e->TruncateAsync(request->session_id(), request->num_tokens(),
                   [reactor, metrics = metrics_, log = std::move(log)](absl::Status s) mutable {
                     reactor->Finish(Counted(metrics, &log, s));
                   });
  return reactor;
}

grpc::ServerUnaryReactor* ModelServiceImpl::Fork(grpc::CallbackServerContext* context,
                                                 const v1::ForkRequest* request,
                                                 v1::ForkResponse* response) {
  RequestLog log("model", "Fork");
  log.set_session(request->session_id());
  absl::StatusOr<engine::Engine*> admitted = Admit(*context, *request, &request->session_id());
  if (admitted.ok()) {
    if (absl::Status s = CheckNotDraining(); !s.ok()) admitted = s;
  }
  if (admitted.ok()) {
    if (absl::Status s = CheckNotMoved(context, request->session_id()); !s.ok()) admitted = s;
  }
  if (!admitted.ok()) return FinishNow(metrics_, &log, context, admitted.status());
  engine::Engine* e = *admitted;
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();  // as Truncate's
  e->ForkAsync(request->session_id(), [reactor, response, metrics = metrics_, log = std::move(log)](
                                          absl::StatusOr<std::string> id) mutable {
    if (id.ok()) response->set_session_id(std::move(*id));
    reactor->Finish(Counted(metrics, &log, id.status()));
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::SessionChunk>* ModelServiceImpl::ExportSession(
    grpc::CallbackServerContext* context, const v1::ExportSessionRequest* request) {
  auto log = std::make_shared<RequestLog>("model", "ExportSession");
  log->set_session(request->session_id());
  absl::StatusOr<engine::Engine*> admitted = Admit(*context, *request, &request->session_id());
  return NewExportReactor(
      admitted.ok() ? *admitted : nullptr, admitted.status(), *request,
      [metrics = metrics_, log](const absl::Status& s) { return Counted(metrics, log.get(), s); },
      &in_flight_);
}

grpc::ServerReadReactor<v1::SessionChunk>* ModelServiceImpl::ImportSession(
    grpc::CallbackServerContext* context, v1::ImportSessionResponse* response) {
  auto log = std::make_shared<RequestLog>("model", "ImportSession");
  // No request yet: the chunks' total is bounded by MaxSnapshotBytes as they come.
  absl::StatusOr<engine::Engine*> admitted = Admit(*context, v1::SessionChunk());
  if (admitted.ok()) {
    if (absl::Status s = CheckNotDraining(); !s.ok()) admitted = s;
  }
  return NewImportReactor(
      context, admitted.ok() ? *admitted : nullptr, admitted.status(), response,
      [metrics = metrics_, log](const absl::Status& s) { return Counted(metrics, log.get(), s); },
      &in_flight_);
}

grpc::ServerUnaryReactor* ModelServiceImpl::Release(grpc::CallbackServerContext* context,
                                                    const v1::ReleaseRequest* request,
                                                    v1::ReleaseResponse* response) {
  RequestLog log("model", "Release");
  log.set_session(request->session_id());
  absl::StatusOr<engine::Engine*> admitted = Admit(*context, *request, &request->session_id());
  if (admitted.ok()) {
    if (absl::Status s = CheckNotMoved(context, request->session_id()); !s.ok()) admitted = s;
  }
  if (!admitted.ok()) return FinishNow(metrics_, &log, context, admitted.status());
  engine::Engine* e = *admitted;
  return FinishNow(metrics_, &log, context, e->Release(request->session_id()));
}

grpc::ServerUnaryReactor* ModelServiceImpl::Info(grpc::CallbackServerContext* context,
                                                 const v1::ModelInfoRequest* request,
                                                 v1::ModelInfo* response) {
  RequestLog log("model", "Info");
  absl::StatusOr<engine::Engine*> admitted = Admit(*context, *request);
  if (!admitted.ok()) return FinishNow(metrics_, &log, context, admitted.status());
  engine::Engine* e = *admitted;
  const model::ModelConfig& c = e->config();
  const engine::EngineOptions& o = e->options();
  response->set_architecture(c.architecture);
  response->set_name(c.name);
  response->set_vocab_size(c.vocab_size);
  response->set_context_length(e->max_context());
  response->set_embedding_length(c.embedding_length);
  response->set_block_count(c.block_count);
  response->set_head_count(c.head_count);
  response->set_head_count_kv(c.head_count_kv);
  response->set_feed_forward_length(c.feed_forward_length);
  response->set_backend(e->backend_description());
  response->set_max_batch_tokens(o.max_batch_tokens);
  response->set_max_sessions(o.max_sessions);
  response->set_kv_cache_blocks(e->Stats().kv_blocks_total);
  response->set_kv_block_size(options_.kv_block_size);
  response->set_session_ttl_seconds(absl::ToDoubleSeconds(o.session_ttl));
  response->set_replica_id(options_.replica_id);
  response->set_max_streams(options_.max_streams);
  response->set_draining(draining_.load(std::memory_order_acquire));
  response->set_prefix_cache(o.prefix_cache);
  response->set_file_name(options_.file_name);
  response->set_token_mask(true);
  return FinishNow(metrics_, &log, context, absl::OkStatus());
}

grpc::ServerUnaryReactor* ModelServiceImpl::ListSessions(grpc::CallbackServerContext* context,
                                                         const v1::ListSessionsRequest* request,
                                                         v1::ListSessionsResponse* response) {
  RequestLog log("model", "ListSessions");
  absl::StatusOr<engine::Engine*> admitted = Admit(*context, *request);
  if (!admitted.ok()) return FinishNow(metrics_, &log, context, admitted.status());
  engine::Engine* e = *admitted;
  // One session asked for: brought back first if --kv_spill_dir holds it.
  if (!request->session_id().empty()) e->Restore(request->session_id()).IgnoreError();
  for (const engine::SessionInfo& s : e->ListSessions()) {
    if (!request->session_id().empty() && s.id != request->session_id()) continue;
    v1::SessionInfo* out = response->add_sessions();
    out->set_session_id(s.id);
    out->set_num_tokens(s.num_tokens);
    out->set_prefilled_tokens(s.prefilled_tokens);
    out->set_decoded_tokens(s.decoded_tokens);
    out->set_kv_blocks(s.kv_blocks);
    out->set_idle_seconds(absl::ToDoubleSeconds(s.idle));
    out->set_busy(s.busy);
  }
  return FinishNow(metrics_, &log, context, absl::OkStatus());
}

}  // namespace llm
