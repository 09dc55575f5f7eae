// The reactors of the model service's snapshot RPCs (model.proto:
// ExportSession, server streaming; ImportSession, client streaming) over
// Engine::ExportSession and ImportSession (engine.h, "Snapshots").
//
// Threads: the engine's calls wait for the step in progress and encode or
// decode the snapshot, so each call runs them on a thread of its own (no
// gRPC thread waits); the reactor joins it before it deletes itself.
// Ownership: each reactor deletes itself in OnDone. The engine must outlive
// the call; `in_flight` is incremented for the call's life (the service's
// calls_in_flight, which the server's drain waits for).
// Cost: an export holds the whole snapshot in memory while it streams; an
// import holds the chunks received, at most `max_bytes`.
#ifndef LLM_MODEL_SVC_SERVER_SNAPSHOT_RPC_H_
#define LLM_MODEL_SVC_SERVER_SNAPSHOT_RPC_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "llm/v1/model.pb.h"
#include "model_svc/engine/engine.h"

namespace llm {

// ExportSession's chunks are at most this many bytes.
inline constexpr int64_t kSnapshotChunkBytes = int64_t{1} << 20;

// Turns a call's final status into the wire's (counting it, logging it).
using SnapshotFinisher = absl::AnyInvocable<grpc::Status(const absl::Status&)>;

// The largest snapshot `engine` could have written: a session at its
// context length, uncompressed. ImportSession refuses more (INVALID_ARGUMENT).
int64_t MaxSnapshotBytes(const engine::Engine& engine);

// ExportSession: `admitted` not OK ends the call with it at once (`engine`
// may then be null).
grpc::ServerWriteReactor<v1::SessionChunk>* NewExportReactor(
    engine::Engine* engine, absl::Status admitted, const v1::ExportSessionRequest& request,
    SnapshotFinisher finish, std::atomic<int64_t>* in_flight);

// ImportSession: as NewExportReactor; fills `response`. A stream that ends
// cancelled imports nothing (CANCELLED).
grpc::ServerReadReactor<v1::SessionChunk>* NewImportReactor(
    grpc::CallbackServerContext* context, engine::Engine* engine, absl::Status admitted,
    v1::ImportSessionResponse* response, SnapshotFinisher finish, std::atomic<int64_t>* in_flight);

}  // namespace llm

#endif  // LLM_MODEL_SVC_SERVER_SNAPSHOT_RPC_H_
