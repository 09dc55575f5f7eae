// Internal to llm_client: gRPC's async client API wrapped for the generation
// loop, so that every wait has a deadline and cancellation is polled.
//
// BidiStream: one bidi stream on its own completion queue, used strictly one
// operation at a time (the caller never has two of Write/Read/WritesDone
// pending at once), so each wait is for the one pending operation.
// Close() ends it cleanly (WritesDone, read what is left, Finish); Abort()
// cancels it (TryCancel, wait for the pending operation, Finish). The
// destructor aborts a stream that was not ended.
//
// Threads: one thread uses a stream.
#ifndef LLM_CLIENT_TRANSPORT_ASYNC_CALL_H_
#define LLM_CLIENT_TRANSPORT_ASYNC_CALL_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc/grpc_status.h"
#include "common/strings.h"

namespace llm::client::internal {

template <typename Request, typename Response>
class BidiStream {
 public:
  using ReaderWriter = grpc::ClientAsyncReaderWriter<Request, Response>;
  // Creates the call on (context, queue); e.g. a lambda calling the stub's
  // PrepareAsyncDecodeStream.
  using Prepare =
      std::function<std::unique_ptr<ReaderWriter>(grpc::ClientContext*, grpc::CompletionQueue*)>;

  // `what` names the peer in errors ("model service at 127.0.0.1:50052").
  // Each operation must complete within step_timeout; the whole call within
  // call_deadline.
  BidiStream(std::string what, absl::Duration step_timeout, absl::Time call_deadline)
      : what_(std::move(what)), step_timeout_(step_timeout) {
    context_.set_deadline(absl::ToChronoTime(call_deadline));
  }
  BidiStream(const BidiStream&) = delete;
  BidiStream& operator=(const BidiStream&) = delete;

  ~BidiStream() {
    if (started_ && !finished_) Abort();
    queue_.Shutdown();
    void* tag;
    bool ok;
    while (queue_.Next(&tag, &ok)) {
    }
  }

  // Starts the call. On failure the stream is finished and the status says why.
  absl::Status Start(const Prepare& prepare) {
    rw_ = prepare(&context_, &queue_);
    rw_->StartCall(Tag(kStart));
    started_ = true;
    return Step(kStart, "start");
  }

  // Sends one request (waits until gRPC has taken it).
  absl::Status Write(const Request& request) {
    rw_->Write(request, Tag(kWrite));
    return Step(kWrite, "write");
  }

  // Starts reading the next response into response().
  void StartRead() {
    rw_->Read(&response_, Tag(kRead));
    read_pending_ = true;
  }

  // Waits for the read started by StartRead. OK: response() holds it.
  // Otherwise the stream is finished: the server's status (OK turned into
  // UNAVAILABLE "stream ended early" when it ended without an error), or
  // DEADLINE_EXCEEDED if no response came within step_timeout.
  absl::Status AwaitRead() {
    read_pending_ = false;
    bool ended = false;
    absl::Status s = Step(kRead, "read", &ended);
    if (s.ok() && ended) return absl::UnavailableError(StrCat(what_, ": the stream ended early"));
    return s;
  }

  Response& response() { return response_; }
  // The call's context (its trailing metadata, once finished).
  const grpc::ClientContext& context() const { return context_; }
  bool finished() const { return finished_; }

  // Ends the call cleanly: waits for a pending read, half-closes, reads what
  // the server still sends (each response to `extra`, if given) and returns
  // the call's final status.
  absl::Status Close(const std::function<void(const Response&)>& extra = nullptr) {
    if (finished_) return final_;
    if (read_pending_) {
      absl::Status s = AwaitRead();
      if (!s.ok()) return s;
      if (extra) extra(response_);
    }
    bool ended = false;
    rw_->WritesDone(Tag(kWritesDone));
    absl::Status s = Step(kWritesDone, "close", &ended);
    while (s.ok() && !ended) {
      StartRead();
      read_pending_ = false;
      s = Step(kRead, "read", &ended);
      if (s.ok() && !ended && extra) extra(response_);
    }
    return s;
  }

  // Cancels the call (TryCancel) and waits until gRPC is done with it.
  void Abort() {
    if (!started_ || finished_) return;
    context_.TryCancel();
    if (pending_ != kNone) Wait(pending_, absl::InfiniteFuture());
    read_pending_ = false;
    FinishCall();
  }

 private:
  enum Op { kNone = -1, kStart = 0, kWrite, kRead, kWritesDone, kFinish, kNumOps };

  void* Tag(Op op) {
    pending_ = op;
    return &tags_[op];
  }

  // Waits for `op`; true if it completed (its ok in *ok) before `deadline`.
  bool Wait(Op op, absl::Time deadline, bool* ok = nullptr) {
    while (true) {
      void* tag = nullptr;
      bool got_ok = false;
      const auto r = queue_.AsyncNext(&tag, &got_ok, absl::ToChronoTime(deadline));
      if (r == grpc::CompletionQueue::TIMEOUT) return false;
      if (r == grpc::CompletionQueue::SHUTDOWN) {
        if (ok) *ok = false;
        pending_ = kNone;
        return true;
      }
      if (tag == &tags_[op]) {
        if (ok) *ok = got_ok;
        pending_ = kNone;
        return true;
      }
    }
  }

  // Waits for the pending `op`. A failed op means the call is over: it is
  // finished, and its final status returned (*ended set when that is OK).
  absl::Status Step(Op op, const char* what, bool* ended = nullptr) {
    if (ended) *ended = false;
    bool ok = false;
    if (!Wait(op, absl::Now() + step_timeout_, &ok)) {
      context_.TryCancel();
      Wait(op, absl::InfiniteFuture());
      FinishCall();
      final_ = absl::DeadlineExceededError(
          StrCat(what_, ": no ", what, " within ", absl::FormatDuration(step_timeout_)));
      return final_;
    }
    if (ok) return absl::OkStatus();
    FinishCall();
    if (final_.ok()) {
      if (ended) {
        *ended = true;
      } else {
        return absl::UnavailableError(StrCat(what_, ": the call ended early"));
      }
    }
    return final_;
  }

  void FinishCall() {
    if (finished_) return;
    grpc::Status status;
    rw_->Finish(&status, Tag(kFinish));
    Wait(kFinish, absl::InfiniteFuture());
    finished_ = true;
    final_ = FromGrpcStatus(status);
    if (!final_.ok()) final_ = absl::Status(final_.code(), StrCat(what_, ": ", final_.message()));
  }

  const std::string what_;
  const absl::Duration step_timeout_;
  grpc::ClientContext context_;
  grpc::CompletionQueue queue_;
  std::unique_ptr<ReaderWriter> rw_;
  Response response_;
  char tags_[kNumOps] = {};
  Op pending_ = kNone;
  bool started_ = false;
  bool read_pending_ = false;
  bool finished_ = false;
  absl::Status final_;
};

}  // namespace llm::client::internal

#endif  // LLM_CLIENT_TRANSPORT_ASYNC_CALL_H_
