// gRPC front of the tokenizer: llm.v1.Tokenizer on the callback API.
//
// Every handler runs the (bounded, CPU-only) tokenizer work inline in gRPC's
// callback thread and answers at once; DecodeStream is one reactor per stream
// that alternates one read and one write. absl::Status from the library is
// turned into grpc::Status here and nowhere else.
//
// Ownership: borrows the Tokenizer, which must outlive the service.
// Threads: all methods may run concurrently; the Tokenizer is immutable.
#ifndef LLM_TOKENIZER_SVC_SERVICE_TOKENIZER_SERVICE_H_
#define LLM_TOKENIZER_SVC_SERVICE_TOKENIZER_SERVICE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/grpc/security.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "tokenizer_svc/service/tokenizer_metrics.h"
#include "tokenizer_svc/tokenizer.h"

namespace llm {

struct TokenizerServiceLimits {
  uint64_t max_request_bytes = 8 << 20;  // enforced by the server; reported by Info
  uint32_t max_batch_texts = 1024;       // EncodeBatch; more is RESOURCE_EXHAUSTED
};

// Encode takes its request unparsed (WithRawCallbackMethod), to answer a
// request that does not parse (an EncodeRequest.text that is not valid UTF-8)
// INVALID_ARGUMENT with the reason: gRPC itself answers INTERNAL, saying
// nothing.
class TokenizerService final
    : public v1::Tokenizer::WithRawCallbackMethod_Encode<v1::Tokenizer::CallbackService> {
 public:
  // `metrics` (optional) must outlive the service.
  TokenizerService(const tok::Tokenizer& tokenizer, TokenizerServiceLimits limits,
                   TokenizerMetrics* metrics = nullptr)
      : tokenizer_(tokenizer), limits_(limits), metrics_(metrics) {}

  // Requires the bearer token of `auth` on every call (UNAUTHENTICATED
  // otherwise); `auth` must outlive the service. Call before the server starts.
  void SetAuth(const BearerAuth* auth) { auth_ = auth; }

  // An llm.v1.EncodeRequest in, an llm.v1.EncodeResponse out.
  grpc::ServerUnaryReactor* Encode(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request_bytes,
                                   grpc::ByteBuffer* response_bytes) override;
  grpc::ServerUnaryReactor* EncodeBatch(grpc::CallbackServerContext* context,
                                        const v1::EncodeBatchRequest* request,
                                        v1::EncodeBatchResponse* response) override;
  grpc::ServerUnaryReactor* Decode(grpc::CallbackServerContext* context,
                                   const v1::DecodeRequest* request,
                                   v1::DecodeResponse* response) override;
  grpc::ServerBidiReactor<v1::DecodeStreamRequest, v1::DecodeStreamResponse>* DecodeStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context,
                                 const v1::InfoRequest* request,
                                 v1::InfoResponse* response) override;

 private:
  // Counts one call in the metrics (if any) and writes its log line.
  void Observe(const char* method, uint64_t bytes, absl::Time start, int64_t tokens,
               const absl::Status& status) const;
  absl::Status EncodeBatchInto(const v1::EncodeBatchRequest& request,
                               grpc::CallbackServerContext* context,
                               v1::EncodeBatchResponse* response) const;

  const tok::Tokenizer& tokenizer_;
  const TokenizerServiceLimits limits_;
  TokenizerMetrics* const metrics_;
  const BearerAuth* auth_ = nullptr;
};

// The longest allowed_special entry a request may carry (no special token of
// any known vocabulary comes near it).
inline constexpr size_t kMaxSpecialTokenNameBytes = 256;

// INVALID_ARGUMENT for an algorithm the proto does not define, or an
// allowed_special entry over kMaxSpecialTokenNameBytes.
absl::Status ValidateEncodeOptions(const v1::EncodeOptions& options);

// Converts wire options to library options (after ValidateEncodeOptions).
tok::EncodeOptions FromProto(const v1::EncodeOptions& options);

}  // namespace llm

#endif  // LLM_TOKENIZER_SVC_SERVICE_TOKENIZER_SERVICE_H_
