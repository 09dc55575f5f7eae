// How the client reaches the tokenizer and model services: addresses,
// deadlines, waits, TLS and the per-generation choices of the transport.
#ifndef LLM_CLIENT_TRANSPORT_CLIENT_OPTIONS_H_
#define LLM_CLIENT_TRANSPORT_CLIENT_OPTIONS_H_

#include <functional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "client/generate/logits.h"
#include "common/grpc/security.h"

namespace llm::client {

// Connect waiting for a service that is still loading (ClientOptions::on_wait).
struct WaitProgress {
  std::string_view service;  // "tokenizer" or "model"
  std::string_view address;  // as given (the model target may name several replicas)
  absl::Duration waited;     // since the wait began
  absl::Duration limit;      // ClientOptions::ready_timeout
  bool done = false;         // the last call of this wait
};

struct ClientOptions {
  std::string tokenizer_address = "127.0.0.1:50051";
  // One model server "host:port", several "h1:p1,h2:p2", or "dns:///name:port"
  // (every A / AAAA record: one per pod of a headless Service).
  std::string model_address = "127.0.0.1:50052";
  // How often a dns:/// target is re-resolved and the replicas' Info re-read
  // (also done at once when a session's replica or every replica is missing).
  absl::Duration model_refresh_interval = absl::Seconds(30);
  // Deadline of each unary call, and of each step of a stream.
  absl::Duration rpc_timeout = absl::Seconds(60);
  // How long UNAVAILABLE answers are retried during a generation (a server
  // restarting).
  absl::Duration reconnect_timeout = absl::Seconds(30);
  // How long Connect waits for a service that is up but still loading (it
  // answers UNAVAILABLE on a live connection; the model server while it
  // reads its weights). Then Connect fails with DEADLINE_EXCEEDED.
  absl::Duration ready_timeout = absl::Seconds(120);
  // Called while Connect waits for a loading service: about every 200 ms,
  // and once more with `done` set when the wait ends (either way). Null: no
  // calls.
  std::function<void(const WaitProgress&)> on_wait;
  // Which logits encoding to ask for (logits.h; default: exact and cheapest).
  LogitsMode logits;
  // How text is made from ids. kCachedDecode: Connect fetches the bytes of
  // every token with Decode (pieces; a few calls when max_request_bytes
  // requires) into a cache, and the incremental UTF-8 work is done here: no
  // RPC per token. A tokenizer without pieces leaves the cache to fill
  // itself, one Decode per distinct token on first sight. kDecodeStream: one
  // tokenizer DecodeStream per generation, one request per token.
  enum class Detokenize { kCachedDecode, kDecodeStream };
  Detokenize detokenize = Detokenize::kCachedDecode;
  // With a sampler that picks the argmax (sampler::PicksArgmax: greedy, no
  // bias or penalties), tell the model service so on each decode step
  // (DecodeTokenRequest.lookahead): it computes the next step while the
  // logits travel here and the token travels back.
  bool lookahead = true;
  // TLS to both services (common/grpc/security.h): with tls.ca (or a client
  // certificate) the channels use TLS, verifying the servers with tls.ca;
  // tls.cert and tls.key present a client certificate (mutual TLS).
  TlsFiles tls;
  // The name checked against the servers' certificates; "": the address's host.
  std::string tls_server_name;
  // Sent as `authorization: Bearer <token>` on every call; "": none.
  std::string auth_token;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_TRANSPORT_CLIENT_OPTIONS_H_
