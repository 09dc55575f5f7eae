#include "tokenizer_svc/service/tokenizer_service.h"

#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/clock.h"
#include "common/grpc/grpc_status.h"
#include "common/grpc/request_log.h"
#include "common/status_macros.h"
#include "common/strings.h"
#include "common/utf8.h"
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

bool IsValidUtf8(std::string_view s) {
  for (size_t pos = 0, len = 0; pos < s.size(); pos += len) {
    if (DecodeUtf8(s, pos, &len) < 0) return false;
  }
  return true;
}

// Why `bytes` does not parse as an EncodeRequest: a `text` that is not valid
// UTF-8 (protobuf refuses such a string), or not an EncodeRequest at all.
absl::Status EncodeRequestParseError(const grpc::ByteBuffer& bytes) {
  std::string wire;
  if (std::vector<grpc::Slice> slices; bytes.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
    }
  }
  google::protobuf::UnknownFieldSet fields;
  if (fields.ParseFromString(wire)) {
    for (int i = 0; i < fields.field_count(); ++i) {
      const google::protobuf::UnknownField& f = fields.field(i);
      if (f.number() == v1::EncodeRequest::kTextFieldNumber &&
          f.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED &&
          !IsValidUtf8(f.length_delimited())) {
        return absl::InvalidArgumentError(
            "EncodeRequest.text is not valid UTF-8, as a protobuf string must be; send "
            "text that is not UTF-8 as bytes, in text_bytes");
      }
    }
  }
  return absl::InvalidArgumentError("the request does not parse as an llm.v1.EncodeRequest");
}

// Parses the request of Encode, which gRPC hands over unparsed so that a
// request it cannot parse is INVALID_ARGUMENT with the reason, not INTERNAL.
absl::Status ParseEncodeRequest(const grpc::ByteBuffer& bytes, v1::EncodeRequest* request) {
  grpc::ByteBuffer view(bytes);  // shares the slices; the reader consumes its own
  grpc::ProtoBufferReader reader(&view);
  if (!reader.status().ok() || !request->ParseFromZeroCopyStream(&reader)) {
    return EncodeRequestParseError(bytes);
  }
  return absl::OkStatus();
}

// The ids of a repeated field, without copying them.
std::span<const uint32_t> IdsOf(const google::protobuf::RepeatedField<uint32_t>& ids) {
  return {ids.data(), static_cast<size_t>(ids.size())};
}

// Decode with pieces: each id's bytes in its own entry of response->pieces,
// validated as DecodeTo does (the first bad id is the error, and the response
// is left empty). *bytes: the bytes written.
absl::Status DecodePieces(const tok::Tokenizer& tokenizer, std::span<const uint32_t> ids,
                          v1::DecodeResponse* response, uint64_t* bytes) {
  google::protobuf::RepeatedPtrField<std::string>* pieces = response->mutable_pieces();
  pieces->Reserve(static_cast<int>(ids.size()));
  for (uint32_t id : ids) {
    absl::StatusOr<std::string_view> piece = tokenizer.TokenBytes(id);
    if (!piece.ok()) {
      pieces->Clear();
      *bytes = 0;
      return piece.status();
    }
    pieces->Add()->assign(piece->data(), piece->size());
    *bytes += piece->size();
  }
  return absl::OkStatus();
}

const char* KindName(tok::TokenType type) {
  switch (type) {
    case tok::TokenType::kUserDefined:
      return "user_defined";
    case tok::TokenType::kUnknown:
      return "unknown";
    default:
      return "control";
  }
}

// One DecodeStream call: read a request, write its delta, repeat; on the
// client's half-close, write the held bytes (if any) and finish OK.
class DecodeStreamReactor final
    : public grpc::ServerBidiReactor<v1::DecodeStreamRequest, v1::DecodeStreamResponse> {
 public:
  // `auth`: the call's authentication; not OK ends the call with it.
  DecodeStreamReactor(const tok::Tokenizer& tokenizer, TokenizerMetrics* metrics,
                      const grpc::Status& auth)
      : decoder_(tokenizer), metrics_(metrics) {
    if (!auth.ok()) {
      status_ = FromGrpcStatus(auth);
      Finish(auth);
      return;
    }
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
      bytes_ += rest.size();
      response_.Clear();
      response_.set_text(std::move(rest));
      StartWrite(&response_);
      return;
    }
    std::string text;
    log_.add_tokens(request_.ids_size());
    absl::Status status = decoder_.Add(IdsOf(request_.ids()), &text);
    if (!status.ok()) {
      status_ = status;
      Finish(ToGrpcStatus(status));
      return;
    }
    if (request_.flush()) text += decoder_.Flush();
    bytes_ += text.size();
    response_.Clear();
    response_.set_text(std::move(text));
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      status_ = absl::CancelledError("stream closed by the client");
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream closed by the client"));
      return;
    }
    if (finishing_) {
      Finish(grpc::Status::OK);
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override {
    if (metrics_ != nullptr) metrics_->Observe("DecodeStream", bytes_, absl::Seconds(-1));
    log_.Finish(status_);
    delete this;
  }

 private:
  tok::IncrementalDecoder decoder_;
  TokenizerMetrics* const metrics_;
  uint64_t bytes_ = 0;                           // text written
  RequestLog log_{"tokenizer", "DecodeStream"};  // tokens: ids decoded
  absl::Status status_;                          // the final status, for the log
  v1::DecodeStreamRequest request_;
  v1::DecodeStreamResponse response_;
  bool finishing_ = false;
};

}  // namespace

absl::Status ValidateEncodeOptions(const v1::EncodeOptions& options) {
  if (!v1::Algorithm_IsValid(options.algorithm())) {
    return absl::InvalidArgumentError(StrCat("unknown algorithm ",
                                             static_cast<int>(options.algorithm()),
                                             " (ALGORITHM_BPE = 0, ALGORITHM_LONGEST_MATCH = 1)"));
  }
  for (const std::string& name : options.allowed_special()) {
    if (name.size() > kMaxSpecialTokenNameBytes) {
      return absl::InvalidArgumentError(StrCat("an allowed_special entry has ", name.size(),
                                               " bytes, more than the limit of ",
                                               kMaxSpecialTokenNameBytes));
    }
  }
  return absl::OkStatus();
}

tok::EncodeOptions FromProto(const v1::EncodeOptions& options) {
  tok::EncodeOptions out;
  out.allowed_special.assign(options.allowed_special().begin(), options.allowed_special().end());
  out.allow_all_special = options.allow_all_special();
  out.disallow_special = options.disallow_special();
  out.add_bos = options.add_bos();
  out.algorithm = options.algorithm() == v1::ALGORITHM_LONGEST_MATCH ? tok::Algorithm::kLongestMatch
                                                                     : tok::Algorithm::kBpe;
  return out;
}

void TokenizerService::Observe(const char* method, uint64_t bytes, absl::Time start, int64_t tokens,
                               const absl::Status& status) const {
  if (metrics_ != nullptr) metrics_->Observe(method, bytes, absl::Now() - start);
  RequestLog log("tokenizer", method, start);
  log.add_tokens(tokens);
  log.Finish(status);
}

grpc::ServerUnaryReactor* TokenizerService::Encode(grpc::CallbackServerContext* context,
                                                   const grpc::ByteBuffer* request_bytes,
                                                   grpc::ByteBuffer* response_bytes) {
  if (grpc::Status auth = CheckAuth(auth_, *context); !auth.ok()) {
    RequestLog("tokenizer", __func__).Finish(FromGrpcStatus(auth));
    return FinishNow(context, FromGrpcStatus(auth));
  }
  const absl::Time start = absl::Now();
  v1::EncodeRequest request;
  v1::EncodeResponse response;
  absl::Status status = ParseEncodeRequest(*request_bytes, &request);
  if (status.ok()) status = ValidateEncodeOptions(request.options());
  const std::string& text =
      request.input_case() == v1::EncodeRequest::kText ? request.text() : request.text_bytes();
  if (status.ok()) status = EncodeInto(tokenizer_, text, FromProto(request.options()), &response);
  if (status.ok()) {
    bool own_buffer = false;
    status = FromGrpcStatus(grpc::SerializationTraits<v1::EncodeResponse>::Serialize(
        response, response_bytes, &own_buffer));
  }
  Observe("Encode", text.size(), start, response.ids_size(), status);
  return FinishNow(context, status);
}

grpc::ServerUnaryReactor* TokenizerService::EncodeBatch(grpc::CallbackServerContext* context,
                                                        const v1::EncodeBatchRequest* request,
                                                        v1::EncodeBatchResponse* response) {
  if (grpc::Status auth = CheckAuth(auth_, *context); !auth.ok()) {
    RequestLog("tokenizer", __func__).Finish(FromGrpcStatus(auth));
    return FinishNow(context, FromGrpcStatus(auth));
  }
  const absl::Time start = absl::Now();
  uint64_t bytes = 0;
  for (const std::string& text : request->texts()) bytes += text.size();
  absl::Status status = EncodeBatchInto(*request, context, response);
  int64_t tokens = 0;
  for (const v1::EncodeResponse& r : response->results()) tokens += r.ids_size();
  Observe("EncodeBatch", bytes, start, tokens, status);
  return FinishNow(context, status);
}

absl::Status TokenizerService::EncodeBatchInto(const v1::EncodeBatchRequest& request,
                                               grpc::CallbackServerContext* context,
                                               v1::EncodeBatchResponse* response) const {
  if (static_cast<uint32_t>(request.texts_size()) > limits_.max_batch_texts) {
    return absl::ResourceExhaustedError(StrCat("EncodeBatch of ", request.texts_size(),
                                               " texts exceeds the limit of ",
                                               limits_.max_batch_texts));
  }
  LLM_RETURN_IF_ERROR(ValidateEncodeOptions(request.options()));
  const tok::EncodeOptions options = FromProto(request.options());
  for (int i = 0; i < request.texts_size(); ++i) {
    if (context->IsCancelled()) return absl::CancelledError("cancelled by the client");
    absl::Status status =
        EncodeInto(tokenizer_, request.texts(i), options, response->add_results());
    if (!status.ok()) {
      return absl::Status(status.code(), StrCat("text ", i, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* TokenizerService::Decode(grpc::CallbackServerContext* context,
                                                   const v1::DecodeRequest* request,
                                                   v1::DecodeResponse* response) {
  if (grpc::Status auth = CheckAuth(auth_, *context); !auth.ok()) {
    RequestLog("tokenizer", __func__).Finish(FromGrpcStatus(auth));
    return FinishNow(context, FromGrpcStatus(auth));
  }
  const absl::Time start = absl::Now();
  if (request->pieces()) {
    uint64_t bytes = 0;
    absl::Status status = DecodePieces(tokenizer_, IdsOf(request->ids()), response, &bytes);
    Observe("Decode", bytes, start, request->ids_size(), status);
    return FinishNow(context, status);
  }
  std::string text;
  absl::Status status = tokenizer_.DecodeTo(IdsOf(request->ids()), &text);
  Observe("Decode", text.size(), start, request->ids_size(), status);
  if (status.ok()) response->set_text(std::move(text));
  return FinishNow(context, status);
}

grpc::ServerBidiReactor<v1::DecodeStreamRequest, v1::DecodeStreamResponse>*
TokenizerService::DecodeStream(grpc::CallbackServerContext* context) {
  return new DecodeStreamReactor(tokenizer_, metrics_, CheckAuth(auth_, *context));
}

grpc::ServerUnaryReactor* TokenizerService::Info(grpc::CallbackServerContext* context,
                                                 const v1::InfoRequest* request,
                                                 v1::InfoResponse* response) {
  if (grpc::Status auth = CheckAuth(auth_, *context); !auth.ok()) {
    RequestLog("tokenizer", __func__).Finish(FromGrpcStatus(auth));
    return FinishNow(context, FromGrpcStatus(auth));
  }
  Observe("Info", 0, absl::Now(), 0, absl::OkStatus());
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
