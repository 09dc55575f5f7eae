#include "client/transport/decode_steps.h"

#include <utility>

#include "client/transport/async_call.h"
#include "common/strings.h"
#include "common/token_mask_proto.h"
#include "llm/v1/model.grpc.pb.h"

namespace llm::client::internal {
namespace {

using ModelStream = BidiStream<v1::DecodeTokenRequest, v1::DecodeTokenResponse>;

class GrpcDecodeSteps : public DecodeSteps {
 public:
  GrpcDecodeSteps(ModelPool& pool, std::string session_id, bool named, absl::Duration step_timeout,
                  absl::Time deadline)
      : pool_(pool),
        session_id_(std::move(session_id)),
        named_(named),
        step_timeout_(step_timeout),
        deadline_(deadline) {}

  ~GrpcDecodeSteps() override {
    if (counted_ != nullptr) counted_->in_flight.fetch_sub(1, std::memory_order_relaxed);
  }

  void Send(int32_t token, const StepOptions& options) override {
    send_error_ = absl::OkStatus();
    if (stream_ == nullptr) {  // to the session's replica
      absl::StatusOr<ModelPool::Endpoint*> owner =
          named_ ? pool_.ForNamedSession(session_id_) : pool_.ForSession(session_id_);
      if (!owner.ok()) {
        send_error_ = owner.status();  // lost
        return;
      }
      endpoint_ = *owner;
      counted_ = endpoint_;  // a call in flight there until the stream ends
      counted_->in_flight.fetch_add(1, std::memory_order_relaxed);
      connection_ = pool_.Connect(endpoint_);
      stream_ = std::make_unique<ModelStream>(StrCat("model service at ", endpoint_->address),
                                              step_timeout_, deadline_);
      send_error_ = stream_->Start([&](grpc::ClientContext* c, grpc::CompletionQueue* q) {
        return connection_->stub->PrepareAsyncDecodeStream(c, q);
      });
      if (!send_error_.ok()) return;
    }
    if (options.mask != nullptr && endpoint_ != nullptr) {
      send_error_ = pool_.CheckAppliesTokenMasks(endpoint_);
      if (!send_error_.ok()) return;
    }
    v1::DecodeTokenRequest request;
    request.set_session_id(session_id_);
    request.set_token(token);
    *request.mutable_logits() = options.logits;
    request.set_lookahead(options.lookahead);
    request.mutable_proposed()->Assign(options.proposed.begin(), options.proposed.end());
    if (options.truncate_to >= 0) request.set_truncate_to(options.truncate_to);
    if (options.mask != nullptr) TokenMaskToProto(*options.mask, request.mutable_mask());
    for (const TokenMask& m : options.proposed_masks) {
      TokenMaskToProto(m, request.add_proposed_masks());
    }
    send_error_ = stream_->Write(request);
    if (send_error_.ok()) stream_->StartRead();
  }

  absl::StatusOr<const v1::Logits*> Await() override {
    absl::Status s = send_error_;
    if (s.ok()) s = stream_->AwaitRead();
    if (s.ok()) return &stream_->response().logits();
    // Its replica went away or is shutting down (it cancels streams then).
    if (endpoint_ != nullptr && (absl::IsUnavailable(s) || absl::IsCancelled(s))) {
      pool_.MarkDown(endpoint_, s);
    }
    // The session moved to another replica (the answer says which).
    if (absl::IsNotFound(s) && stream_ != nullptr && stream_->finished()) {
      if (!pool_.LearnLocation(session_id_, stream_->context())) pool_.Forget(session_id_);
    }
    endpoint_ = nullptr;
    return s;
  }

  const google::protobuf::RepeatedPtrField<v1::Logits>& proposed_logits() const override {
    return stream_->response().proposed_logits();
  }

  absl::Status Close() override {
    if (stream_ == nullptr) return absl::OkStatus();
    return stream_->Close();
  }

 private:
  ModelPool& pool_;
  const std::string session_id_;
  const bool named_;
  const absl::Duration step_timeout_;
  const absl::Time deadline_;
  ModelPool::Endpoint* endpoint_ = nullptr;                  // stream_'s replica
  ModelPool::Endpoint* counted_ = nullptr;                   // its in_flight holds this stream
  std::shared_ptr<const ModelPool::Connection> connection_;  // outlives stream_
  std::unique_ptr<ModelStream> stream_;
  absl::Status send_error_;  // a failed Send, reported by Await
};

}  // namespace

std::unique_ptr<DecodeSteps> NewDecodeSteps(ModelPool& pool, std::string session_id, bool named,
                                            absl::Duration step_timeout, absl::Time deadline) {
  return std::make_unique<GrpcDecodeSteps>(pool, std::move(session_id), named, step_timeout,
                                           deadline);
}

}  // namespace llm::client::internal
