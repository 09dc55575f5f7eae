// The tokenizer service, as the client reaches it over gRPC: Encode, Decode,
// and the text of a generation (TokenizerPort, client/generate/ports.h).
//
// Text: with ClientOptions::Detokenize::kCachedDecode, over a cache of token
// bytes (client/generate/detokenizer.h) that PrefetchTokenBytes fills with
// the whole vocabulary (Decode with pieces), so a generation detokenizes
// without any call; ids left out are fetched on first sight, one Decode each.
// With kDecodeStream, one tokenizer DecodeStream per generation, one request
// per token.
//
// Deadlines: every unary call gets ClientOptions::rpc_timeout, and so does
// every step of a DecodeStream (whose whole call gets rpc_timeout per token,
// plus two).
//
// Threads: thread-safe after Connect and PrefetchTokenBytes (a process's
// generations share one: client/services.h). Ownership: owns its channel,
// stub and the cache; the text streams it opens must not outlive it.
#ifndef LLM_CLIENT_TRANSPORT_TOKENIZER_CLIENT_H_
#define LLM_CLIENT_TRANSPORT_TOKENIZER_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/generate/detokenizer.h"
#include "client/generate/ports.h"
#include "client/transport/client_options.h"
#include "llm/v1/tokenizer.grpc.pb.h"

namespace llm::client {

class TokenizerClient : public TokenizerPort {
 public:
  // Opens the channel to options.tokenizer_address with `creds`; no call.
  TokenizerClient(const ClientOptions& options,
                  const std::shared_ptr<grpc::ChannelCredentials>& creds);
  TokenizerClient(const TokenizerClient&) = delete;
  TokenizerClient& operator=(const TokenizerClient&) = delete;

  // Reads Info. UNAVAILABLE naming the address when it cannot be reached; a
  // server that answers UNAVAILABLE on a live connection (still loading) is
  // waited for up to ready_timeout (on_wait reports the wait), then
  // DEADLINE_EXCEEDED ("... is still loading after 2m"). UNIMPLEMENTED when
  // the address serves another service ("serves the model, not the
  // tokenizer").
  absl::Status Connect();

  // Fills the token-bytes cache with every id of the vocabulary that the
  // tokenizer decodes, by Decode with pieces (a few calls when
  // max_request_bytes requires). Best effort: stops at the first answer that
  // shows the server does not support pieces or that is not about the ids
  // (unreachable, UNIMPLEMENTED, ...), leaving the rest to the per-id fetch.
  void PrefetchTokenBytes();

  const v1::InfoResponse& info() const { return info_; }
  const std::string& address() const { return options_.tokenizer_address; }
  // The cache of token bytes that kCachedDecode uses (for tests and tools).
  const TokenBytesCache& token_bytes() const { return token_bytes_; }

  // TokenizerPort.
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              const EncodeOptions& options) override;
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids) override;
  // The bytes of one token: from the prefetched cache, else one Decode
  // (then cached).
  absl::StatusOr<std::string> TokenBytes(int32_t id) override;
  absl::StatusOr<std::unique_ptr<TextStream>> OpenText(int32_t max_tokens) override;
  std::span<const int32_t> end_ids() const override { return end_ids_; }
  bool add_bos() const override { return info_.add_bos(); }

 private:
  std::unique_ptr<grpc::ClientContext> NewContext() const;

  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Tokenizer::Stub> stub_;
  v1::InfoResponse info_;
  std::vector<int32_t> end_ids_;
  TokenBytesCache token_bytes_;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_TRANSPORT_TOKENIZER_CLIENT_H_
