#include "model_svc/server/snapshot_rpc.h"

#include <algorithm>
#include <string_view>
#include <thread>
#include <utility>

#include "common/strings.h"
#include "model_svc/server/model_service.h"
#include "model_svc/server/session_dir.h"

namespace llm {
namespace {

// Counts a call in `in_flight` while it lives, and joins its worker.
class CallThread {
 public:
  explicit CallThread(std::atomic<int64_t>* in_flight) : in_flight_(in_flight) {
    in_flight_->fetch_add(1, std::memory_order_acq_rel);
  }
  ~CallThread() {
    // OnDone may run inline on the worker itself (its Finish): it ends next.
    if (worker_.joinable()) {
      worker_.get_id() == std::this_thread::get_id() ? worker_.detach() : worker_.join();
    }
    in_flight_->fetch_sub(1, std::memory_order_acq_rel);
  }
  template <typename F>
  void Start(F f) {
    worker_ = std::thread(std::move(f));
  }

 private:
  std::atomic<int64_t>* in_flight_;
  std::thread worker_;
};

class ExportReactor : public grpc::ServerWriteReactor<v1::SessionChunk> {
 public:
  ExportReactor(engine::Engine* engine, absl::Status admitted,
                const v1::ExportSessionRequest& request, SnapshotFinisher finish,
                std::atomic<int64_t>* in_flight)
      : finish_(std::move(finish)), thread_(in_flight) {
    if (!admitted.ok()) {
      Finish(finish_(admitted));
      return;
    }
    thread_.Start([this, engine, id = request.session_id(), compress = !request.uncompressed()] {
      absl::StatusOr<std::string> bytes = engine->ExportSession(id, compress);
      if (!bytes.ok()) {
        Finish(finish_(bytes.status()));
        return;
      }
      bytes_ = *std::move(bytes);
      Next();
    });
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(finish_(absl::CancelledError("the client went away during the export")));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  // Writes the next chunk, or finishes after the last.
  void Next() {
    if (offset_ >= bytes_.size()) {
      Finish(finish_(absl::OkStatus()));
      return;
    }
    const size_t n = std::min<size_t>(kSnapshotChunkBytes, bytes_.size() - offset_);
    chunk_.set_data(bytes_.data() + offset_, n);
    offset_ += n;
    StartWrite(&chunk_);
  }

  SnapshotFinisher finish_;
  std::string bytes_;
  size_t offset_ = 0;
  v1::SessionChunk chunk_;
  CallThread thread_;  // last: joined first
};

class ImportReactor : public grpc::ServerReadReactor<v1::SessionChunk> {
 public:
  ImportReactor(grpc::CallbackServerContext* context, engine::Engine* engine, absl::Status admitted,
                v1::ImportSessionResponse* response, SnapshotFinisher finish,
                std::atomic<int64_t>* in_flight)
      : context_(context),
        engine_(engine),
        response_(response),
        finish_(std::move(finish)),
        thread_(in_flight) {
    if (!admitted.ok()) {
      Finish(finish_(admitted));
      return;
    }
    max_bytes_ = MaxSnapshotBytes(*engine);
    StartRead(&chunk_);
  }

  void OnReadDone(bool ok) override {
    if (ok) {
      if (first_) {
        first_ = false;
        if (absl::Status s = TakeSessionId(); !s.ok()) {
          Finish(finish_(s));
          return;
        }
      }
      if (static_cast<int64_t>(bytes_.size() + chunk_.data().size()) > max_bytes_) {
        Finish(finish_(absl::InvalidArgumentError(
            StrCat("the snapshot is over ", max_bytes_,
                   " bytes, larger than any session this model server can hold"))));
        return;
      }
      bytes_ += chunk_.data();
      StartRead(&chunk_);
      return;
    }
    // The stream ended: by the client's WritesDone, or cancelled (then the
    // bytes may be whole, but nobody waits for the session).
    if (context_->IsCancelled()) {
      Finish(finish_(absl::CancelledError("the client cancelled the import")));
      return;
    }
    // The client has sent everything: decode and import off gRPC's threads.
    thread_.Start([this] {
      absl::StatusOr<engine::ImportedSession> s = engine_->ImportSession(bytes_, session_id_);
      if (s.ok()) {
        response_->set_session_id(s->session_id);
        response_->set_num_tokens(s->num_tokens);
      }
      Finish(finish_(s.status()));
    });
  }
  void OnDone() override { delete this; }

 private:
  // The first chunk's session_id (SessionChunk.session_id): kept when it is
  // a valid id, INVALID_ARGUMENT naming why otherwise.
  absl::Status TakeSessionId() {
    const std::string& id = chunk_.session_id();
    if (id.empty()) return absl::OkStatus();
    if (id.size() > kMaxSessionIdBytes) {
      return absl::InvalidArgumentError(StrCat("SessionChunk.session_id has ", id.size(),
                                               " bytes, more than the limit of ",
                                               kMaxSessionIdBytes));
    }
    if (absl::Status s = CheckSessionIdChars("SessionChunk.session_id", id); !s.ok()) return s;
    session_id_ = id;
    return absl::OkStatus();
  }

  grpc::CallbackServerContext* const context_;
  engine::Engine* const engine_;
  v1::ImportSessionResponse* const response_;
  SnapshotFinisher finish_;
  int64_t max_bytes_ = 0;
  bool first_ = true;
  std::string session_id_;  // the first chunk's; empty: a new id
  std::string bytes_;
  v1::SessionChunk chunk_;
  CallThread thread_;  // last: joined first
};

}  // namespace

int64_t MaxSnapshotBytes(const engine::Engine& engine) {
  return snapshot::MaxEncodedBytes(engine.snapshot_layout(), engine.max_context());
}

grpc::ServerWriteReactor<v1::SessionChunk>* NewExportReactor(
    engine::Engine* engine, absl::Status admitted, const v1::ExportSessionRequest& request,
    SnapshotFinisher finish, std::atomic<int64_t>* in_flight) {
  return new ExportReactor(engine, std::move(admitted), request, std::move(finish), in_flight);
}

grpc::ServerReadReactor<v1::SessionChunk>* NewImportReactor(
    grpc::CallbackServerContext* context, engine::Engine* engine, absl::Status admitted,
    v1::ImportSessionResponse* response, SnapshotFinisher finish, std::atomic<int64_t>* in_flight) {
  return new ImportReactor(context, engine, std::move(admitted), response, std::move(finish),
                           in_flight);
}

}  // namespace llm
