// The model service, as the client reaches it over gRPC: its replicas,
// session-affine calls, and recovery of lost sessions (ModelPort,
// client/generate/ports.h).
//
// Replicas: ClientOptions::model_address may name several model servers (a
// comma-separated list, or dns:///NAME:PORT for every address of a headless
// Service); model_pool.h routes each session's calls to the replica that
// holds it (its id names the replica) and spreads new sessions round robin.
// A replica that answers UNAVAILABLE, or cancels a call (it is shutting
// down), is marked down.
//
// Recovery: when Prefill finds the session lost (NOT_FOUND: it expired, was
// evicted, or its replica restarted, which the id's epoch shows; UNAVAILABLE
// or CANCELLED: its replica went away or is shutting down), the whole
// history (Session::tokens) is prefilled into a new session, on any replica
// that is up. When no replica takes new sessions (all restarting, loading or
// unreachable for a moment), that is retried with backoff (100 ms doubling to
// 1 s, after each round of the replicas) for ClientOptions::reconnect_timeout.
//
// Deadlines: every unary call gets ClientOptions::rpc_timeout, and so does
// every step of a DecodeSteps stream (a response that takes longer cancels
// the stream with DEADLINE_EXCEEDED; the whole stream gets rpc_timeout per
// step, plus two).
//
// Cancellation: a Prefill polls its `cancel` flag every 20 ms and cancels
// the call at once (TryCancel) when it is set; the session is then marked
// unsynced. DecodeSteps::Close ends a stream cleanly (WritesDone, the
// in-flight response read, Finish).
//
// Threads: thread-safe (a process's generations share one: client/
// services.h); a Session and a stream belong to one caller at a time.
// Ownership: owns the pool (channels, stubs); the streams it opens must not
// outlive it. Cost: a Prefill is one call, or
// a few when it rebuilds or retries; Connect is one Info per replica.
#ifndef LLM_CLIENT_TRANSPORT_MODEL_CLIENT_H_
#define LLM_CLIENT_TRANSPORT_MODEL_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/generate/ports.h"
#include "client/transport/client_options.h"
#include "client/transport/model_pool.h"
#include "llm/v1/model.grpc.pb.h"

namespace llm::client {

class ModelClient : public ModelPort {
 public:
  // Parses options.model_address (InvalidArgument when malformed,
  // model_target.h); makes no call.
  static absl::StatusOr<std::unique_ptr<ModelClient>> Create(
      const ClientOptions& options, const std::shared_ptr<grpc::ChannelCredentials>& creds);
  ModelClient(const ModelClient&) = delete;
  ModelClient& operator=(const ModelClient&) = delete;

  // Reads the replicas' Info. UNAVAILABLE ("cannot reach the model service
  // at ...") when none is up; a replica that is still loading is waited for
  // up to ready_timeout (on_wait reports the wait), then DEADLINE_EXCEEDED;
  // the replicas' own code and message when they refuse.
  absl::Status Connect();

  const v1::ModelInfo& info() const { return info_; }
  // The model replicas (for tests and tools).
  const ModelPool& pool() const { return *pool_; }
  // The sessions of every replica that is up (for tests and tools).
  absl::StatusOr<v1::ListSessionsResponse> ListSessions();

  // ModelPort.
  int64_t vocab_size() const override { return info_.vocab_size(); }
  int64_t context_length() const override { return info_.context_length(); }
  absl::StatusOr<PrefillResult> Prefill(Session& session, std::span<const int32_t> tokens,
                                        const StepOptions& options, const std::atomic<bool>& cancel,
                                        int32_t* rebuilds) override;
  std::unique_ptr<DecodeSteps> OpenSteps(const Session& session, int32_t max_steps) override;
  absl::Status Release(Session& session) override;
  absl::Status Truncate(Session& session, int64_t n) override;
  // On the session's replica; the import on a replica that takes new
  // sessions (the pool's choice). Errors: the server's (FAILED_PRECONDITION
  // for a snapshot of another model, UNIMPLEMENTED without snapshots).
  absl::StatusOr<std::string> ExportSession(const Session& session) override;
  absl::StatusOr<std::string> ImportSession(const std::string& bytes) override;
  bool Relocate(Session& session) override;

 private:
  ModelClient(const ClientOptions& options, std::unique_ptr<ModelPool> pool);
  // The replica of `session`: by its id, or by its name (Session::named);
  // NOT_FOUND for no session yet, or a lost one.
  absl::StatusOr<ModelPool::Endpoint*> Owner(const Session& session);
  // One Prefill call, cancellable, to the session's replica (a new one's
  // from the pool). Marks a replica that answers UNAVAILABLE (or cancels
  // the call while `cancel` is clear) down, and learns the replica id of a
  // new session.
  grpc::Status PrefillOnce(const v1::PrefillRequest& request, v1::PrefillResponse* response,
                           const std::atomic<bool>& cancel);

  const ClientOptions options_;
  std::unique_ptr<ModelPool> pool_;
  v1::ModelInfo info_;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_TRANSPORT_MODEL_CLIENT_H_
