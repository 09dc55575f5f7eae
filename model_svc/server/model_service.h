// gRPC front of the engine: llm.v1.Model on the callback API.
//
// Prefill and Decode submit to the engine and return at once; the engine's
// completion callback (on its step-loop thread) fills the response and
// finishes the call, so no gRPC thread ever waits for a forward step.
// DecodeStream is one reactor per stream that alternates read, submit, write.
// A client's cancellation sets the request's CancelFlag, which the engine
// checks every step. absl::Status from the engine is turned into grpc::Status
// here and nowhere else.
//
// Loading: the service can be registered before the model is loaded (so that
// the server answers health checks meanwhile); until SetEngine() every call
// fails with UNAVAILABLE.
//
// Draining: after StartDrain() a new session (Prefill without a session_id,
// Fork, ImportSession) is UNAVAILABLE, while calls on existing sessions and open streams go
// on; calls_in_flight() tells the server when they are all done.
//
// Limits (ModelServiceOptions): requests over max_message_bytes, calls whose
// response could exceed it (checked before any work, so that such a call
// changes nothing) and streams beyond max_streams are RESOURCE_EXHAUSTED; with the engine's limits
// (sessions, KV pool, context) they are counted in
// llm_limit_rejected_total{reason} (model_metrics.h).
//
// Ownership: borrows the Engine, which must outlive every call (shut the
// server down before destroying the engine).
// Threads: all methods may run concurrently; SetEngine() once, from any thread.
#ifndef LLM_MODEL_SVC_SERVER_MODEL_SERVICE_H_
#define LLM_MODEL_SVC_SERVER_MODEL_SERVICE_H_

#include <google/protobuf/message_lite.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/grpc/security.h"
#include "llm/v1/model.grpc.pb.h"
#include "model_svc/core/logits.h"
#include "model_svc/engine/engine.h"
#include "model_svc/server/model_metrics.h"
#include "model_svc/server/moved_sessions.h"

namespace llm {

// The longest session_id a request may carry (INVALID_ARGUMENT past it).
inline constexpr size_t kMaxSessionIdBytes = 256;
// The most alternatives PrefillRequest.prompt_logprobs.top_n may ask for.
inline constexpr uint32_t kMaxPromptLogprobsTopN = 20;
// The most tokens DecodeTokenRequest.proposed may carry (speculative
// decoding; INVALID_ARGUMENT past it).
inline constexpr int kMaxProposedTokens = 16;

// What Info reports that the engine does not know, and the service's limits.
struct ModelServiceOptions {
  int32_t kv_block_size = 16;  // positions per KV block
  std::string replica_id;      // Info.replica_id: the prefix of this server's session ids
  std::string file_name;       // Info.file_name: the model file's name, without its directory
  // Largest request, and largest response, in serialized bytes; 0: no check
  // here (gRPC's transport limits still apply).
  int64_t max_message_bytes = 0;
  // Most DecodeStreams open at once; 0: no limit.
  int64_t max_streams = 0;
};

class ModelServiceImpl final : public v1::Model::CallbackService {
 public:
  // Loading: every call is UNAVAILABLE until SetEngine().
  ModelServiceImpl() = default;
  // Serving `engine` at once.
  ModelServiceImpl(engine::Engine& engine, const ModelServiceOptions& options) {
    SetEngine(&engine, options);
  }

  // Starts serving `engine` (non-null).
  void SetEngine(engine::Engine* engine, const ModelServiceOptions& options);
  // From now on a new session is UNAVAILABLE (the server is shutting down);
  // calls on existing sessions go on.
  void StartDrain() { draining_.store(true, std::memory_order_release); }
  // Calls in progress: Prefill and Decode from arrival until the engine has
  // answered, DecodeStreams from opening until they end. Cost: one load.
  int64_t calls_in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  // Records calls in `metrics` (optional; it must outlive the service). Call
  // before the server starts.
  void SetMetrics(ModelMetrics* metrics) { metrics_ = metrics; }
  // Requires the bearer token of `auth` on every call (UNAUTHENTICATED
  // otherwise); `auth` must outlive the service. Call before the server starts.
  void SetAuth(const BearerAuth* auth) { auth_ = auth; }
  // The sessions moved to a peer on drain (migration.h): calls on them are
  // answered NOT_FOUND with their location (moved_sessions.h).
  MovedSessions& moved() { return moved_; }

  grpc::ServerUnaryReactor* Prefill(grpc::CallbackServerContext* context,
                                    const v1::PrefillRequest* request,
                                    v1::PrefillResponse* response) override;
  grpc::ServerUnaryReactor* Decode(grpc::CallbackServerContext* context,
                                   const v1::DecodeTokenRequest* request,
                                   v1::DecodeTokenResponse* response) override;
  grpc::ServerBidiReactor<v1::DecodeTokenRequest, v1::DecodeTokenResponse>* DecodeStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Truncate(grpc::CallbackServerContext* context,
                                     const v1::TruncateRequest* request,
                                     v1::TruncateResponse* response) override;
  grpc::ServerUnaryReactor* Fork(grpc::CallbackServerContext* context,
                                 const v1::ForkRequest* request,
                                 v1::ForkResponse* response) override;
  grpc::ServerUnaryReactor* Release(grpc::CallbackServerContext* context,
                                    const v1::ReleaseRequest* request,
                                    v1::ReleaseResponse* response) override;
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context,
                                 const v1::ModelInfoRequest* request,
                                 v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                         const v1::ListSessionsRequest* request,
                                         v1::ListSessionsResponse* response) override;
  grpc::ServerWriteReactor<v1::SessionChunk>* ExportSession(
      grpc::CallbackServerContext* context, const v1::ExportSessionRequest* request) override;
  grpc::ServerReadReactor<v1::SessionChunk>* ImportSession(
      grpc::CallbackServerContext* context, v1::ImportSessionResponse* response) override;

 private:
  // The engine, or null while loading (UNAVAILABLE).
  engine::Engine* engine() const { return engine_.load(std::memory_order_acquire); }
  // What every unary call checks first: the bearer token (UNAUTHENTICATED),
  // that the model is loaded (UNAVAILABLE) and, when `session_id` is given,
  // that it is at most kMaxSessionIdBytes and, if `session_required`, not
  // empty (INVALID_ARGUMENT). Then the request's size (RESOURCE_EXHAUSTED,
  // counted as message_size). Returns the engine.
  absl::StatusOr<engine::Engine*> Admit(const grpc::CallbackServerContext& context,
                                        const google::protobuf::MessageLite& request,
                                        const std::string* session_id = nullptr,
                                        bool session_required = true) const;
  // UNAVAILABLE while draining (for calls that would create a session).
  absl::Status CheckNotDraining() const;
  // NOT_FOUND, with the "llm-session-location" trailing metadata on
  // `context`, when session `id` moved to a peer (after waiting for a move
  // in progress); OK otherwise (and for an empty id).
  absl::Status CheckNotMoved(grpc::CallbackServerContext* context, const std::string& id) const;

  ModelServiceOptions options_;  // written before engine_ is published
  std::atomic<engine::Engine*> engine_{nullptr};
  ModelMetrics* metrics_ = nullptr;
  const BearerAuth* auth_ = nullptr;
  std::atomic<bool> draining_{false};
  MovedSessions moved_;
  std::atomic<int64_t> in_flight_{0};     // calls_in_flight()
  std::atomic<int64_t> open_streams_{0};  // DecodeStreams admitted and not ended
};

// Wire logits options to the engine's; INVALID_ARGUMENT for an unknown
// encoding or, with LOGITS_TOP_N, top_n outside 1..vocab_size.
absl::StatusOr<model::LogitsSpec> FromProto(const v1::LogitsOptions& options, int64_t vocab_size);

// Engine logits to the wire form (float32 and float16 as little-endian bytes).
void ToProto(const model::Logits& logits, v1::Logits* out);

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_MODEL_SERVICE_H_
