// The client's prefetch of token bytes (Generator::Connect with
// kCachedDecode): the real tokenizer_server and model_server binaries (random
// models whose vocabulary fits the tokenizer's) on loopback, with the
// Generator's tokenizer calls going through an in-process proxy that counts
// Decode calls and can play an older server:
//   - against a server with pieces, Connect fetches the whole vocabulary in
//     one call (mpt, 50,432 ids) or in chunks under the server's
//     max_request_bytes, skipping the gaps of cl100k; a generation then makes
//     no Decode call at all;
//   - against a server that ignores pieces (it answers text), or has no
//     Decode, Connect still succeeds and the per-id fetch does the work;
//   - the text is the same either way, and the same as kDecodeStream's.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/generator.h"
#include "client/transport/model_client.h"
#include "client/transport/tokenizer_client.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "llm/v1/model.grpc.pb.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "model_svc/testing/random_model.h"
#include "tests/server_process.h"

namespace llm {
namespace {

constexpr uint32_t kMptVocabSize = 50432;
constexpr uint32_t kCl100kVocabSize = 100277;
constexpr int kCl100kGaps = 16;  // 100256 and 100261-100275 name no token
constexpr int kCl100kMaxRequestBytes = 65536;

std::string MptPath() {
  return testing::SharedDir() + "/conformance/llama-vocab/ggml-vocab-mpt.gguf";
}
std::string Cl100kPath() { return testing::SharedDir() + "/tokenizer/cl100k_base.tiktoken"; }

// A small random Llama model with `vocab` tokens, written to a temporary file;
// "" on failure.
std::string WriteModel(int64_t vocab) {
  model::testing::RandomModelSpec spec;
  spec.name = StrCat("random-prefetch-", vocab);
  spec.vocab = vocab;
  spec.d_model = 32;
  spec.layers = 1;
  spec.heads = 2;
  spec.kv_heads = 1;
  spec.ff = 64;
  spec.tied = true;
  spec.seed = 3;
  const std::string path = StrCat(::testing::TempDir(), "prefetch_", vocab, "_", getpid(), ".gguf");
  absl::StatusOr<std::string> bytes = model::testing::RandomModelGguf(spec);
  if (!bytes.ok()) return "";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
  return out ? path : "";
}

// llm.v1.Tokenizer in front of a real tokenizer_server: forwards Info, Encode
// and Decode, counts the Decode calls, and can answer like a server that
// predates DecodeRequest.pieces (drops the field) or has no Decode.
class TokenizerProxy final : public v1::Tokenizer::Service {
 public:
  enum class Mode { kForward, kWithoutPieces, kWithoutDecode };

  TokenizerProxy(const std::string& backend, Mode mode)
      : stub_(v1::Tokenizer::NewStub(
            grpc::CreateChannel(backend, grpc::InsecureChannelCredentials()))),
        mode_(mode) {}

  grpc::Status Info(grpc::ServerContext*, const v1::InfoRequest* request,
                    v1::InfoResponse* response) override {
    grpc::ClientContext context;
    return stub_->Info(&context, *request, response);
  }
  grpc::Status Encode(grpc::ServerContext*, const v1::EncodeRequest* request,
                      v1::EncodeResponse* response) override {
    grpc::ClientContext context;
    return stub_->Encode(&context, *request, response);
  }
  grpc::Status Decode(grpc::ServerContext*, const v1::DecodeRequest* request,
                      v1::DecodeResponse* response) override {
    ++decode_calls_;
    if (request->pieces()) ++pieces_calls_;
    if (mode_ == Mode::kWithoutDecode) return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "");
    v1::DecodeRequest forwarded = *request;
    if (mode_ == Mode::kWithoutPieces) forwarded.clear_pieces();
    grpc::ClientContext context;
    return stub_->Decode(&context, forwarded, response);
  }

  int decode_calls() const { return decode_calls_; }
  int pieces_calls() const { return pieces_calls_; }

 private:
  std::unique_ptr<v1::Tokenizer::Stub> stub_;
  const Mode mode_;
  std::atomic<int> decode_calls_{0};
  std::atomic<int> pieces_calls_{0};
};

// A proxy served in this process on a free loopback port.
struct ProxyServer {
  ProxyServer(const std::string& backend, TokenizerProxy::Mode mode) : proxy(backend, mode) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.SetMaxReceiveMessageSize(8 << 20);
    builder.RegisterService(&proxy);
    server = builder.BuildAndStart();
  }
  ~ProxyServer() {
    if (server != nullptr) server->Shutdown(std::chrono::system_clock::now());
  }
  std::string address() const { return StrCat("127.0.0.1:", port); }

  TokenizerProxy proxy;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

client::GenerateParams Greedy(int max_tokens) {
  client::GenerateParams p;
  p.sampling.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// One tokenizer_server and one model_server for the suite.
class PrefetchTest : public ::testing::Test {
 protected:
  // `vocab`: the vocabulary file; `model_vocab`: the random model's size.
  void StartServers(const std::string& vocab, int64_t model_vocab,
                    const std::vector<std::string>& tokenizer_flags = {}) {
    if (!std::filesystem::exists(vocab)) GTEST_SKIP() << "missing " << vocab;
    std::vector<std::string> flags = {"--vocab", vocab};
    flags.insert(flags.end(), tokenizer_flags.begin(), tokenizer_flags.end());
    testing::StartServer(&tokenizer_, "tokenizer_server", flags, std::chrono::seconds(60));
    ASSERT_NE(tokenizer_.stub, nullptr) << tokenizer_.error;
    model_path_ = WriteModel(model_vocab);
    ASSERT_FALSE(model_path_.empty());
    testing::StartServer(&model_, "model_server",
                         {"--model", model_path_, "--backend", "cpu", "--threads", "1",
                          "--kv_cache_mb", "8", "--drain_seconds", "1"},
                         std::chrono::seconds(60));
    ASSERT_NE(model_.stub, nullptr) << model_.error;
  }

  void TearDown() override {
    testing::StopServerAndExpectCleanExit(&model_);
    testing::StopServerAndExpectCleanExit(&tokenizer_);
    if (!model_path_.empty()) std::filesystem::remove(model_path_);
  }

  std::unique_ptr<client::Generator> Connect(const std::string& tokenizer_address,
                                             client::ClientOptions::Detokenize detokenize =
                                                 client::ClientOptions::Detokenize::kCachedDecode) {
    client::ClientOptions o;
    o.tokenizer_address = tokenizer_address;
    o.model_address = model_.process->address();
    o.rpc_timeout = absl::Seconds(60);
    o.detokenize = detokenize;
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<client::Generator>> g = client::Generator::Connect(o);
    connect_ms_ = absl::ToDoubleMilliseconds(absl::Now() - start);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? std::move(*g) : nullptr;
  }

  // A greedy generation of `tokens` tokens on a new session.
  client::GenerateResult Generate(client::Generator& g, int tokens) {
    absl::StatusOr<std::vector<int32_t>> prompt = g.Encode("The lighthouse keeper said");
    EXPECT_TRUE(prompt.ok()) << prompt.status();
    if (!prompt.ok()) return {};
    client::Session session;
    absl::StatusOr<client::GenerateResult> r =
        g.Generate(session, *prompt, Greedy(tokens), nullptr);
    EXPECT_TRUE(r.ok()) << r.status();
    g.Release(session).IgnoreError();
    return r.ok() ? *std::move(r) : client::GenerateResult();
  }

  testing::ServerState<v1::Tokenizer> tokenizer_;
  testing::ServerState<v1::Model> model_;
  std::string model_path_;
  double connect_ms_ = 0;
};

TEST_F(PrefetchTest, WholeVocabularyInOneCallThenNoDecodeWhileGenerating) {
  StartServers(MptPath(), kMptVocabSize);
  if (IsSkipped() || HasFatalFailure()) return;
  ProxyServer proxy(tokenizer_.process->address(), TokenizerProxy::Mode::kForward);
  ASSERT_NE(proxy.server, nullptr);
  std::unique_ptr<client::Generator> g = Connect(proxy.address());
  ASSERT_NE(g, nullptr);
  std::printf("[ prefetch ] mpt, %u ids: Connect %.1f ms, %d Decode call(s)\n", kMptVocabSize,
              connect_ms_, proxy.proxy.decode_calls());
  EXPECT_EQ(proxy.proxy.decode_calls(), 1);  // 50,432 ids: ~150 KB, under 8 MiB
  EXPECT_EQ(proxy.proxy.pieces_calls(), 1);
  EXPECT_EQ(g->services().grpc_tokenizer()->token_bytes().preloaded(), kMptVocabSize);

  const client::GenerateResult first = Generate(*g, 48);
  ASSERT_EQ(first.tokens.size(), 48u);
  const client::GenerateResult second = Generate(*g, 16);
  EXPECT_EQ(proxy.proxy.decode_calls(), 1) << "Decode calls while generating";
  EXPECT_EQ(g->services().grpc_tokenizer()->token_bytes().fetches(), 0);

  // The same text without pieces (per-id fetches) and through DecodeStream.
  ProxyServer old(tokenizer_.process->address(), TokenizerProxy::Mode::kWithoutPieces);
  std::unique_ptr<client::Generator> lazy = Connect(old.address());
  ASSERT_NE(lazy, nullptr);
  EXPECT_EQ(lazy->services().grpc_tokenizer()->token_bytes().preloaded(), 0);
  const client::GenerateResult lazy_first = Generate(*lazy, 48);
  EXPECT_EQ(lazy_first.tokens, first.tokens);
  EXPECT_EQ(lazy_first.text, first.text);
  EXPECT_GT(lazy->services().grpc_tokenizer()->token_bytes().fetches(), 0);

  std::unique_ptr<client::Generator> stream =
      Connect(tokenizer_.process->address(), client::ClientOptions::Detokenize::kDecodeStream);
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(stream->services().grpc_tokenizer()->token_bytes().preloaded(),
            0);  // DecodeStream does not use the cache
  const client::GenerateResult streamed = Generate(*stream, 48);
  EXPECT_EQ(streamed.tokens, first.tokens);
  EXPECT_EQ(streamed.text, first.text);
}

TEST_F(PrefetchTest, ChunksUnderMaxRequestBytesAndSkipsTheGaps) {
  StartServers(Cl100kPath(), kCl100kVocabSize,
               {"--max_request_bytes", std::to_string(kCl100kMaxRequestBytes)});
  if (IsSkipped() || HasFatalFailure()) return;
  ProxyServer proxy(tokenizer_.process->address(), TokenizerProxy::Mode::kForward);
  ASSERT_NE(proxy.server, nullptr);
  std::unique_ptr<client::Generator> g = Connect(proxy.address());
  ASSERT_NE(g, nullptr);
  std::printf("[ prefetch ] cl100k, %u ids, 64 KiB requests: Connect %.1f ms, %d Decode calls\n",
              kCl100kVocabSize, connect_ms_, proxy.proxy.decode_calls());
  // Every id but the gaps; ~300 KB of ids in 5 chunks, plus the halvings that
  // isolate the gaps (both at the end).
  EXPECT_EQ(g->services().grpc_tokenizer()->token_bytes().preloaded(),
            kCl100kVocabSize - kCl100kGaps);
  EXPECT_EQ(g->services().grpc_tokenizer()->token_bytes().fetches(), 0);
  EXPECT_GE(proxy.proxy.decode_calls(), 5);
  EXPECT_LE(proxy.proxy.decode_calls(), 120);
}

TEST_F(PrefetchTest, ServerWithoutPiecesOrDecodeLeavesThePerIdFetch) {
  StartServers(MptPath(), kMptVocabSize);
  if (IsSkipped() || HasFatalFailure()) return;
  {  // Ignores pieces: one call that answers text, then per-id fetches.
    ProxyServer old(tokenizer_.process->address(), TokenizerProxy::Mode::kWithoutPieces);
    std::unique_ptr<client::Generator> g = Connect(old.address());
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(old.proxy.decode_calls(), 1);
    EXPECT_EQ(g->services().grpc_tokenizer()->token_bytes().preloaded(), 0);
    const client::GenerateResult r = Generate(*g, 12);
    EXPECT_EQ(r.tokens.size(), 12u);
    EXPECT_GT(g->services().grpc_tokenizer()->token_bytes().fetches(), 0);
    EXPECT_EQ(old.proxy.decode_calls(),
              1 + g->services().grpc_tokenizer()->token_bytes().fetches());
  }
  {  // No Decode at all: UNIMPLEMENTED, and Connect still succeeds.
    ProxyServer none(tokenizer_.process->address(), TokenizerProxy::Mode::kWithoutDecode);
    std::unique_ptr<client::Generator> g = Connect(none.address());
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(none.proxy.decode_calls(), 1);
    EXPECT_EQ(g->services().grpc_tokenizer()->token_bytes().preloaded(), 0);
  }
}

}  // namespace
}  // namespace llm
