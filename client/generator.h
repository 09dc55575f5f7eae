// The generation loop of the client, over the tokenizer and model services:
//
//   Encode (tokenizer) -> Prefill (model: a new session, or append to one)
//   -> sample (sampler, here) -> DecodeStream (model: one bidi stream per
//   generation, one request per token) -> incremental detokenize (complete
//   UTF-8 only; by default over a cache of token bytes that Connect fills
//   with the whole vocabulary, detokenizer.h, or through the tokenizer's
//   DecodeStream) -> stop strings (held back across tokens) -> the caller's
//   callback, one call per token.
//
//   auto gen = Generator::Connect(options);            // both services' Info
//   Session session;                                    // a new model session
//   auto ids = (*gen)->Encode(prompt, {.allow_special = true});
//   auto result = (*gen)->Generate(session, *ids, params, on_token);
//   (*gen)->Release(session);
//
// Stops on the vocabulary's EOS / EOT ids (tokenizer Info), on a stop string
// (which never reaches the output), at max_tokens, when the model session is
// full (ModelInfo.context_length), or on Cancel().
//
// Replicas: ClientOptions::model_address may name several model servers (a
// comma-separated list, or dns:///NAME:PORT for every address of a headless
// Service); model_pool.h routes each session's calls to the replica that
// holds it (its id names the replica) and spreads new sessions round robin.
//
// Sessions: the client keeps its own copy of each session's tokens
// (Session::tokens). When the session is lost (NOT_FOUND: it expired, was
// evicted, or its replica restarted, which the id's epoch shows; UNAVAILABLE
// or a cancelled stream: its replica went away or is shutting down), the
// whole history is prefilled into a new session, on any replica that is up,
// and generation goes on where it was: the caller sees no error and no
// repeated text. When no replica takes new sessions (all restarting, loading
// or unreachable for a moment), that is retried with backoff for
// ClientOptions::reconnect_timeout.
//
// Pipelining: a sampled token is sent to the model first and detokenized
// while the model computes the next logits. So at a stop string the token
// that completed it is already in the session (its response is awaited and
// kept); the session then holds exactly the tokens fed, as Session::tokens
// says.
//
// Deadlines: every unary call gets ClientOptions::rpc_timeout, and so does
// every step of the streams (a response that takes longer cancels the stream
// with DEADLINE_EXCEEDED).
//
// Cancellation: Cancel() (async-signal-safe: it only sets a flag) stops the
// generation at the next token. The streams are closed cleanly (WritesDone,
// the in-flight response is read, Finish), so the session stays consistent.
// A Prefill in progress is cancelled at once (TryCancel); the session is then
// marked unsynced and rebuilt by the next call.
//
// Threads: a Generator runs one generation at a time (calls from several
// threads must be serialized); Cancel() may be called from any thread or a
// signal handler.
#ifndef LLM_CLIENT_GENERATOR_H_
#define LLM_CLIENT_GENERATOR_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/generate/detokenizer.h"
#include "client/generate/logits.h"
#include "client/transport/model_pool.h"
#include "common/grpc/security.h"
#include "llm/v1/model.grpc.pb.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "sampler/sampler.h"

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

struct GenerateParams {
  sampler::SamplingParams sampling;
  int32_t max_tokens = 256;       // >= 1
  std::vector<std::string> stop;  // non-empty strings
  bool ignore_eos = false;        // keep going past EOS / EOT (benchmarks)
};

// InvalidArgument naming the field: sampler::Validate, max_tokens < 1, an
// empty stop string.
absl::Status ValidateParams(const GenerateParams& params);

// kContext: the model session is full (ModelInfo.context_length tokens, or a
// decode step answered OUT_OF_RANGE): the last token was sampled from the
// logits of the last position and is not fed (it is in Session::pending).
enum class StopReason { kEos, kStopString, kMaxTokens, kCancelled, kContext };
// "eos", "stop", "length", "cancelled", "context".
std::string_view StopReasonName(StopReason reason);

// One callback per generated token, in order, plus at most one at the end of
// the stream (token -1) when held-back text is released then.
struct TokenEvent {
  std::string_view text;  // text released now: valid UTF-8, possibly empty
  int32_t token = -1;     // the token; -1: end of stream
  float logprob = 0.0f;   // log p(token) under the model (sampler::Sample)
};
using TokenCallback = std::function<void(const TokenEvent&)>;

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated, without the EOS / EOT that ended it
  std::string text;             // all released text (what the callback got)
  StopReason stop_reason = StopReason::kMaxTokens;
  int64_t prompt_tokens = 0;           // new tokens prefilled by this call
  absl::Duration time_to_first_token;  // Generate's start to the first sampled token
  absl::Duration decode_time;          // first sampled token to the last
  int32_t session_rebuilds = 0;        // lost sessions re-prefilled
  int32_t inexact_samples = 0;         // samples with !Sample::exact (forced top-N)
  v1::LogitsOptions logits;            // the encoding used

  // Decode rate: tokens after the first per second of decode_time (0 if < 2).
  double tokens_per_second() const;
};

// The client's copy of one model session. A default-constructed Session has
// no model session yet: the next Generate creates one.
struct Session {
  std::string id;                // the model session; empty: none (yet)
  std::vector<int32_t> tokens;   // every token the model session holds, in order
  std::vector<int32_t> pending;  // sampled but not fed yet (prefilled by the next call)
  bool unsynced = false;         // a cancelled Prefill left the model's length unknown
};

struct EncodeOptions {
  bool allow_special = false;  // recognize special-token text (chat templates)
  bool add_bos = false;        // prepend the vocabulary's BOS
};

class Generator {
 public:
  // Opens channels to both services and reads their Info; with
  // kCachedDecode, then fetches the vocabulary's token bytes (best effort:
  // a failure there only leaves them to be fetched per id). Fails with
  // UNAVAILABLE naming the address of a service that cannot be reached; a
  // server that answers UNAVAILABLE on a live connection (still loading) is
  // waited for up to ready_timeout (on_wait reports the wait), then
  // DEADLINE_EXCEEDED ("... is still loading after 2m"). UNIMPLEMENTED when an
  // address serves the other service ("serves the tokenizer, not the
  // model"). FailedPrecondition when the vocabularies disagree (tokenizer
  // vocab_size > model vocab_size).
  static absl::StatusOr<std::unique_ptr<Generator>> Connect(const ClientOptions& options);

  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;
  ~Generator();

  const ClientOptions& options() const { return options_; }
  const v1::InfoResponse& tokenizer_info() const { return tokenizer_info_; }
  const v1::ModelInfo& model_info() const { return model_info_; }
  // The ids that end a generation (EOS and EOT of the vocabulary).
  const std::vector<int32_t>& end_ids() const { return end_ids_; }

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              const EncodeOptions& options = {});
  absl::StatusOr<std::string> Decode(std::span<const int32_t> ids);

  // Appends session.pending and `new_tokens` to the session (Prefill: the
  // whole history into a new session when session.id is empty) and generates.
  // `on_token` may be null. Errors: InvalidArgument for bad params or nothing
  // to prefill; the services' errors other than the lost sessions and
  // retried outages described above; CANCELLED only when Cancel() came
  // during the Prefill (a cancel during decoding ends with kCancelled).
  absl::StatusOr<GenerateResult> Generate(Session& session, std::span<const int32_t> new_tokens,
                                          const GenerateParams& params,
                                          const TokenCallback& on_token);

  // Ends the model session (best effort: a session that is gone is fine) and
  // clears `session`.
  absl::Status Release(Session& session);

  // The sessions of every model replica that is up (for tests and tools).
  absl::StatusOr<v1::ListSessionsResponse> ListSessions();
  // The model replicas (for tests and tools).
  const ModelPool& model_pool() const { return *pool_; }
  // The cache of token bytes that kCachedDecode uses (for tests and tools).
  const TokenBytesCache& token_bytes() const { return *token_bytes_; }

  // Stops the current or next generation (see above). Async-signal-safe.
  void Cancel() { cancel_.store(true, std::memory_order_relaxed); }
  // Re-arms after a Cancel(); Generate does not clear the flag itself.
  void ClearCancel() { cancel_.store(false, std::memory_order_relaxed); }
  bool cancel_requested() const { return cancel_.load(std::memory_order_relaxed); }

 private:
  class Run;
  explicit Generator(const ClientOptions& options);
  absl::Status Init();

  // Prefill with the retries above: appends `tokens` to session (all of
  // session.tokens + tokens into a new session when session.id is empty or
  // lost). On success session.tokens has `tokens` appended. `lookahead`:
  // PrefillRequest.lookahead.
  absl::StatusOr<v1::PrefillResponse> PrefillWithRecovery(Session& session,
                                                          std::span<const int32_t> tokens,
                                                          const v1::LogitsOptions& logits,
                                                          bool lookahead, int32_t* rebuilds);
  // One Prefill call, cancellable, to the session's replica (a new one's
  // from the pool). Marks a replica that answers UNAVAILABLE down, and
  // learns the replica id of a new session.
  grpc::Status PrefillOnce(const v1::PrefillRequest& request, v1::PrefillResponse* response);

  std::unique_ptr<grpc::ClientContext> NewContext() const;
  // Fills token_bytes_ with every id of the vocabulary that the tokenizer
  // decodes, by Decode with pieces. Best effort: stops at the first answer
  // that shows the server does not support pieces or that is not about the
  // ids (unreachable, UNIMPLEMENTED, ...), leaving the rest to the per-id
  // fetch.
  void PrefetchTokenBytes();

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> tokenizer_channel_;
  std::unique_ptr<v1::Tokenizer::Stub> tokenizer_;
  std::unique_ptr<ModelPool> pool_;
  v1::InfoResponse tokenizer_info_;
  v1::ModelInfo model_info_;
  std::vector<int32_t> end_ids_;
  std::unique_ptr<TokenBytesCache> token_bytes_;  // kCachedDecode
  std::atomic<bool> cancel_{false};
  sampler::Sampler sampler_;
};

}  // namespace llm::client

#endif  // LLM_CLIENT_GENERATOR_H_
