#include "client/transport/tokenizer_client.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "client/generate/cached_text.h"
#include "client/generate/utf8_text.h"
#include "client/transport/async_call.h"
#include "client/transport/connect.h"
#include "client/transport/health.h"
#include "common/grpc/grpc_status.h"
#include "common/status_macros.h"
#include "common/strings.h"

namespace llm::client {
namespace {

using internal::WithContext;
using TokenizerStream = internal::BidiStream<v1::DecodeStreamRequest, v1::DecodeStreamResponse>;

// The tokenizer's DecodeStream: one request per token, the text it answers.
class DecodeStreamText : public TextStream {
 public:
  explicit DecodeStreamText(std::unique_ptr<TokenizerStream> stream) : stream_(std::move(stream)) {}

  absl::StatusOr<std::string> Add(int32_t token) override {
    v1::DecodeStreamRequest request;
    request.add_ids(static_cast<uint32_t>(token));
    LLM_RETURN_IF_ERROR(stream_->Write(request));
    stream_->StartRead();
    LLM_RETURN_IF_ERROR(stream_->AwaitRead());
    return SanitizeUtf8(stream_->response().text());
  }

  absl::StatusOr<std::string> Finish() override {
    std::string held;
    LLM_RETURN_IF_ERROR(
        stream_->Close([&](const v1::DecodeStreamResponse& r) { held += r.text(); }));
    return SanitizeUtf8(held);
  }

 private:
  std::unique_ptr<TokenizerStream> stream_;
};

}  // namespace

TokenizerClient::TokenizerClient(const ClientOptions& options,
                                 const std::shared_ptr<grpc::ChannelCredentials>& creds)
    : options_(options),
      channel_(internal::NewChannel(options.tokenizer_address, creds, options)),
      stub_(v1::Tokenizer::NewStub(channel_)),
      token_bytes_([this](int32_t id) {
        const int32_t ids[] = {id};
        return Decode(ids);
      }) {}

std::unique_ptr<grpc::ClientContext> TokenizerClient::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  return context;
}

absl::Status TokenizerClient::Connect() {
  const std::string& address = options_.tokenizer_address;
  grpc::Status last;
  bool still_loading = false;
  const absl::Status s = internal::WaitReady(
      options_, "tokenizer", address,
      [&] {
        auto context = NewContext();
        last = stub_->Info(context.get(), v1::InfoRequest(), &info_);
        return FromGrpcStatus(last);
      },
      [&] {
        return last.error_code() == grpc::StatusCode::UNAVAILABLE &&
               channel_->GetState(false) == GRPC_CHANNEL_READY;
      },
      &still_loading);
  if (still_loading) return s;
  if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) {
    return absl::UnavailableError(
        StrCat("cannot reach the tokenizer service at ", address, ": ", s.message()));
  }
  if (absl::IsUnimplemented(s)) {  // another service at this address
    const absl::Duration probe_timeout = std::min(options_.rpc_timeout, absl::Seconds(5));
    return absl::UnimplementedError(
        StrCat("tokenizer service at ", address, ": ",
               WrongServiceMessage(channel_, Service::kTokenizer, probe_timeout)));
  }
  if (!s.ok()) return WithContext(s, StrCat("tokenizer service at ", address));
  end_ids_.clear();
  if (info_.has_eos_id()) end_ids_.push_back(static_cast<int32_t>(info_.eos_id()));
  if (info_.has_eot_id() &&
      std::find(end_ids_.begin(), end_ids_.end(), info_.eot_id()) == end_ids_.end()) {
    end_ids_.push_back(static_cast<int32_t>(info_.eot_id()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> TokenizerClient::Encode(std::string_view text,
                                                             const EncodeOptions& options) {
  v1::EncodeRequest request;
  request.set_text_bytes(std::string(text));
  request.mutable_options()->set_allow_all_special(options.allow_special);
  request.mutable_options()->set_add_bos(options.add_bos && info_.has_bos_id());
  v1::EncodeResponse response;
  auto context = NewContext();
  const grpc::Status s = stub_->Encode(context.get(), request, &response);
  if (!s.ok()) {
    return WithContext(FromGrpcStatus(s), StrCat("tokenizer service at ", address()));
  }
  return std::vector<int32_t>(response.ids().begin(), response.ids().end());
}

absl::StatusOr<std::string> TokenizerClient::Decode(std::span<const int32_t> ids) {
  v1::DecodeRequest request;
  for (int32_t id : ids) request.add_ids(static_cast<uint32_t>(id));
  v1::DecodeResponse response;
  auto context = NewContext();
  const grpc::Status s = stub_->Decode(context.get(), request, &response);
  if (!s.ok()) {
    return WithContext(FromGrpcStatus(s), StrCat("tokenizer service at ", address()));
  }
  return response.text();
}

absl::StatusOr<std::string> TokenizerClient::TokenBytes(int32_t id) { return token_bytes_.Get(id); }

absl::StatusOr<std::unique_ptr<TextStream>> TokenizerClient::OpenText(int32_t max_tokens) {
  if (options_.detokenize == ClientOptions::Detokenize::kCachedDecode) {
    return std::make_unique<CachedText>(token_bytes_);
  }
  auto stream = std::make_unique<TokenizerStream>(
      StrCat("tokenizer service at ", address()), options_.rpc_timeout,
      absl::Now() + options_.rpc_timeout * (static_cast<int64_t>(max_tokens) + 2));
  LLM_RETURN_IF_ERROR(stream->Start([&](grpc::ClientContext* c, grpc::CompletionQueue* q) {
    return stub_->PrepareAsyncDecodeStream(c, q);
  }));
  return std::make_unique<DecodeStreamText>(std::move(stream));
}

}  // namespace llm::client
