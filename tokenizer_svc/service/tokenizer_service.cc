#include "tokenizer_svc/service/tokenizer_service.h"

#include <span>
#include <string>
#include <vector>

#include "common/grpc/grpc_status.h"
#include "common/strings.h"
#include "tokenizer_svc/incremental_decoder.h"

namespace llm {
namespace {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

absl::Status EncodeInto(const tok::Tokenizer& tokenizer, const std::string& text,
                        const tok::EncodeOptions& options, v1::EncodeResponse* response) {
  std::vector<uint32_t> ids;
  absl::Status status = tokenizer.EncodeTo(text, options, &ids);
  if (!status.ok()) return status;
  response->mutable_ids()->Assign(ids.begin(), ids.end());
  return absl::OkStatus();
}

// The ids of a repeated field, without copying them.
std::span<const uint32_t> IdsOf(const google::protobuf::RepeatedField<uint32_t>& ids) {
  return {ids.data(), static_cast<size_t>(ids.size())};
}

const char* KindName(tok::TokenType type) {
  switch (type) {
    case tok::TokenType::kUserDefined: return "user_defined";
    case tok::TokenType::kUnknown: return "unknown";
    default: return "control";
  }
}

// One DecodeStream call: read a request, write its delta, repeat; on the
// client's half-close, write the held bytes (if any) and finish OK.
class DecodeStreamReactor final
    : public grpc::ServerBidiReactor<v1::DecodeStreamRequest, v1::DecodeStreamResponse> {
 public:
  explicit DecodeStreamReactor(const tok::Tokenizer& tokenizer) : decoder_(tokenizer) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // client closed its side (or the call broke)
      std::string rest = decoder_.Flush();
      if (rest.empty()) {
        Finish(grpc::Status::OK);
        return;
      }
      finishing_ = true;
      response_.Clear();
      response_.set_text(std::move(rest));
      StartWrite(&response_);
      return;
    }
    std::string text;
    absl::Status status = decoder_.Add(IdsOf(request_.ids()), &text);
    if (!status.ok()) {
      Finish(ToGrpcStatus(status));
      return;
    }
    if (request_.flush()) text += decoder_.Flush();
    response_.Clear();
    response_.set_text(std::move(text));
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed by the client"));
      return;
    }
    if (finishing_) {
      Finish(grpc::Status::OK);
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  tok::IncrementalDecoder decoder_;
  v1::DecodeStreamRequest request_;
  v1::DecodeStreamResponse response_;
  bool finishing_ = false;
};

}  // namespace

tok::EncodeOptions FromProto(const v1::EncodeOptions& options) {
  tok::EncodeOptions out;
  out.allowed_special.assign(options.allowed_special().begin(), options.allowed_special().end());
  out.allow_all_special = options.allow_all_special();
  out.disallow_special = options.disallow_special();
  out.add_bos = options.add_bos();
  out.algorithm = options.algorithm() == v1::ALGORITHM_LONGEST_MATCH
                      ? tok::Algorithm::kLongestMatch
                      : tok::Algorithm::kBpe;
  return out;
}

grpc::ServerUnaryReactor* TokenizerService::Encode(grpc::CallbackServerContext* context,
                                                   const v1::EncodeRequest* request,
                                                   v1::EncodeResponse* response) {
  return FinishNow(context,
                   EncodeInto(tokenizer_, request->text(), FromProto(request->options()), response));
}

grpc::ServerUnaryReactor* TokenizerService::EncodeBatch(grpc::CallbackServerContext* context,
                                                        const v1::EncodeBatchRequest* request,
                                                        v1::EncodeBatchResponse* response) {
  if (static_cast<uint32_t>(request->texts_size()) > limits_.max_batch_texts) {
    return FinishNow(context, absl::ResourceExhaustedError(
                                  StrCat("EncodeBatch of ", request->texts_size(),
                                         " texts exceeds the limit of ", limits_.max_batch_texts)));
  }
  const tok::EncodeOptions options = FromProto(request->options());
  for (int i = 0; i < request->texts_size(); ++i) {
    if (context->IsCancelled()) {
      return FinishNow(context, absl::CancelledError("cancelled by the client"));
    }
    absl::Status status = EncodeInto(tokenizer_, request->texts(i), options, response->add_results());
    if (!status.ok()) {
      return FinishNow(context, absl::Status(status.code(),
                                             StrCat("text ", i, ": ", status.message())));
    }
  }
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* TokenizerService::Decode(grpc::CallbackServerContext* context,
                                                   const v1::DecodeRequest* request,
                                                   v1::DecodeResponse* response) {
  std::string text;
  absl::Status status = tokenizer_.DecodeTo(IdsOf(request->ids()), &text);
  if (status.ok()) response->set_text(std::move(text));
  return FinishNow(context, status);
}

grpc::ServerBidiReactor<v1::DecodeStreamRequest, v1::DecodeStreamResponse>*
TokenizerService::DecodeStream(grpc::CallbackServerContext* context) {
  return new DecodeStreamReactor(tokenizer_);
}

grpc::ServerUnaryReactor* TokenizerService::Info(grpc::CallbackServerContext* context,
                                                 const v1::InfoRequest* request,
                                                 v1::InfoResponse* response) {
  const tok::Vocab& v = tokenizer_.vocab();
  response->set_vocab_size(static_cast<uint32_t>(tokenizer_.vocab_size()));
  for (const auto& [text, id] : tokenizer_.SpecialTokens()) {
    v1::SpecialToken* st = response->add_special_tokens();
    st->set_text(text);
    st->set_id(id);
    st->set_kind(KindName(v.token_types[id]));
  }
  if (v.bos_id) response->set_bos_id(*v.bos_id);
  if (v.eos_id) response->set_eos_id(*v.eos_id);
  if (v.eot_id) response->set_eot_id(*v.eot_id);
  if (v.unk_id) response->set_unk_id(*v.unk_id);
  response->set_add_bos(v.add_bos);
  response->set_pretokenizer(v.pretokenizer);
  for (const auto& re : v.pre_regexes) response->add_pretokenizer_regexes(re);
  response->set_format(v.format);
  response->set_source(v.source);
  response->set_chat_template(v.chat_template);
  response->set_max_request_bytes(limits_.max_request_bytes);
  response->set_max_batch_texts(limits_.max_batch_texts);
  return FinishNow(context, absl::OkStatus());
}

}  // namespace llm
