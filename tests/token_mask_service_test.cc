// Token masks over gRPC (PrefillRequest.mask, DecodeTokenRequest.mask and
// proposed_masks): the model service in this process, on a random-weight
// model with a vocabulary of 1003 tokens (its bitset's last byte has
// padding), on a loopback port. A masked response is the unmasked one
// restricted to the allowed tokens, in every logits encoding and every mask
// encoding, over Prefill, Decode and DecodeStream; each bad mask is
// INVALID_ARGUMENT naming the fault and leaves the session as it was; the
// client library sends StepOptions::mask and refuses a server that does not
// apply masks; a constrained generation's every step is the masked softmax
// of the full logits (ConstrainedExactnessTest).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/constrain/constraint.h"
#include "client/constrain/matcher.h"
#include "client/generate/fake_ports.h"
#include "client/generate/generate_loop.h"
#include "client/transport/model_client.h"
#include "common/grpc/request_log.h"
#include "common/grpc/server_runner.h"
#include "common/half.h"
#include "common/strings.h"
#include "common/token_mask.h"
#include "common/token_mask_proto.h"
#include "common/token_mask_testing.h"
#include "llm/v1/model.grpc.pb.h"
#include "model_svc/engine/engine.h"
#include "model_svc/server/model_service.h"
#include "model_svc/testing/random_model.h"

namespace llm {
namespace {

using testing::AllowedByLogit;
using testing::AllowedLogSumExp;
using ::testing::HasSubstr;
using testing::RandomTokenMask;

constexpr int64_t kVocab = 1003;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr TokenMaskEncoding kMaskEncodings[] = {
    TokenMaskEncoding::kBitset, TokenMaskEncoding::kAllowed, TokenMaskEncoding::kDisallowed};

model::testing::RandomModelSpec Spec() {
  model::testing::RandomModelSpec spec;
  spec.name = "random-token-mask-test";
  spec.vocab = kVocab;
  spec.d_model = 64;
  spec.layers = 2;
  spec.heads = 2;
  spec.kv_heads = 1;
  spec.ff = 128;
  spec.seed = 3;
  return spec;
}

v1::TokenMask ToWire(const TokenMask& m, TokenMaskEncoding e) {
  v1::TokenMask proto;
  TokenMaskToProto(m, e, &proto);
  return proto;
}

std::vector<float> Float32s(const v1::Logits& logits) {
  std::vector<float> out(logits.float32().size() / 4);
  std::memcpy(out.data(), logits.float32().data(), out.size() * 4);  // little-endian host
  return out;
}

std::vector<uint16_t> Halves(const v1::Logits& logits) {
  std::vector<uint16_t> out(logits.float16().size() / 2);
  std::memcpy(out.data(), logits.float16().data(), out.size() * 2);
  return out;
}

v1::LogitsOptions Encoding(v1::LogitsOptions::Encoding encoding, uint32_t top_n = 0) {
  v1::LogitsOptions options;
  options.set_encoding(encoding);
  options.set_top_n(top_n);
  return options;
}

// `got` is the float32 row `full` restricted to `mask`, in the encoding
// `options` asked for: float32 bit for bit (-inf where masked), float16 the
// halves of those, top-N the best allowed ids; log_sum_exp over the allowed
// ids.
void ExpectRestricted(const v1::Logits& got, const std::vector<float>& full, const TokenMask& mask,
                      const v1::LogitsOptions& options, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(full.size(), static_cast<size_t>(kVocab));
  const double lse = AllowedLogSumExp(full, mask);
  EXPECT_NEAR(got.log_sum_exp(), lse, 1e-5 * std::max(1.0, std::fabs(lse)));
  switch (options.encoding()) {
    case v1::LogitsOptions::LOGITS_FLOAT32: {
      const std::vector<float> values = Float32s(got);
      ASSERT_EQ(values.size(), full.size());
      for (int64_t i = 0; i < kVocab; ++i) {
        if (mask.allowed(i)) {
          ASSERT_EQ(std::bit_cast<uint32_t>(values[i]), std::bit_cast<uint32_t>(full[i])) << i;
        } else {
          ASSERT_EQ(values[i], -kInf) << i;
        }
      }
      break;
    }
    case v1::LogitsOptions::LOGITS_FLOAT16: {
      const std::vector<uint16_t> halves = Halves(got);
      ASSERT_EQ(halves.size(), full.size());
      for (int64_t i = 0; i < kVocab; ++i) {
        ASSERT_EQ(halves[i], mask.allowed(i) ? FloatToHalf(full[i]) : 0xfc00) << i;
      }
      break;
    }
    default: {
      const std::vector<int32_t> allowed = AllowedByLogit(full, mask, options.top_n());
      ASSERT_EQ(got.top_ids_size(), static_cast<int>(allowed.size()));
      for (size_t i = 0; i < allowed.size(); ++i) {
        EXPECT_EQ(got.top_ids(static_cast<int>(i)), allowed[i]) << "rank " << i;
        EXPECT_EQ(got.top_logits(static_cast<int>(i)), full[allowed[i]]) << "rank " << i;
      }
    }
  }
}

class TokenMaskServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model::ModelOptions model_options;
    model_options.kv_blocks = 64;
    auto model = model::testing::LoadRandomModel(Spec(), model_options, /*threads=*/1);
    ASSERT_TRUE(model.ok()) << model.status();
    SetLogLevel(LogLevel::kWarning);  // no line per call
    // Session ids name their replica, as the client library expects.
    engine::EngineOptions engine_options;
    engine_options.session_prefix = "replica-0.";
    auto engine = engine::Engine::Create(*std::move(model), engine_options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = engine->release();
    ModelServiceOptions service_options;
    service_options.replica_id = "replica-0";
    service_ = new ModelServiceImpl(*engine_, service_options);
    auto runner = ServerRunner::Start(ServerOptions(), {service_});
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = runner->release();
    runner_->SetServing(true);
    address_ = new std::string(StrCat("127.0.0.1:", runner_->port()));
    stub_ = v1::Model::NewStub(grpc::CreateChannel(*address_, grpc::InsecureChannelCredentials()))
                .release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    if (runner_ != nullptr) runner_->Shutdown(absl::Seconds(1));  // before the engine
    delete runner_;
    delete service_;
    delete engine_;
    delete address_;
  }

  static v1::Model::Stub& stub() { return *stub_; }

  static grpc::Status Prefill(const v1::PrefillRequest& request, v1::PrefillResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub().Prefill(&context, request, response);
  }
  static grpc::Status Decode(const v1::DecodeTokenRequest& request,
                             v1::DecodeTokenResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return stub().Decode(&context, request, response);
  }
  // One request on a DecodeStream of its own.
  static grpc::Status DecodeOnStream(const v1::DecodeTokenRequest& request,
                                     v1::DecodeTokenResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub().DecodeStream(&context);
    if (stream->Write(request)) stream->Read(response);
    stream->WritesDone();
    return stream->Finish();
  }

  // A new session holding `tokens`; its id.
  static std::string NewSession(const std::vector<int32_t>& tokens) {
    v1::PrefillRequest request;
    request.mutable_tokens()->Assign(tokens.begin(), tokens.end());
    v1::PrefillResponse response;
    const grpc::Status s = Prefill(request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.session_id();
  }
  // The unmasked float32 logits after `tokens`, on a session of their own.
  static std::vector<float> Reference(const std::vector<int32_t>& tokens) {
    v1::PrefillRequest request;
    request.mutable_tokens()->Assign(tokens.begin(), tokens.end());
    v1::PrefillResponse response;
    EXPECT_TRUE(Prefill(request, &response).ok());
    EXPECT_TRUE(engine_->Release(response.session_id()).ok());
    return Float32s(response.logits());
  }
  static engine::SessionInfo SessionOf(const std::string& id) {
    for (const engine::SessionInfo& s : engine_->ListSessions()) {
      if (s.id == id) return s;
    }
    ADD_FAILURE() << "no session " << id;
    return {};
  }

  static engine::Engine* engine_;
  static ModelServiceImpl* service_;
  static ServerRunner* runner_;
  static std::string* address_;
  static v1::Model::Stub* stub_;
};

engine::Engine* TokenMaskServiceTest::engine_ = nullptr;
ModelServiceImpl* TokenMaskServiceTest::service_ = nullptr;
ServerRunner* TokenMaskServiceTest::runner_ = nullptr;
std::string* TokenMaskServiceTest::address_ = nullptr;
v1::Model::Stub* TokenMaskServiceTest::stub_ = nullptr;

const v1::LogitsOptions kLogitsEncodings[] = {Encoding(v1::LogitsOptions::LOGITS_FLOAT32),
                                              Encoding(v1::LogitsOptions::LOGITS_FLOAT16),
                                              Encoding(v1::LogitsOptions::LOGITS_TOP_N, 5),
                                              Encoding(v1::LogitsOptions::LOGITS_TOP_N, kVocab)};

TEST_F(TokenMaskServiceTest, InfoSaysTheServerAppliesMasks) {
  v1::ModelInfo info;
  grpc::ClientContext context;
  ASSERT_TRUE(stub().Info(&context, {}, &info).ok());
  EXPECT_TRUE(info.token_mask());
  EXPECT_EQ(info.vocab_size(), kVocab);
}

TEST_F(TokenMaskServiceTest, AMaskedPrefillIsTheUnmaskedOneRestricted) {
  const std::vector<int32_t> prompt = {5, 900, 17, 1002, 64};
  const std::vector<float> full = Reference(prompt);
  uint32_t seed = 1;
  for (double density : {0.004, 0.3, 0.99}) {
    const TokenMask mask = RandomTokenMask(kVocab, density, ++seed);
    for (TokenMaskEncoding e : kMaskEncodings) {
      for (const v1::LogitsOptions& options : kLogitsEncodings) {
        v1::PrefillRequest request;
        request.mutable_tokens()->Assign(prompt.begin(), prompt.end());
        *request.mutable_logits() = options;
        *request.mutable_mask() = ToWire(mask, e);
        v1::PrefillResponse response;
        const grpc::Status s = Prefill(request, &response);
        ASSERT_TRUE(s.ok()) << s.error_message();
        ExpectRestricted(response.logits(), full, mask, options,
                         StrCat("density ", density, " mask encoding ", static_cast<int>(e),
                                " logits ", options.ShortDebugString()));
        ASSERT_TRUE(engine_->Release(response.session_id()).ok());
      }
    }
  }
}

TEST_F(TokenMaskServiceTest, AMaskedDecodeIsTheUnmaskedOneRestrictedOnBothCalls) {
  const std::vector<int32_t> prompt = {8, 9, 10};
  const std::vector<float> full = Reference({8, 9, 10, 300});
  const TokenMask mask = RandomTokenMask(kVocab, 0.05, 20);
  for (bool stream : {false, true}) {
    for (TokenMaskEncoding e : kMaskEncodings) {
      for (const v1::LogitsOptions& options : kLogitsEncodings) {
        const std::string id = NewSession(prompt);
        v1::DecodeTokenRequest request;
        request.set_session_id(id);
        request.set_token(300);
        *request.mutable_logits() = options;
        *request.mutable_mask() = ToWire(mask, e);
        v1::DecodeTokenResponse response;
        const grpc::Status s =
            stream ? DecodeOnStream(request, &response) : Decode(request, &response);
        ASSERT_TRUE(s.ok()) << s.error_message();
        EXPECT_EQ(response.num_tokens(), 4);
        ExpectRestricted(response.logits(), full, mask, options,
                         StrCat(stream ? "DecodeStream" : "Decode", " mask encoding ",
                                static_cast<int>(e), " logits ", options.ShortDebugString()));
        ASSERT_TRUE(engine_->Release(id).ok());
      }
    }
  }
}

TEST_F(TokenMaskServiceTest, ASpeculativeDecodeMasksEveryRow) {
  const std::vector<int32_t> prompt = {1, 2, 3, 4};
  const std::string id = NewSession(prompt);
  const std::vector<TokenMask> masks = {RandomTokenMask(kVocab, 0.5, 30),
                                        RandomTokenMask(kVocab, 0.01, 31),
                                        TokenMask::AllowAll(kVocab)};
  v1::DecodeTokenRequest request;
  request.set_session_id(id);
  request.set_token(50);
  request.add_proposed(51);
  request.add_proposed(52);
  *request.mutable_mask() = ToWire(masks[0], TokenMaskEncoding::kBitset);
  *request.add_proposed_masks() = ToWire(masks[1], TokenMaskEncoding::kAllowed);
  *request.add_proposed_masks() = ToWire(masks[2], TokenMaskEncoding::kDisallowed);
  v1::DecodeTokenResponse response;
  const grpc::Status s = Decode(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.proposed_logits_size(), 2);
  const v1::LogitsOptions f32 = Encoding(v1::LogitsOptions::LOGITS_FLOAT32);
  ExpectRestricted(response.logits(), Reference({1, 2, 3, 4, 50}), masks[0], f32, "the token");
  ExpectRestricted(response.proposed_logits(0), Reference({1, 2, 3, 4, 50, 51}), masks[1], f32,
                   "proposal 0");
  ExpectRestricted(response.proposed_logits(1), Reference({1, 2, 3, 4, 50, 51, 52}), masks[2], f32,
                   "proposal 1");
  ASSERT_TRUE(engine_->Release(id).ok());
}

// A bad mask on a Decode request, with what its error must say.
struct BadMask {
  std::string name;
  std::function<void(v1::DecodeTokenRequest*)> spoil;
  std::string error;
};

std::vector<BadMask> BadMasks() {
  auto mask = [](auto set) { return [set](v1::DecodeTokenRequest* r) { set(r->mutable_mask()); }; };
  return {
      {"a bitset a byte short", mask([](v1::TokenMask* m) { m->set_bitset(std::string(125, 1)); }),
       "mask.bitset has 125 bytes; a vocabulary of 1003 tokens takes 126"},
      {"a bitset a byte long", mask([](v1::TokenMask* m) { m->set_bitset(std::string(127, 1)); }),
       "mask.bitset has 127 bytes"},
      {"a padding bit set", mask([](v1::TokenMask* m) { m->set_bitset(std::string(126, 8)); }),
       "mask.bitset sets bit 1003, past the vocabulary of 1003 tokens"},
      {"an empty bitset", mask([](v1::TokenMask* m) { m->set_bitset(std::string(126, 0)); }),
       "mask allows no token"},
      {"unsorted ids", mask([](v1::TokenMask* m) {
         m->mutable_allowed()->add_ids(9);
         m->mutable_allowed()->add_ids(3);
       }),
       "mask.allowed id 3 at index 1 does not follow id 9 in increasing order"},
      {"a repeated id", mask([](v1::TokenMask* m) {
         m->mutable_disallowed()->add_ids(4);
         m->mutable_disallowed()->add_ids(4);
       }),
       "mask.disallowed id 4 at index 1 does not follow id 4"},
      {"an id out of range", mask([](v1::TokenMask* m) { m->mutable_allowed()->add_ids(1003); }),
       "mask.allowed id 1003 at index 0 is out of range [0, 1003)"},
      {"a list longer than the vocabulary", mask([](v1::TokenMask* m) {
         for (int i = 0; i < 1004; ++i) m->mutable_allowed()->add_ids(i);
       }),
       "mask.allowed has 1004 ids, more than the vocabulary's 1003"},
      {"no allowed id", mask([](v1::TokenMask* m) { m->mutable_allowed(); }),
       "mask allows no token"},
      {"every id disallowed", mask([](v1::TokenMask* m) {
         for (int i = 0; i < 1003; ++i) m->mutable_disallowed()->add_ids(i);
       }),
       "mask allows no token"},
      {"no encoding", mask([](v1::TokenMask*) {}), "mask has no encoding set"},
      {"proposed masks without proposals",
       [](v1::DecodeTokenRequest* r) {
         r->mutable_mask()->mutable_disallowed();
         r->add_proposed_masks()->mutable_disallowed();
       },
       "proposed_masks has 1 masks for 0 proposed tokens"},
      {"a masked decode's proposals without masks",
       [](v1::DecodeTokenRequest* r) {
         r->mutable_mask()->mutable_disallowed();
         r->add_proposed(7);
       },
       "a masked decode with 1 proposed tokens needs proposed_masks"},
      {"proposed masks without the token's",
       [](v1::DecodeTokenRequest* r) {
         r->add_proposed(7);
         r->add_proposed_masks()->mutable_disallowed();
       },
       "proposed_masks needs mask"},
      {"a bad proposed mask",
       [](v1::DecodeTokenRequest* r) {
         r->mutable_mask()->mutable_disallowed();
         r->add_proposed(7);
         r->add_proposed(8);
         r->add_proposed_masks()->mutable_disallowed();
         r->add_proposed_masks()->mutable_allowed()->add_ids(5000);
       },
       "proposed_masks[1].allowed id 5000 at index 0 is out of range"},
  };
}

TEST_F(TokenMaskServiceTest, BadMasksAreInvalidAndChangeNothing) {
  const std::vector<int32_t> prompt = {20, 21, 22, 23};
  const std::string id = NewSession(prompt);
  for (const BadMask& bad : BadMasks()) {
    SCOPED_TRACE(bad.name);
    v1::DecodeTokenRequest request;
    request.set_session_id(id);
    request.set_token(1);
    bad.spoil(&request);
    v1::DecodeTokenResponse response;
    for (bool stream : {false, true}) {
      const grpc::Status s =
          stream ? DecodeOnStream(request, &response) : Decode(request, &response);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << (stream ? "DecodeStream: " : "Decode: ") << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr(bad.error)) << (stream ? "DecodeStream" : "Decode");
    }
    // A Prefill with the same mask (the proposal rules are Decode's).
    if (request.proposed_size() == 0 && request.proposed_masks_size() == 0) {
      v1::PrefillRequest prefill;
      prefill.set_session_id(id);
      prefill.add_tokens(1);
      *prefill.mutable_mask() = request.mask();
      v1::PrefillResponse pr;
      const grpc::Status s = Prefill(prefill, &pr);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << "Prefill: " << s.error_message();
      EXPECT_THAT(s.error_message(), HasSubstr(bad.error)) << "Prefill";
    }
  }
  // A new session with a bad mask is not made.
  v1::PrefillRequest fresh;
  fresh.add_tokens(1);
  fresh.mutable_mask()->mutable_allowed();
  v1::PrefillResponse pr;
  EXPECT_EQ(Prefill(fresh, &pr).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(engine_->ListSessions().size(), 1u);
  // The session is as it was: its length, its counts, its next logits.
  const engine::SessionInfo info = SessionOf(id);
  EXPECT_EQ(info.num_tokens, 4);
  EXPECT_EQ(info.decoded_tokens, 0);
  EXPECT_EQ(info.prefilled_tokens, 4);
  v1::DecodeTokenRequest next;
  next.set_session_id(id);
  next.set_token(1);
  v1::DecodeTokenResponse response;
  ASSERT_TRUE(Decode(next, &response).ok());
  EXPECT_EQ(Float32s(response.logits()), Reference({20, 21, 22, 23, 1}));
  ASSERT_TRUE(engine_->Release(id).ok());
}

// The client library: StepOptions::mask on a Prefill and a DecodeSteps
// stream, in whichever wire encoding is cheapest.
TEST_F(TokenMaskServiceTest, TheClientSendsStepOptionsMask) {
  client::ClientOptions options;
  options.model_address = *address_;
  auto model = client::ModelClient::Create(options, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->Connect().ok());
  const TokenMask few = RandomTokenMask(kVocab, 0.003, 40),
                  most = RandomTokenMask(kVocab, 0.995, 41);
  client::StepOptions step;
  step.mask = &few;
  client::Session session;
  const std::vector<int32_t> prompt = {30, 31, 32};
  std::atomic<bool> cancel{false};
  int32_t rebuilds = 0;
  absl::StatusOr<client::PrefillResult> p =
      (*model)->Prefill(session, prompt, step, cancel, &rebuilds);
  ASSERT_TRUE(p.ok()) << p.status();
  const v1::LogitsOptions f32 = Encoding(v1::LogitsOptions::LOGITS_FLOAT32);
  ExpectRestricted(p->logits, Reference(prompt), few, f32, "Prefill");
  std::unique_ptr<client::DecodeSteps> steps = (*model)->OpenSteps(session, 4);
  step.mask = &most;
  steps->Send(33, step);
  absl::StatusOr<const v1::Logits*> d = steps->Await();
  ASSERT_TRUE(d.ok()) << d.status();
  ExpectRestricted(**d, Reference({30, 31, 32, 33}), most, f32, "DecodeSteps");
  EXPECT_TRUE(steps->Close().ok());
  EXPECT_TRUE((*model)->Release(session).ok());
}

// Exactness of a constrained step, end to end in process: a compiled
// constraint's masks (client/constrain), the real model service applying
// them to the random model's logits, the client library decoding them and
// the sampler drawing. At every sampled step the loop's logprob of the token
// and its top_logprobs are the log-softmax of the full, unmasked logits
// (Reference: a fresh Prefill of the same history) restricted to the tokens
// an independent Matcher allows there; greedy picks that restriction's
// argmax; and at temperature 0.7 the first token's frequencies over 2,000
// seeds follow softmax(full / 0.7) restricted (a chi-squared test, p =
// 0.001).
class ConstrainedExactnessTest : public TokenMaskServiceTest {
 protected:
  // Ids 10-19 "a".."j", 20-35 "k".."z", 36-45 "0".."9", 9 the end; the
  // others two-character pieces of "k".."z" and digits, or text the
  // constraint below never allows ("<0>".."<8>").
  static std::string Bytes(int32_t id) {
    static const std::string kPieceChars = "klmnopqrstuvwxyz0123456789";
    if (id == kEnd) return "";
    if (id < 9) return StrCat("<", id, ">");
    if (id < 36) return std::string(1, static_cast<char>('a' + id - 10));
    if (id < 46) return std::string(1, static_cast<char>('0' + id - 36));
    const int64_t k = (id - 46) % static_cast<int64_t>(kPieceChars.size() * kPieceChars.size());
    return {kPieceChars[k / kPieceChars.size()], kPieceChars[k % kPieceChars.size()]};
  }
  static constexpr int32_t kEnd = 9;  // FakeTokenizer's end id

  void SetUp() override {
    constrain::Vocabulary vocab;
    for (int32_t id = 0; id < kVocab; ++id) vocab.token_bytes.push_back(Bytes(id));
    tokenizer_.bytes = vocab.token_bytes;
    vocab.end_ids = {kEnd};
    auto compiler = constrain::Compiler::Create(vocab, {.threads = 1});
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    // First a letter a-j (ten single-character tokens), then 1 to 6 letters
    // or digits (hundreds of tokens allowed), nothing ever forced.
    auto c = (*compiler)->Compile({.kind = constrain::Kind::kRegex, .text = "[a-j][a-z0-9]{1,6}"});
    ASSERT_TRUE(c.ok()) << c.status();
    constraint_ = *c;
    client::ClientOptions options;
    options.model_address = *address_;
    auto model = client::ModelClient::Create(options, grpc::InsecureChannelCredentials());
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE((*model)->Connect().ok());
    model_ = *std::move(model);
    loop_ = std::make_unique<client::GenerateLoop>(tokenizer_, *model_);
  }

  struct Step {
    int32_t token;
    float logprob;
    std::vector<client::TopLogprob> top;
  };
  absl::StatusOr<client::GenerateResult> Generate(float temperature, uint64_t seed,
                                                  int32_t max_tokens, std::vector<Step>* steps) {
    client::GenerateParams p;
    p.sampling.temperature = temperature;
    p.sampling.seed = seed;
    p.max_tokens = max_tokens;
    p.top_logprobs = client::kMaxTopLogprobs;
    p.constraint = constraint_;
    client::Session session;
    auto r = loop_->Generate(session, kPrompt, p, [&](const client::TokenEvent& e) {
      if (e.token >= 0) steps->push_back({e.token, e.logprob, {e.top.begin(), e.top.end()}});
    });
    EXPECT_TRUE(loop_->Release(session).ok());
    return r;
  }

  // log p(id) restricted to the tokens the grammar allows after `generated`
  // (-inf where it allows none), from the unmasked logits of the history.
  std::vector<double> MaskedLogSoftmax(const std::vector<int32_t>& generated) {
    std::vector<int32_t> history(kPrompt.begin(), kPrompt.end());
    history.insert(history.end(), generated.begin(), generated.end());
    const std::vector<float> full = Reference(history);
    constrain::Matcher m(constraint_);
    for (int32_t t : generated) EXPECT_TRUE(m.Accept(t)) << t;
    std::vector<uint32_t> words(m.mask_words());
    EXPECT_TRUE(m.FillMask(words).ok());
    std::vector<double> out(kVocab, -std::numeric_limits<double>::infinity());
    double max = -std::numeric_limits<double>::infinity();
    for (int32_t id = 0; id < kVocab; ++id) {
      if ((words[id / 32] >> (id % 32)) & 1) max = std::max(max, static_cast<double>(full[id]));
    }
    double sum = 0;
    for (int32_t id = 0; id < kVocab; ++id) {
      if ((words[id / 32] >> (id % 32)) & 1) sum += std::exp(full[id] - max);
    }
    for (int32_t id = 0; id < kVocab; ++id) {
      if ((words[id / 32] >> (id % 32)) & 1) out[id] = full[id] - max - std::log(sum);
    }
    return out;
  }

  // Each step of `steps` against MaskedLogSoftmax of the tokens before it.
  void ExpectExact(const std::vector<Step>& steps, const std::string& what) {
    std::vector<int32_t> generated;
    for (size_t i = 0; i < steps.size(); ++i) {
      SCOPED_TRACE(StrCat(what, " step ", i));
      const std::vector<double> ref = MaskedLogSoftmax(generated);
      const Step& s = steps[i];
      ASSERT_GT(ref[s.token], -std::numeric_limits<double>::infinity())
          << "drew " << s.token << ", which the grammar does not allow";
      EXPECT_NEAR(s.logprob, ref[s.token], 2e-5 * std::max(1.0, std::fabs(ref[s.token])));
      // The reference's best allowed tokens (ties: lower id first).
      std::vector<int32_t> order;
      for (int32_t id = 0; id < kVocab; ++id) {
        if (ref[id] > -std::numeric_limits<double>::infinity()) order.push_back(id);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return ref[a] > ref[b]; });
      order.resize(std::min<size_t>(order.size(), client::kMaxTopLogprobs));
      ASSERT_EQ(s.top.size(), order.size());
      for (size_t j = 0; j < order.size(); ++j) {
        EXPECT_EQ(s.top[j].token, order[j]) << "rank " << j;
        EXPECT_NEAR(s.top[j].logprob, ref[order[j]], 2e-5 * std::max(1.0, std::fabs(ref[order[j]])))
            << "rank " << j;
      }
      generated.push_back(s.token);
    }
  }

  static constexpr std::array<int32_t, 4> kPrompt = {3, 700, 41, 12};
  client::testing::FakeTokenizer tokenizer_{nullptr};
  std::shared_ptr<const constrain::Constraint> constraint_;
  std::unique_ptr<client::ModelClient> model_;
  std::unique_ptr<client::GenerateLoop> loop_;
};

TEST_F(ConstrainedExactnessTest, EachStepIsTheMaskedSoftmaxOfTheFullLogits) {
  int steps_checked = 0;
  for (float temperature : {1.0f, 0.7f, 0.0f}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      std::vector<Step> steps;
      absl::StatusOr<client::GenerateResult> r = Generate(temperature, seed, 8, &steps);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(r->forced_tokens, 0);  // every step is a draw
      ExpectExact(steps, StrCat("temperature ", temperature, " seed ", seed));
      steps_checked += static_cast<int>(steps.size());
      if (temperature == 0.0f) {
        // Greedy: the restriction's argmax, each step.
        std::vector<int32_t> generated;
        for (const Step& s : steps) {
          const std::vector<double> ref = MaskedLogSoftmax(generated);
          EXPECT_EQ(s.token, std::max_element(ref.begin(), ref.end()) - ref.begin());
          generated.push_back(s.token);
        }
        break;  // one greedy run is every greedy run
      }
    }
  }
  EXPECT_GE(steps_checked, 14);
}

TEST_F(ConstrainedExactnessTest, DrawsFollowTheMaskedSoftmaxAtTheirTemperature) {
  constexpr float kTemperature = 0.7f;
  constexpr int kDraws = 2000;
  std::map<int32_t, int> counts;
  for (int seed = 0; seed < kDraws; ++seed) {
    std::vector<Step> steps;
    absl::StatusOr<client::GenerateResult> r =
        Generate(kTemperature, static_cast<uint64_t>(seed), 1, &steps);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(steps.size(), 1u);
    ++counts[steps[0].token];
  }
  // The first letter: softmax(full / T) over the ten allowed ids.
  const std::vector<float> full = Reference({kPrompt.begin(), kPrompt.end()});
  double z = 0;
  for (int32_t id = 10; id < 20; ++id) z += std::exp(full[id] / kTemperature);
  double chi2 = 0;
  int inside = 0;
  for (int32_t id = 10; id < 20; ++id) {
    const double expected = kDraws * std::exp(full[id] / kTemperature) / z;
    chi2 += (counts[id] - expected) * (counts[id] - expected) / expected;
    inside += counts[id];
  }
  EXPECT_EQ(inside, kDraws) << "a draw outside a-j";
  EXPECT_LT(chi2, 27.88) << "9 degrees of freedom, p = 0.001";
}

// A server older than token masks: its Info has no token_mask.
class OldModelService final : public v1::Model::CallbackService {
 public:
  grpc::ServerUnaryReactor* Info(grpc::CallbackServerContext* context, const v1::ModelInfoRequest*,
                                 v1::ModelInfo* info) override {
    info->set_vocab_size(kVocab);
    info->set_context_length(64);
    info->set_replica_id("old.1");
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* Prefill(grpc::CallbackServerContext* context, const v1::PrefillRequest*,
                                    v1::PrefillResponse*) override {
    ++prefills;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not in this test"));
    return reactor;
  }
  std::atomic<int> prefills{0};
};

TEST(TokenMaskClientTest, AServerWithoutMasksIsRefusedBeforeAnyCall) {
  OldModelService old;
  auto runner = ServerRunner::Start(ServerOptions(), {&old});
  ASSERT_TRUE(runner.ok()) << runner.status();
  (*runner)->SetServing(true);
  client::ClientOptions options;
  options.model_address = StrCat("127.0.0.1:", (*runner)->port());
  auto model = client::ModelClient::Create(options, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE((*model)->Connect().ok());
  const TokenMask mask = TokenMask::AllowAll(kVocab);
  client::StepOptions step;
  step.mask = &mask;
  client::Session session;
  const std::vector<int32_t> prompt = {1};
  std::atomic<bool> cancel{false};
  int32_t rebuilds = 0;
  absl::StatusOr<client::PrefillResult> p =
      (*model)->Prefill(session, prompt, step, cancel, &rebuilds);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition) << p.status();
  EXPECT_THAT(p.status().message(), HasSubstr("does not apply token masks"));
  EXPECT_EQ(old.prefills, 0);
  (*runner)->Shutdown(absl::Seconds(1));
}

}  // namespace
}  // namespace llm
