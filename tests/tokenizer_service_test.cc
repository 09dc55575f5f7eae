// Integration test of the tokenizer service: starts the real tokenizer_server
// binary as a child process on a free loopback port, talks to it over gRPC with
// the generated stubs (a generic stub for the health service; reflection
// through common/grpc/reflection_testing.h), runs the real `llm` client
// against it, and checks that SIGTERM makes it exit with status 0.
//
// Two servers: cl100k_base (.tiktoken, with small limits so that the limit
// checks are cheap) and ggml-vocab-mpt.gguf (GGUF, with user-defined tokens).
// Each suite starts its server once (SetUpTestSuite) and stops it in
// TearDownTestSuite, where the clean exit is checked.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/gguf/gguf_writer.h"
#include "common/grpc/reflection_testing.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "llm/v1/tokenizer.grpc.pb.h"
#include "tests/server_process.h"
#include "tokenizer_svc/testing/vectors.h"

namespace llm {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

using testing::BinPath;
using testing::CheckHealth;
using testing::Clock;
using testing::DescribeWaitStatus;
using testing::ExitedZero;
using testing::HealthResult;
using testing::kServing;
using testing::ServerProcess;
using ServerState = testing::ServerState<v1::Tokenizer>;

// ---------------------------------------------------------------------------
// Paths and reference data.

std::string Cl100kPath() { return testing::SharedDir() + "/tokenizer/cl100k_base.tiktoken"; }
std::string Cl100kVectorsPath() {
  return testing::SharedDir() + "/tokenizer/vectors/cl100k_base.jsonl";
}
std::string MptPath() {
  return testing::SharedDir() + "/conformance/llama-vocab/ggml-vocab-mpt.gguf";
}

using testing::ReadVectors;
using testing::Vector;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF, and
// no character cut off at the end.
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i - 1 < n) return false;
    for (size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

TEST(Utf8HelperTest, AcceptsAndRejects) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("abc é 你好 🤖"));
  EXPECT_FALSE(IsValidUtf8("\xF0\x9F\xA4"));      // cut-off emoji
  EXPECT_FALSE(IsValidUtf8("\x96"));              // lone continuation byte
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
}

// ---------------------------------------------------------------------------
// Child processes.

struct ProcessResult {
  int wait_status = -1;
  std::string out;
};

// Runs a command to completion with `input` on its stdin (through a temporary
// file, so no pipe can fill up) and returns its stdout and wait status.
ProcessResult RunProcess(const std::vector<std::string>& argv, const std::string& input) {
  ProcessResult result;
  std::string in_path = ::testing::TempDir() + "llm_cli_input_XXXXXX";
  const int in_fd = mkstemp(in_path.data());
  if (in_fd < 0) {
    ADD_FAILURE() << "mkstemp: " << std::strerror(errno);
    return result;
  }
  unlink(in_path.c_str());
  if (write(in_fd, input.data(), input.size()) != static_cast<ssize_t>(input.size()) ||
      lseek(in_fd, 0, SEEK_SET) != 0) {
    ADD_FAILURE() << "writing the input file: " << std::strerror(errno);
    close(in_fd);
    return result;
  }
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    close(in_fd);
    return result;
  }
  std::string error;
  const pid_t pid = testing::Spawn(argv, in_fd, out_pipe[1], &error);
  close(in_fd);
  close(out_pipe[1]);
  if (pid < 0) {
    ADD_FAILURE() << error;
    close(out_pipe[0]);
    return result;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(out_pipe[0], buf, sizeof(buf))) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    result.out.append(buf, static_cast<size_t>(n));
  }
  close(out_pipe[0]);
  const std::optional<int> status = testing::WaitForExit(pid, std::chrono::seconds(30));
  if (!status) {
    ADD_FAILURE() << argv[0] << " did not exit within 30 s";
  } else {
    result.wait_status = *status;
  }
  return result;
}

// ---------------------------------------------------------------------------
// Fixture: one server per suite.

// Starts tokenizer_server on `vocab` with `extra_flags`.
void StartTokenizerServer(ServerState* state, const std::string& vocab,
                          const std::vector<std::string>& extra_flags) {
  if (!std::filesystem::exists(vocab)) {
    state->error = StrCat("missing vocabulary ", vocab);
    return;
  }
  std::vector<std::string> flags = {"--vocab", vocab};
  flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
  testing::StartServer(state, "tokenizer_server", flags, std::chrono::seconds(30));
}

std::chrono::system_clock::time_point Deadline() {
  return std::chrono::system_clock::now() + std::chrono::seconds(30);
}

class TokenizerServiceTestBase : public testing::ServerTestBase<v1::Tokenizer> {
 protected:
  void SetUp() override {
    if (state().error.rfind("missing vocabulary", 0) == 0) GTEST_SKIP() << state().error;
    ServerTestBase::SetUp();
  }

  grpc::Status Encode(const std::string& text, const v1::EncodeOptions& options,
                      std::vector<uint32_t>* ids) const {
    v1::EncodeRequest request;
    request.set_text_bytes(text);  // any bytes (the vectors hold invalid UTF-8)
    *request.mutable_options() = options;
    v1::EncodeResponse response;
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    grpc::Status status = stub().Encode(&context, request, &response);
    ids->assign(response.ids().begin(), response.ids().end());
    return status;
  }

  // Encode that must succeed.
  std::vector<uint32_t> MustEncode(const std::string& text,
                                   const v1::EncodeOptions& options = {}) const {
    std::vector<uint32_t> ids;
    const grpc::Status status = Encode(text, options, &ids);
    EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    return ids;
  }

  grpc::Status Decode(const std::vector<uint32_t>& ids, std::string* text) const {
    v1::DecodeRequest request;
    request.mutable_ids()->Assign(ids.begin(), ids.end());
    v1::DecodeResponse response;
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    grpc::Status status = stub().Decode(&context, request, &response);
    *text = response.text();
    return status;
  }

  std::string MustDecode(const std::vector<uint32_t>& ids) const {
    std::string text;
    const grpc::Status status = Decode(ids, &text);
    EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    return text;
  }

  // Decode with pieces=true; *pieces gets the pieces, and the response's
  // text must be empty.
  grpc::Status DecodePieces(const std::vector<uint32_t>& ids,
                            std::vector<std::string>* pieces) const {
    v1::DecodeRequest request;
    request.mutable_ids()->Assign(ids.begin(), ids.end());
    request.set_pieces(true);
    v1::DecodeResponse response;
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    grpc::Status status = stub().Decode(&context, request, &response);
    EXPECT_EQ(response.text(), "");
    pieces->assign(response.pieces().begin(), response.pieces().end());
    return status;
  }

  std::vector<std::string> MustDecodePieces(const std::vector<uint32_t>& ids) const {
    std::vector<std::string> pieces;
    const grpc::Status status = DecodePieces(ids, &pieces);
    EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    return pieces;
  }

  // Pieces, one per id, each Decode({id}), together Decode(ids).
  void ExpectPiecesMatchDecode(const std::vector<uint32_t>& ids) const {
    const std::vector<std::string> pieces = MustDecodePieces(ids);
    ASSERT_EQ(pieces.size(), ids.size());
    std::string joined;
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(pieces[i], MustDecode({ids[i]})) << "id " << ids[i];
      joined += pieces[i];
    }
    EXPECT_EQ(joined, MustDecode(ids));
  }

  v1::InfoResponse MustInfo() const {
    v1::InfoResponse response;
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    const grpc::Status status = stub().Info(&context, v1::InfoRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    return response;
  }
};

// ---------------------------------------------------------------------------
// cl100k_base server (small limits: 64 KiB per request, 8 texts per batch).

constexpr uint32_t kCl100kVocabSize = 100277;
constexpr uint32_t kEndOfText = 100257;
constexpr int kMaxRequestBytes = 65536;
constexpr int kMaxBatchTexts = 8;

class Cl100kServerTest
    : public testing::SuiteServerTest<Cl100kServerTest, TokenizerServiceTestBase> {
 public:
  static void StartSuiteServer(ServerState* state) {
    StartTokenizerServer(state, Cl100kPath(),
                         {"--max-batch-texts", std::to_string(kMaxBatchTexts),
                          "--max-request-bytes", std::to_string(kMaxRequestBytes)});
  }

  static void SetUpTestSuite() {
    SuiteServerTest::SetUpTestSuite();
    if (std::filesystem::exists(Cl100kVectorsPath())) {
      vectors_ = new std::vector<Vector>(ReadVectors(Cl100kVectorsPath()));
    } else {
      vectors_ = new std::vector<Vector>();
    }
  }

  static void TearDownTestSuite() {
    SuiteServerTest::TearDownTestSuite();
    delete vectors_;
    vectors_ = nullptr;
  }

 protected:
  void SetUp() override {
    TokenizerServiceTestBase::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ASSERT_GE(vectors_->size(), 100u) << "need the vectors in " << Cl100kVectorsPath();
  }

  // Ids of `text` that end inside a multi-byte character: the first ids of a
  // character split over several tokens. Returns {prefix, rest}.
  std::pair<std::vector<uint32_t>, std::vector<uint32_t>> SplitCharacterIds() const {
    for (const char* candidate : {"🤖", "🦀", "🧬", "𝄞", "🫠", "😀"}) {
      const std::vector<uint32_t> ids = MustEncode(candidate);
      if (ids.size() < 2) continue;
      const std::vector<uint32_t> prefix(ids.begin(), ids.end() - 1);
      const std::string held = MustDecode(prefix);
      if (!held.empty() && !IsValidUtf8(held)) return {prefix, {ids.back()}};
    }
    ADD_FAILURE() << "no candidate character spans several cl100k tokens";
    return {};
  }

  static std::vector<Vector>* vectors_;
};

std::vector<Vector>* Cl100kServerTest::vectors_ = nullptr;

TEST_F(Cl100kServerTest, HealthReportsServing) {
  const HealthResult overall = CheckHealth(channel(), "", std::chrono::seconds(5));
  ASSERT_TRUE(overall.status.ok()) << overall.status.error_message();
  EXPECT_EQ(overall.serving_status, kServing);
  const HealthResult tokenizer =
      CheckHealth(channel(), "llm.v1.Tokenizer", std::chrono::seconds(5));
  ASSERT_TRUE(tokenizer.status.ok()) << tokenizer.status.error_message();
  EXPECT_EQ(tokenizer.serving_status, kServing);
  const HealthResult unknown = CheckHealth(channel(), "no.such.Service", std::chrono::seconds(5));
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
}

// What grpcurl's list and describe do, over grpc.reflection.v1 (which gRPC
// 1.51's own reflection did not serve) and v1alpha; grpc.health.v1.Health
// was listed and could not be described.
TEST_F(Cl100kServerTest, ReflectionDescribesEveryService) {
  testing::ExpectReflectionDescribesEveryService(channel(), "llm.v1.Tokenizer",
                                                 "llm.v1.Tokenizer.Encode");
}

TEST_F(Cl100kServerTest, EncodeEqualsTiktokenVectors) {
  size_t checked = 0;
  for (size_t i = 0; i < vectors_->size(); ++i) {
    const Vector& v = (*vectors_)[i];
    std::vector<uint32_t> ids;
    const grpc::Status status = Encode(v.text, {}, &ids);
    ASSERT_TRUE(status.ok()) << "vector " << i << ": " << status.error_message();
    EXPECT_EQ(ids, v.ids) << "vector " << i << ": "
                          << ::testing::PrintToString(v.text.substr(0, 80));
    ++checked;
  }
  EXPECT_GE(checked, 100u);
}

// EncodeRequest's two forms: `text` (a string, what JSON tools send) and
// `text_bytes` (field 1, the `bytes text` of older clients) give the same ids,
// and so does the JSON that grpcurl would send (docs/tokenizer.md).
TEST_F(Cl100kServerTest, EncodeTakesTextAsAStringOrAsBytes) {
  const std::string text = "Hello, world! Grüße, 世界";
  const std::vector<uint32_t> expected = MustEncode(text);
  ASSERT_FALSE(expected.empty());
  const auto encode = [&](const v1::EncodeRequest& request) {
    v1::EncodeResponse response;
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    const grpc::Status status = stub().Encode(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
    return std::vector<uint32_t>(response.ids().begin(), response.ids().end());
  };
  v1::EncodeRequest request;
  request.set_text(text);
  EXPECT_EQ(encode(request), expected);
  // An old client's request: field 1 as bytes, written by hand.
  std::string old_wire;
  testing::AppendStringField(&old_wire, 1, text);
  ASSERT_TRUE(request.ParseFromString(old_wire));
  EXPECT_EQ(request.input_case(), v1::EncodeRequest::kTextBytes);
  EXPECT_EQ(encode(request), expected);
  // The JSON of the docs.
  for (const std::string json :
       {"{\"text\": \"Hello, world!\"}", "{\"text_bytes\": \"SGVsbG8sIHdvcmxkIQ==\"}",
        "{\"textBytes\": \"SGVsbG8sIHdvcmxkIQ==\"}"}) {
    request.Clear();
    const auto parsed = google::protobuf::util::JsonStringToMessage(json, &request);
    ASSERT_TRUE(parsed.ok()) << json << ": " << parsed;
    EXPECT_THAT(encode(request), ElementsAre(9906, 11, 1917, 0)) << json;
  }
  // Neither form: the empty text.
  EXPECT_THAT(encode(v1::EncodeRequest()), ::testing::IsEmpty());
}

// A `text` that is not valid UTF-8 (which a protobuf client should refuse to
// send) or a request that is no EncodeRequest at all is INVALID_ARGUMENT
// saying so (gRPC's own parse failure is INTERNAL with no message); the
// bytes form takes the same text.
TEST_F(Cl100kServerTest, EncodeRequestThatDoesNotParseIsInvalidArgument) {
  std::string wire;
  testing::AppendStringField(&wire, 3, "ab\xFF");  // text = 3
  std::string response;
  grpc::Status status = testing::RawUnaryCall(channel(), "/llm.v1.Tokenizer/Encode", wire,
                                              std::chrono::seconds(30), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("not valid UTF-8"));
  EXPECT_THAT(status.error_message(), HasSubstr("text_bytes"));

  status = testing::RawUnaryCall(channel(), "/llm.v1.Tokenizer/Encode", "\xFF\xFF\xFF",
                                 std::chrono::seconds(30), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("does not parse as an llm.v1.EncodeRequest"));

  std::vector<uint32_t> ids;
  status = Encode("ab\xFF", {}, &ids);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(MustDecode(ids), "ab\xFF");
}

TEST_F(Cl100kServerTest, EncodeBatchIsInOrderAndEqualsEncode) {
  for (size_t start = 0; start < vectors_->size(); start += kMaxBatchTexts) {
    const size_t end = std::min(vectors_->size(), start + kMaxBatchTexts);
    v1::EncodeBatchRequest request;
    // Reverse order within the batch, so that order matters.
    for (size_t i = end; i-- > start;) request.add_texts((*vectors_)[i].text);
    v1::EncodeBatchResponse response;
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    const grpc::Status status = stub().EncodeBatch(&context, request, &response);
    ASSERT_TRUE(status.ok()) << "batch at " << start << ": " << status.error_message();
    ASSERT_EQ(static_cast<size_t>(response.results_size()), end - start);
    for (size_t k = 0; k < end - start; ++k) {
      const size_t i = end - 1 - k;
      const std::vector<uint32_t> batch_ids(response.results(static_cast<int>(k)).ids().begin(),
                                            response.results(static_cast<int>(k)).ids().end());
      EXPECT_EQ(batch_ids, (*vectors_)[i].ids) << "vector " << i;
      if (start < 4 * kMaxBatchTexts) {  // and against the Encode RPC itself
        EXPECT_EQ(batch_ids, MustEncode((*vectors_)[i].text)) << "vector " << i;
      }
    }
  }
}

TEST_F(Cl100kServerTest, EncodeBatchWithOptionsAndEmptyBatch) {
  v1::EncodeBatchRequest request;
  request.add_texts("a<|endoftext|>b");
  request.add_texts("");
  request.add_texts("<|endoftext|>");
  request.mutable_options()->add_allowed_special("<|endoftext|>");
  v1::EncodeBatchResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  ASSERT_TRUE(stub().EncodeBatch(&context, request, &response).ok());
  ASSERT_EQ(response.results_size(), 3);
  EXPECT_THAT(response.results(0).ids(), Contains(kEndOfText));
  EXPECT_THAT(response.results(1).ids(), SizeIs(0));
  EXPECT_THAT(response.results(2).ids(), ElementsAre(kEndOfText));

  v1::EncodeBatchResponse empty_response;
  grpc::ClientContext empty_context;
  empty_context.set_deadline(Deadline());
  ASSERT_TRUE(stub().EncodeBatch(&empty_context, v1::EncodeBatchRequest(), &empty_response).ok());
  EXPECT_EQ(empty_response.results_size(), 0);
}

TEST_F(Cl100kServerTest, EncodeBatchErrorNamesTheText) {
  v1::EncodeBatchRequest request;
  request.add_texts("fine");
  request.add_texts("also fine");
  request.add_texts("not <|endoftext|> fine");
  request.mutable_options()->set_disallow_special(true);
  v1::EncodeBatchResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  const grpc::Status status = stub().EncodeBatch(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), AllOf(HasSubstr("text 2"), HasSubstr("<|endoftext|>")));
}

TEST_F(Cl100kServerTest, EncodeBatchOverTheLimitIsResourceExhausted) {
  v1::EncodeBatchRequest request;
  for (int i = 0; i < kMaxBatchTexts; ++i) request.add_texts("text");
  {
    v1::EncodeBatchResponse response;
    grpc::ClientContext context;
    context.set_deadline(Deadline());
    EXPECT_TRUE(stub().EncodeBatch(&context, request, &response).ok()) << "exactly at the limit";
    EXPECT_EQ(response.results_size(), kMaxBatchTexts);
  }
  request.add_texts("one too many");
  v1::EncodeBatchResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  const grpc::Status status = stub().EncodeBatch(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(kMaxBatchTexts)));
}

TEST_F(Cl100kServerTest, DecodeReturnsExactBytes) {
  for (size_t i = 0; i < vectors_->size(); ++i) {
    const Vector& v = (*vectors_)[i];
    std::string text;
    const grpc::Status status = Decode(v.ids, &text);
    ASSERT_TRUE(status.ok()) << "vector " << i << ": " << status.error_message();
    EXPECT_EQ(text, v.text) << "vector " << i;
  }
  // A token that is not valid UTF-8 on its own still comes back byte-exact.
  const auto [prefix, rest] = SplitCharacterIds();
  ASSERT_FALSE(prefix.empty());
  const std::string partial = MustDecode(prefix);
  EXPECT_FALSE(IsValidUtf8(partial));
  EXPECT_EQ(partial + MustDecode(rest), MustDecode([&] {
              std::vector<uint32_t> all = prefix;
              all.insert(all.end(), rest.begin(), rest.end());
              return all;
            }()));
}

TEST_F(Cl100kServerTest, DecodeOutOfRangeIsInvalidArgumentNamingTheId) {
  for (uint32_t bad : {kCl100kVocabSize, 123456789u, 4294967295u}) {
    std::string text;
    const grpc::Status status = Decode({9906, bad, 11}, &text);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(bad)));
  }
  // The largest id decodes.
  EXPECT_EQ(MustDecode({kCl100kVocabSize - 1}), "<|endofprompt|>");
  EXPECT_EQ(MustDecode({}), "");
}

// Ids of cl100k that name a token: the gaps between the ranks and the special
// tokens (100256, 100261-100275) do not.
bool IsCl100kToken(uint32_t id) {
  return id < 100256 || (id >= 100257 && id <= 100260) || id == 100276;
}

TEST_F(Cl100kServerTest, DecodePiecesConcatenateToDecode) {
  // Random id lists (repeats allowed), each with the ids of a character
  // split over tokens, whose pieces are invalid UTF-8 on their own.
  const auto [prefix, rest] = SplitCharacterIds();
  ASSERT_FALSE(prefix.empty());
  std::vector<std::string> split = MustDecodePieces(prefix);
  ASSERT_EQ(split.size(), prefix.size());
  EXPECT_FALSE(IsValidUtf8(split.back()));
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<uint32_t> any_id(0, kCl100kVocabSize - 1);
  std::uniform_int_distribution<int> length(0, 64);
  for (int round = 0; round < 20; ++round) {
    std::vector<uint32_t> ids;
    for (int n = length(rng); static_cast<int>(ids.size()) < n;) {
      const uint32_t id = any_id(rng);
      if (IsCl100kToken(id)) ids.push_back(id);
    }
    const size_t at = ids.empty() ? 0 : rng() % ids.size();
    ids.insert(ids.begin() + static_cast<std::ptrdiff_t>(at), prefix.begin(), prefix.end());
    ids.insert(ids.begin() + static_cast<std::ptrdiff_t>(at + prefix.size()), rest.begin(),
               rest.end());
    SCOPED_TRACE(StrCat("round ", round));
    ExpectPiecesMatchDecode(ids);
  }
  // Special tokens, the vectors' ids, and nothing at all.
  ExpectPiecesMatchDecode({kEndOfText, kCl100kVocabSize - 1, kEndOfText});
  for (size_t i = 0; i < vectors_->size(); i += 10) ExpectPiecesMatchDecode((*vectors_)[i].ids);
  EXPECT_THAT(MustDecodePieces({}), SizeIs(0));
}

TEST_F(Cl100kServerTest, DecodePiecesBadIdIsInvalidArgumentNamingTheId) {
  // Out of range, and the gaps of cl100k.
  for (uint32_t bad : {kCl100kVocabSize, 123456789u, 4294967295u, 100256u, 100270u}) {
    std::vector<std::string> pieces;
    const grpc::Status status = DecodePieces({9906, bad, 11}, &pieces);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(bad)));
    EXPECT_THAT(pieces, SizeIs(0));
  }
  // Decode without pieces says the same about a gap.
  std::string text;
  EXPECT_EQ(Decode({100256}, &text).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(Cl100kServerTest, DecodePiecesObeysMaxRequestBytes) {
  // The whole vocabulary is ~300 KB of packed ids (3 bytes each from id
  // 16384): over this server's 64 KiB, RESOURCE_EXHAUSTED like any request.
  std::vector<uint32_t> all;
  for (uint32_t id = 0; id < kCl100kVocabSize; ++id) {
    if (IsCl100kToken(id)) all.push_back(id);
  }
  std::vector<std::string> pieces;
  const grpc::Status status = DecodePieces(all, &pieces);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  // In chunks under the limit it all comes back, and matches Decode.
  constexpr size_t kChunk = 20000;  // <= 60 KB
  size_t total = 0;
  for (size_t begin = 0; begin < all.size(); begin += kChunk) {
    const std::vector<uint32_t> chunk(
        all.begin() + static_cast<std::ptrdiff_t>(begin),
        all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), begin + kChunk)));
    const std::vector<std::string> got = MustDecodePieces(chunk);
    ASSERT_EQ(got.size(), chunk.size());
    std::string joined;
    for (const std::string& p : got) joined += p;
    EXPECT_EQ(joined, MustDecode(chunk));
    total += got.size();
  }
  EXPECT_EQ(total, all.size());
}

// One DecodeStream call driven in lock step: each request gets its response
// before the next is written.
class LockstepStream {
 public:
  explicit LockstepStream(v1::Tokenizer::Stub& stub) {
    context_.set_deadline(Deadline());
    stream_ = stub.DecodeStream(&context_);
  }

  // Writes one request and reads its response; false if the call ended.
  bool Send(const std::vector<uint32_t>& ids, bool flush, std::string* text) {
    v1::DecodeStreamRequest request;
    request.mutable_ids()->Assign(ids.begin(), ids.end());
    request.set_flush(flush);
    if (!stream_->Write(request)) return false;
    v1::DecodeStreamResponse response;
    if (!stream_->Read(&response)) return false;
    *text = response.text();
    return true;
  }

  // Half-closes, collects what the server still sends, and finishes.
  grpc::Status Close(std::vector<std::string>* trailing) {
    stream_->WritesDone();
    v1::DecodeStreamResponse response;
    while (stream_->Read(&response)) trailing->push_back(response.text());
    return stream_->Finish();
  }

  // After a failed Send: the call's status.
  grpc::Status Finish() {
    v1::DecodeStreamResponse response;
    while (stream_->Read(&response)) {
    }
    return stream_->Finish();
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::DecodeStreamRequest, v1::DecodeStreamResponse>>
      stream_;
};

TEST_F(Cl100kServerTest, DecodeStreamOneIdPerRequestNeverSplitsACharacter) {
  const std::string text =
      "你好，世界！🌍🚀 Grüße aus Köln — naïve café. "
      "日本語のテキスト🤖👍🏽 "
      "∑∫≈ "
      "한국어 "
      "emoji-run:😀😃😄😁🫠🦀🧬";
  ASSERT_TRUE(IsValidUtf8(text));
  const std::vector<uint32_t> ids = MustEncode(text);
  ASSERT_GT(ids.size(), 10u);
  // The test only means something if some token is not a whole character.
  size_t partial_tokens = 0;
  for (uint32_t id : ids) partial_tokens += IsValidUtf8(MustDecode({id})) ? 0 : 1;
  ASSERT_GT(partial_tokens, 0u);

  LockstepStream stream(stub());
  std::string joined;
  size_t responses = 0, empty_responses = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece;
    ASSERT_TRUE(stream.Send({ids[i]}, false, &piece)) << "stream ended at id " << i;
    ++responses;
    empty_responses += piece.empty() ? 1 : 0;
    EXPECT_TRUE(IsValidUtf8(piece))
        << "response " << i << " ends inside a character: " << ::testing::PrintToString(piece);
    joined += piece;
  }
  std::vector<std::string> trailing;
  const grpc::Status status = stream.Close(&trailing);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(trailing, SizeIs(0)) << "nothing is held at the end of complete text";
  EXPECT_EQ(responses, ids.size());
  EXPECT_GT(empty_responses, 0u) << "partial characters must be held, not sent";
  EXPECT_EQ(joined, text);
}

TEST_F(Cl100kServerTest, DecodeStreamMatchesVectors) {
  // Every non-ASCII vector of modest length, one id per request.
  size_t streamed = 0;
  for (size_t i = 0; i < vectors_->size() && streamed < 25; ++i) {
    const Vector& v = (*vectors_)[i];
    const bool ascii = std::all_of(v.text.begin(), v.text.end(),
                                   [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    if (ascii || v.ids.size() > 400 || !IsValidUtf8(v.text)) continue;
    ++streamed;
    LockstepStream stream(stub());
    std::string joined;
    for (size_t k = 0; k < v.ids.size(); ++k) {
      std::string piece;
      ASSERT_TRUE(stream.Send({v.ids[k]}, false, &piece)) << "vector " << i << " id " << k;
      ASSERT_TRUE(IsValidUtf8(piece)) << "vector " << i << " response " << k;
      joined += piece;
    }
    std::vector<std::string> trailing;
    ASSERT_TRUE(stream.Close(&trailing).ok());
    EXPECT_THAT(trailing, SizeIs(0));
    EXPECT_EQ(joined, v.text) << "vector " << i;
  }
  EXPECT_GT(streamed, 5u);
}

TEST_F(Cl100kServerTest, DecodeStreamFlushReturnsHeldBytesAtOnce) {
  const auto [prefix, rest] = SplitCharacterIds();
  ASSERT_FALSE(prefix.empty());
  const std::string held = MustDecode(prefix);

  LockstepStream stream(stub());
  std::string piece, joined;
  ASSERT_TRUE(stream.Send(MustEncode("ok "), false, &piece));
  EXPECT_EQ(piece, "ok ");
  joined += piece;
  // Without flush the partial character is held ...
  for (size_t i = 0; i + 1 < prefix.size(); ++i) {
    ASSERT_TRUE(stream.Send({prefix[i]}, false, &piece));
    EXPECT_EQ(piece, "");
  }
  // ... with flush it comes back now, as the raw bytes.
  ASSERT_TRUE(stream.Send({prefix.back()}, true, &piece));
  EXPECT_EQ(piece, held);
  joined += piece;
  // The rest of the character cannot complete anything any more: its bytes
  // are passed through, not held.
  ASSERT_TRUE(stream.Send(rest, false, &piece));
  EXPECT_EQ(piece, MustDecode(rest));
  joined += piece;
  // A flush with nothing held and no ids is an empty response.
  ASSERT_TRUE(stream.Send({}, true, &piece));
  EXPECT_EQ(piece, "");
  std::vector<std::string> trailing;
  const grpc::Status status = stream.Close(&trailing);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(trailing, SizeIs(0));
  std::vector<uint32_t> all = MustEncode("ok ");
  all.insert(all.end(), prefix.begin(), prefix.end());
  all.insert(all.end(), rest.begin(), rest.end());
  EXPECT_EQ(joined, MustDecode(all));
}

TEST_F(Cl100kServerTest, DecodeStreamHalfCloseReturnsHeldBytes) {
  const auto [prefix, rest] = SplitCharacterIds();
  ASSERT_FALSE(prefix.empty());
  LockstepStream stream(stub());
  std::string piece;
  ASSERT_TRUE(stream.Send(MustEncode("abc"), false, &piece));
  EXPECT_EQ(piece, "abc");
  for (uint32_t id : prefix) {
    ASSERT_TRUE(stream.Send({id}, false, &piece));
    EXPECT_EQ(piece, "");
  }
  std::vector<std::string> trailing;
  const grpc::Status status = stream.Close(&trailing);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(trailing, ElementsAre(MustDecode(prefix)));
}

TEST_F(Cl100kServerTest, DecodeStreamEmptyStreamEndsOk) {
  LockstepStream stream(stub());
  std::vector<std::string> trailing;
  const grpc::Status status = stream.Close(&trailing);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(trailing, SizeIs(0));
}

TEST_F(Cl100kServerTest, DecodeStreamInvalidIdEndsTheCall) {
  LockstepStream stream(stub());
  std::string piece;
  ASSERT_TRUE(stream.Send(MustEncode("Hello"), false, &piece));
  EXPECT_EQ(piece, "Hello");
  const uint32_t bad = kCl100kVocabSize + 5;
  EXPECT_FALSE(stream.Send({11, bad}, false, &piece)) << "got a response: " << piece;
  const grpc::Status status = stream.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(bad)));
}

TEST_F(Cl100kServerTest, InfoDescribesCl100k) {
  const v1::InfoResponse info = MustInfo();
  EXPECT_EQ(info.vocab_size(), kCl100kVocabSize);
  ASSERT_TRUE(info.has_eos_id());
  EXPECT_EQ(info.eos_id(), kEndOfText);
  EXPECT_FALSE(info.has_bos_id());
  EXPECT_FALSE(info.add_bos());
  EXPECT_EQ(info.format(), "tiktoken");
  EXPECT_THAT(info.source(), HasSubstr("cl100k_base.tiktoken"));
  EXPECT_FALSE(info.pretokenizer().empty());
  EXPECT_GT(info.pretokenizer_regexes_size(), 0);
  EXPECT_EQ(info.max_request_bytes(), static_cast<uint64_t>(kMaxRequestBytes));
  EXPECT_EQ(info.max_batch_texts(), static_cast<uint32_t>(kMaxBatchTexts));
  std::vector<std::pair<std::string, uint32_t>> specials;
  for (const v1::SpecialToken& st : info.special_tokens()) {
    specials.emplace_back(st.text(), st.id());
    EXPECT_EQ(st.kind(), "control") << st.text();
  }
  using P = std::pair<std::string, uint32_t>;
  EXPECT_THAT(specials, ::testing::UnorderedElementsAre(
                            P{"<|endoftext|>", 100257}, P{"<|fim_prefix|>", 100258},
                            P{"<|fim_middle|>", 100259}, P{"<|fim_suffix|>", 100260},
                            P{"<|endofprompt|>", 100276}));
}

TEST_F(Cl100kServerTest, SpecialTokenPolicies) {
  const std::string eot = "<|endoftext|>";
  // Default: ordinary text, several ids, and it round-trips.
  const std::vector<uint32_t> ordinary = MustEncode(eot);
  EXPECT_GT(ordinary.size(), 1u);
  EXPECT_THAT(ordinary, Not(Contains(kEndOfText)));
  EXPECT_EQ(MustDecode(ordinary), eot);

  // Allowed by name: the single id.
  v1::EncodeOptions allowed;
  allowed.add_allowed_special(eot);
  EXPECT_THAT(MustEncode(eot, allowed), ElementsAre(kEndOfText));
  const std::vector<uint32_t> mixed = MustEncode("Hi" + eot + "there", allowed);
  EXPECT_THAT(mixed, Contains(kEndOfText));
  EXPECT_EQ(MustDecode(mixed), "Hi" + eot + "there");
  // Allowed by name, another special token stays ordinary text.
  EXPECT_THAT(MustEncode("<|fim_prefix|>", allowed), Not(Contains(100258u)));

  // All special tokens.
  v1::EncodeOptions all;
  all.set_allow_all_special(true);
  EXPECT_THAT(MustEncode("<|fim_prefix|>x<|endofprompt|>", all),
              AllOf(Contains(100258u), Contains(100276u)));

  // disallow_special: text holding a special token that is not allowed fails.
  v1::EncodeOptions strict;
  strict.set_disallow_special(true);
  std::vector<uint32_t> ids;
  grpc::Status status = Encode("say " + eot + " now", strict, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr(eot));
  EXPECT_TRUE(Encode("nothing special", strict, &ids).ok());
  // ... unless it is allowed; the others still fail, by name.
  strict.add_allowed_special(eot);
  EXPECT_THAT(MustEncode(eot, strict), ElementsAre(kEndOfText));
  status = Encode(eot + "<|fim_suffix|>", strict, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("<|fim_suffix|>"));

  // An allowed name that is not a special token of the vocabulary.
  v1::EncodeOptions unknown;
  unknown.add_allowed_special("<|no_such_token|>");
  status = Encode("text", unknown, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("<|no_such_token|>"));

  // add_bos on a vocabulary without BOS.
  v1::EncodeOptions bos;
  bos.set_add_bos(true);
  status = Encode("text", bos, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << status.error_message();
}

TEST_F(Cl100kServerTest, LongestMatchIsAnotherValidTokenization) {
  const std::string text = "The quick brown fox jumps over the lazy dog; tokenization!";
  v1::EncodeOptions options;
  options.set_algorithm(v1::ALGORITHM_LONGEST_MATCH);
  const std::vector<uint32_t> ids = MustEncode(text, options);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(MustDecode(ids), text);
}

// An algorithm number the proto does not define is INVALID_ARGUMENT (it used
// to be encoded with BPE, OK), in Encode and in EncodeBatch.
TEST_F(Cl100kServerTest, UnknownAlgorithmIsInvalid) {
  v1::EncodeOptions options;
  options.set_algorithm(static_cast<v1::Algorithm>(9));
  std::vector<uint32_t> ids;
  grpc::Status status = Encode("text", options, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("unknown algorithm 9"));
  v1::EncodeBatchRequest batch;
  batch.add_texts("text");
  *batch.mutable_options() = options;
  v1::EncodeBatchResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  status = stub().EncodeBatch(&context, batch, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
}

// allowed_special entries are bounded, and a long one is never echoed.
TEST_F(Cl100kServerTest, LongAllowedSpecialNameIsInvalidAndNotEchoed) {
  v1::EncodeOptions options;
  options.add_allowed_special(std::string(9000, 'x'));
  std::vector<uint32_t> ids;
  const grpc::Status status = Encode("text", options, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("9000 bytes"));
  EXPECT_LT(status.error_message().size(), 200u);
}

TEST_F(Cl100kServerTest, RequestOverMaxRequestBytesIsResourceExhausted) {
  // Just under the limit works ...
  std::string under;
  while (under.size() < kMaxRequestBytes - 1024) under += "hello world ";
  std::vector<uint32_t> ids;
  grpc::Status status = Encode(under, {}, &ids);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(MustDecode(ids), under);
  // ... 100 KB does not.
  const std::string over(100 * 1000, 'x');
  status = Encode(over, {}, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  // Neither does a batch whose texts add up to more.
  v1::EncodeBatchRequest batch;
  for (int i = 0; i < 4; ++i) batch.add_texts(std::string(30 * 1000, 'y'));
  v1::EncodeBatchResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  status = stub().EncodeBatch(&context, batch, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  // And the server is still fine.
  EXPECT_THAT(MustEncode("Hello, world!"), ElementsAre(9906, 11, 1917, 0));
}

TEST_F(Cl100kServerTest, ConcurrentClientsGetTheirOwnResults) {
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = static_cast<size_t>(t); i < vectors_->size(); i += 4) {
        std::vector<uint32_t> ids;
        if (!Encode((*vectors_)[i].text, {}, &ids).ok() || ids != (*vectors_)[i].ids) {
          ++mismatches[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(mismatches, ::testing::Each(0));
}

// The llm command-line client, through this server.
TEST_F(Cl100kServerTest, LlmCliTokenizeThroughServer) {
  std::string input;
  std::vector<const Vector*> used;
  for (size_t i = 0; i < vectors_->size() && used.size() < 6; i += 37) {
    if (!IsValidUtf8((*vectors_)[i].text)) continue;
    used.push_back(&(*vectors_)[i]);
    input += nlohmann::json{{"text", (*vectors_)[i].text}}.dump() + "\n";
  }
  input += nlohmann::json{{"text", "<|endoftext|>"}}.dump() + "\n";
  const ProcessResult r =
      RunProcess({BinPath("llm"), "tokenize", "--server", address(), "--jsonl"}, input);
  ASSERT_TRUE(ExitedZero(r.wait_status)) << DescribeWaitStatus(r.wait_status) << "\n" << r.out;
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), used.size() + 1) << r.out;
  for (size_t i = 0; i < used.size(); ++i) {
    const auto j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j.at("ids").get<std::vector<uint32_t>>(), used[i]->ids) << "line " << i;
  }
  EXPECT_EQ(nlohmann::json::parse(lines.back()).at("ids").get<std::vector<uint32_t>>(),
            MustEncode("<|endoftext|>"));

  // --allowed-special, spelled with dashes.
  const ProcessResult special = RunProcess(
      {BinPath("llm"), "tokenize", "--server", address(), "--allowed-special", "<|endoftext|>"},
      "{\"text\": \"<|endoftext|>\"}\n");
  ASSERT_TRUE(ExitedZero(special.wait_status)) << DescribeWaitStatus(special.wait_status);
  EXPECT_EQ(nlohmann::json::parse(special.out).at("ids").get<std::vector<uint32_t>>(),
            std::vector<uint32_t>{kEndOfText});
}

// --timeout SECONDS, as every other command; --deadline-ms (milliseconds)
// still works, deprecated; a timeout that is not > 0 is a usage error.
TEST_F(Cl100kServerTest, LlmCliTokenizeTakesTimeoutInSeconds) {
  const std::string input = "{\"text\": \"Hello, world!\"}\n";
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--timeout", "30"},
                                                {"--timeout=0.5"},
                                                {"--deadline-ms", "30000"}}) {
    std::vector<std::string> argv = {BinPath("llm"), "tokenize", "--server", address()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const ProcessResult r = RunProcess(argv, input);
    ASSERT_TRUE(ExitedZero(r.wait_status)) << flags[0] << ": " << DescribeWaitStatus(r.wait_status);
    EXPECT_EQ(r.out, "{\"ids\":[9906,11,1917,0]}\n") << flags[0];
  }
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--timeout", "0"}, {"--deadline-ms", "-5"}}) {
    std::vector<std::string> argv = {BinPath("llm"), "tokenize", "--server", address()};
    argv.insert(argv.end(), flags.begin(), flags.end());
    const ProcessResult r = RunProcess(argv, input);
    EXPECT_TRUE(WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 2)
        << flags[0] << ": " << DescribeWaitStatus(r.wait_status);
    EXPECT_EQ(r.out, "") << flags[0];
  }
}

TEST_F(Cl100kServerTest, LlmCliDetokenizeThroughServer) {
  std::string input;
  std::vector<const Vector*> used;
  for (size_t i = 3; i < vectors_->size() && used.size() < 6; i += 41) {
    if (!IsValidUtf8((*vectors_)[i].text)) continue;
    used.push_back(&(*vectors_)[i]);
    input += nlohmann::json{{"ids", (*vectors_)[i].ids}}.dump() + "\n";
  }
  input += StrCat("{\"ids\": [9906, ", kCl100kVocabSize, "]}\n");  // fails, in line
  input += "{\"ids\": [9906, 11, 1917, 0]}\n";
  const ProcessResult r =
      RunProcess({BinPath("llm"), "detokenize", "--server", address(), "--jsonl"}, input);
  // One bad line: exit status 2 (a bad value, not a failing service),
  // outputs still aligned with inputs.
  ASSERT_TRUE(WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 2)
      << DescribeWaitStatus(r.wait_status) << "\n"
      << r.out;
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), used.size() + 2) << r.out;
  for (size_t i = 0; i < used.size(); ++i) {
    EXPECT_EQ(nlohmann::json::parse(lines[i]).at("text").get<std::string>(), used[i]->text)
        << "line " << i;
  }
  const auto error = nlohmann::json::parse(lines[used.size()]);
  ASSERT_TRUE(error.contains("error")) << lines[used.size()];
  EXPECT_THAT(error.at("error").get<std::string>(), HasSubstr(std::to_string(kCl100kVocabSize)));
  EXPECT_EQ(nlohmann::json::parse(lines.back()).at("text").get<std::string>(), "Hello, world!");
}

// `llm tokenize` and `llm detokenize` in process give byte for byte the output
// recorded before their JSON lines got a fast path (tests/data/tokenize_cli/:
// vector texts written raw and with \uXXXX escapes and surrogate pairs, every
// escape, other shapes of object, invalid JSON and invalid UTF-8, each error
// line with its message; ids with control characters, quotes, bytes that are
// not UTF-8 on their own, bad ids).
TEST(LlmCliTest, JsonLinesAreByteIdenticalToTheRecording) {
  if (!std::filesystem::exists(Cl100kPath())) GTEST_SKIP() << "missing " << Cl100kPath();
  const std::string dir = testing::SourceDir() + "/tests/data/tokenize_cli/";
  for (const char* command : {"tokenize", "detokenize"}) {
    SCOPED_TRACE(command);
    const std::string input = ReadFile(StrCat(dir, command, "_input.jsonl"));
    const std::string expected = ReadFile(StrCat(dir, command, "_cl100k_base.expected"));
    ASSERT_GT(input.size(), 1000u);
    ASSERT_GT(expected.size(), 1000u);
    const ProcessResult r = RunProcess({BinPath("llm"), command, "--vocab", Cl100kPath()}, input);
    // Some lines are bad, in line: exit status 2.
    ASSERT_TRUE(WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 2)
        << DescribeWaitStatus(r.wait_status);
    EXPECT_EQ(r.out, expected);
  }
}

// `llm tokenize` in process, on a vocabulary without a token for byte 0x04
// whose unknown_token_id names the control token <|endoftext|>: the line
// with that byte gets an error naming the byte and its offset (not id 3), the
// others their ids, and the exit status is 2 (a bad line).
TEST(LlmCliTest, TokenizeByteWithoutATokenIsAnErrorLine) {
  gguf::testing::GgufBuilder b;
  b.AddString("tokenizer.ggml.model", "gpt2");
  b.AddString("tokenizer.ggml.pre", "gpt-2");
  b.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<|endoftext|>"});
  b.AddInt32Array("tokenizer.ggml.token_type", {1, 1, 1, 3});
  b.AddStringArray("tokenizer.ggml.merges", {"a b"});
  b.AddUint32("tokenizer.ggml.unknown_token_id", 3);
  const std::string path = ::testing::TempDir() + "llm_cli_no_0x04.gguf";
  {
    std::ofstream out(path, std::ios::binary);
    out << b.Serialize();
  }
  const std::string vocab_path = StrCat("vocabulary ", path, " ");
  const ProcessResult r = RunProcess({BinPath("llm"), "tokenize", "--vocab", path},
                                     "{\"text\": \"ab\\u0004\"}\n{\"text\": \"abab\"}\n");
  std::filesystem::remove(path);
  ASSERT_TRUE(WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 2)
      << DescribeWaitStatus(r.wait_status) << "\n"
      << r.out;
  EXPECT_EQ(
      r.out,
      StrCat("{\"error\":\"line 1: byte 0x04 at byte offset 2 of the text has no token in ",
             vocab_path, "(no <0x04> byte token, no unknown token)\"}\n", "{\"ids\":[2,2]}\n"));
}

// A service that cannot be reached fails every line, in line, with exit
// status 1 (a failing service, not a bad line), even when a line is also bad.
TEST(LlmCliTest, UnreachableServiceExits1) {
  for (const char* command : {"tokenize", "detokenize"}) {
    const ProcessResult r =
        RunProcess({BinPath("llm"), command, "--server", "127.0.0.1:1", "--timeout", "10"},
                   "{\"text\": \"a\", \"ids\": [1]}\nnot json\n");
    ASSERT_TRUE(WIFEXITED(r.wait_status) && WEXITSTATUS(r.wait_status) == 1)
        << command << ": " << DescribeWaitStatus(r.wait_status) << "\n"
        << r.out;
    const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), 2u) << r.out;
    EXPECT_THAT(lines[0], HasSubstr("\"error\":\"line 1: ")) << command;
    EXPECT_THAT(lines[1], HasSubstr("\"error\":\"line 2: ")) << command;
  }
}

// ---------------------------------------------------------------------------
// GGUF server: ggml-vocab-mpt.gguf (pre-tokenizer "mpt", 178 user-defined
// tokens, two control tokens; BOS = EOS = 0).

constexpr uint32_t kMptVocabSize = 50432;
constexpr size_t kMptUserDefined = 178;

class GgufServerTest : public testing::SuiteServerTest<GgufServerTest, TokenizerServiceTestBase> {
 public:
  static void StartSuiteServer(ServerState* state) { StartTokenizerServer(state, MptPath(), {}); }
};

TEST_F(GgufServerTest, InfoDescribesTheGgufVocabulary) {
  const v1::InfoResponse info = MustInfo();
  EXPECT_EQ(info.format(), "gguf");
  EXPECT_EQ(info.pretokenizer(), "mpt");
  EXPECT_EQ(info.vocab_size(), kMptVocabSize);
  EXPECT_THAT(info.source(), HasSubstr("ggml-vocab-mpt.gguf"));
  ASSERT_TRUE(info.has_bos_id());
  EXPECT_EQ(info.bos_id(), 0u);
  ASSERT_TRUE(info.has_eos_id());
  EXPECT_EQ(info.eos_id(), 0u);
  EXPECT_EQ(info.max_request_bytes(), 8u << 20);  // the defaults
  EXPECT_EQ(info.max_batch_texts(), 1024u);

  size_t user_defined = 0;
  bool saw_pad = false;
  std::vector<std::pair<std::string, uint32_t>> control;
  for (const v1::SpecialToken& st : info.special_tokens()) {
    if (st.kind() == "user_defined") {
      ++user_defined;
      EXPECT_GE(st.id(), 50254u) << st.text();
      if (st.text() == "[PAD50300]") {
        saw_pad = true;
        EXPECT_EQ(st.id(), 50300u);
      }
    } else {
      EXPECT_EQ(st.kind(), "control") << st.text();
      control.emplace_back(st.text(), st.id());
    }
  }
  EXPECT_EQ(user_defined, kMptUserDefined);
  EXPECT_TRUE(saw_pad);
  using P = std::pair<std::string, uint32_t>;
  EXPECT_THAT(control, ElementsAre(P{"<|endoftext|>", 0}, P{"<|padding|>", 1}));
}

TEST_F(GgufServerTest, EncodeEqualsReferenceIds) {
  const std::string base = MptPath();
  const std::string inp = ReadFile(base + ".inp");
  const std::string out = ReadFile(base + ".out");
  ASSERT_FALSE(inp.empty());
  std::vector<std::string> texts = absl::StrSplit(inp, "\n__ggml_vocab_test__\n");
  ASSERT_FALSE(texts.empty());
  texts.pop_back();
  const std::vector<std::string> lines = absl::StrSplit(out, '\n');
  ASSERT_GE(lines.size(), texts.size());
  ASSERT_EQ(texts.size(), 46u);
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<uint32_t> expected;
    for (const std::string& part :
         std::vector<std::string>(absl::StrSplit(lines[i], ' ', absl::SkipEmpty()))) {
      expected.push_back(static_cast<uint32_t>(std::stoul(part)));
    }
    const std::vector<uint32_t> ids = MustEncode(texts[i]);
    EXPECT_EQ(ids, expected) << "test " << i << ": "
                             << ::testing::PrintToString(texts[i].substr(0, 80));
    EXPECT_EQ(MustDecode(ids), texts[i]) << "test " << i;
  }
}

TEST_F(GgufServerTest, UserDefinedTokensAreAlwaysRecognized) {
  const std::vector<uint32_t> ids = MustEncode("left[PAD50300]right");
  EXPECT_THAT(ids, Contains(50300u));
  EXPECT_EQ(MustDecode(ids), "left[PAD50300]right");
  // Control tokens are not, unless allowed.
  EXPECT_THAT(MustEncode("<|endoftext|>"), Not(Contains(0u)));
  v1::EncodeOptions allowed;
  allowed.add_allowed_special("<|endoftext|>");
  EXPECT_THAT(MustEncode("<|endoftext|>", allowed), ElementsAre(0u));
  // add_bos works here: the vocabulary has a BOS.
  v1::EncodeOptions bos;
  bos.set_add_bos(true);
  const std::vector<uint32_t> with_bos = MustEncode("Hello", bos);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos.front(), 0u);
  EXPECT_EQ(std::vector<uint32_t>(with_bos.begin() + 1, with_bos.end()), MustEncode("Hello"));
}

// MPT's vocabulary has no token for 0xC0 (never in UTF-8), no byte tokens and
// no unknown token (its unknown_token_id is the control token <|endoftext|>,
// id 0): such a byte is INVALID_ARGUMENT naming it and its offset, never id 0.
TEST_F(GgufServerTest, ByteWithoutATokenIsInvalidArgumentNotAControlToken) {
  std::vector<uint32_t> ids;
  grpc::Status status = Encode(
      "a\xC0\x80"
      "b",
      {}, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << ::testing::PrintToString(ids);
  EXPECT_THAT(status.error_message(), HasSubstr("byte 0xC0 at byte offset 1 "));
  // Even with every special token allowed.
  v1::EncodeOptions all;
  all.set_allow_all_special(true);
  status = Encode("ok\xFF", all, &ids);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("byte 0xFF at byte offset 2 "));
  // In a batch, the text is named too.
  v1::EncodeBatchRequest request;
  request.add_texts("fine");
  request.add_texts("x\xF5");
  v1::EncodeBatchResponse response;
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  status = stub().EncodeBatch(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("text 1: byte 0xF5 at byte offset 1 "));
}

TEST_F(GgufServerTest, DecodeOutOfRangeIsInvalidArgument) {
  std::string text;
  const grpc::Status status = Decode({kMptVocabSize}, &text);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(kMptVocabSize)));
}

TEST_F(GgufServerTest, DecodePiecesOfTheWholeVocabularyInOneCall) {
  std::vector<uint32_t> all(kMptVocabSize);
  for (uint32_t id = 0; id < kMptVocabSize; ++id) all[id] = id;
  const auto start = Clock::now();
  const std::vector<std::string> pieces = MustDecodePieces(all);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  ASSERT_EQ(pieces.size(), all.size());
  size_t bytes = 0;
  for (const std::string& p : pieces) bytes += p.size();
  std::printf("[ pieces  ] %u ids, %zu bytes of pieces, one call: %.1f ms\n", kMptVocabSize, bytes,
              ms);
  std::string joined;
  joined.reserve(bytes);
  for (const std::string& p : pieces) joined += p;
  EXPECT_EQ(joined, MustDecode(all));
  EXPECT_EQ(pieces[50300], "[PAD50300]");
  // Random lists, including ids that are bytes of a split character.
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_id(0, kMptVocabSize - 1);
  for (int round = 0; round < 10; ++round) {
    std::vector<uint32_t> ids(static_cast<size_t>(rng() % 50));
    for (uint32_t& id : ids) id = any_id(rng);
    const std::vector<uint32_t> emoji = MustEncode("🤖🦀");
    ids.insert(ids.end(), emoji.begin(), emoji.end());
    SCOPED_TRACE(StrCat("round ", round));
    ExpectPiecesMatchDecode(ids);
  }
  std::vector<std::string> none;
  const grpc::Status status = DecodePieces({1, kMptVocabSize}, &none);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(kMptVocabSize)));
}

TEST_F(GgufServerTest, DecodePiecesOfTwoHundredThousandIdsFitTheDefaultLimits) {
  // As many ids as o200k's vocabulary, each of 3 packed bytes (~600 KB, under
  // the default 8 MiB), answered in one call (~1.5 MB, under the 64 MiB the
  // server sends and the client's channel takes).
  constexpr uint32_t kIds = 200019;
  std::vector<uint32_t> ids(kIds);
  for (uint32_t i = 0; i < kIds; ++i) ids[i] = 16384 + i % (kMptVocabSize - 16384);
  const std::vector<std::string> pieces = MustDecodePieces(ids);
  ASSERT_EQ(pieces.size(), ids.size());
  EXPECT_EQ(pieces[kIds - 1], MustDecode({ids[kIds - 1]}));
}

TEST_F(GgufServerTest, ReflectionAndHealth) {
  testing::ExpectReflectionDescribesEveryService(channel(), "llm.v1.Tokenizer",
                                                 "llm.v1.Tokenizer.DecodeStream");
  EXPECT_EQ(CheckHealth(channel(), "", std::chrono::seconds(5)).serving_status, kServing);
}

// ---------------------------------------------------------------------------
// Process life cycle, with a server of its own per test.

TEST(TokenizerServerProcessTest, SigtermWithAnOpenStreamExitsZero) {
  if (!std::filesystem::exists(MptPath())) GTEST_SKIP() << "missing " << MptPath();
  ServerState state;
  StartTokenizerServer(&state, MptPath(), {"--drain-seconds", "1"});
  ASSERT_NE(state.stub, nullptr) << state.error;
  // A stream that is still open when SIGTERM comes is cancelled after the
  // drain time; the server still exits 0.
  grpc::ClientContext context;
  context.set_deadline(Deadline());
  auto stream = state.stub->DecodeStream(&context);
  v1::DecodeStreamRequest request;
  request.add_ids(12092);  // "Hello"
  ASSERT_TRUE(stream->Write(request));
  v1::DecodeStreamResponse response;
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_EQ(response.text(), "Hello");
  const auto start = Clock::now();
  const std::optional<int> exit_status = state.process->Terminate(std::chrono::seconds(15));
  ASSERT_TRUE(exit_status.has_value()) << "did not exit within 15 s of SIGTERM";
  EXPECT_TRUE(ExitedZero(*exit_status)) << DescribeWaitStatus(*exit_status);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  // The stream ended with the server (cancelled or unavailable, not hanging).
  while (stream->Read(&response)) {
  }
  const grpc::Status status = stream->Finish();
  EXPECT_FALSE(status.ok());
}

TEST(TokenizerServerProcessTest, MissingVocabularyExitsNonZeroWithoutPortLine) {
  std::string error;
  auto server =
      ServerProcess::Start("tokenizer_server", {"--vocab", "/nonexistent/vocab.tiktoken"}, &error);
  EXPECT_EQ(server, nullptr);
  EXPECT_THAT(error, AllOf(HasSubstr("no port line"), HasSubstr("exit status 1")));
}

// ---------------------------------------------------------------------------
// SentencePiece server: Gemma 3's vocabulary (models/gemma-3-270m-q4_k_m.gguf,
// scripts/fetch-model.sh gemma3-270m; missing, the suite fails). Ids from
// llama.cpp (tokenizer_svc/testdata/gemma3_reference.jsonl).

class GemmaServerTest : public testing::SuiteServerTest<GemmaServerTest, TokenizerServiceTestBase> {
 public:
  static void StartSuiteServer(ServerState* state) {
    const std::string model = testing::SourceDir() + "/models/gemma-3-270m-q4_k_m.gguf";
    if (!std::filesystem::exists(model)) {
      // Not "missing vocabulary": that would skip, and this model is fetched.
      state->error = StrCat(model, " is absent: run scripts/fetch-model.sh gemma3-270m");
      return;
    }
    StartTokenizerServer(state, model, {});
  }
};

TEST_F(GemmaServerTest, InfoEncodeDecodeAndStreamMatchLlamaCpp) {
  const v1::InfoResponse info = MustInfo();
  EXPECT_EQ(info.vocab_size(), 262144u);
  EXPECT_EQ(info.pretokenizer(), "sentencepiece");
  EXPECT_EQ(MustEncode("Hello world"), (std::vector<uint32_t>{9259, 1902}));
  v1::EncodeOptions turns;
  turns.add_allowed_special("<start_of_turn>");
  turns.add_allowed_special("<end_of_turn>");
  const std::string chat = "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n";
  EXPECT_EQ(MustEncode(chat, turns),
            (std::vector<uint32_t>{105, 2364, 107, 10979, 106, 107, 105, 4368, 107}));
  // Not allowed, the control token's text is ordinary text.
  EXPECT_EQ(MustEncode("<start_of_turn>"),
            (std::vector<uint32_t>{236820, 3041, 236779, 1340, 236779, 887, 236813}));
  // Two spaces, a tab, U+10FFFF, CJK, an emoji, newlines.
  const std::string text = "Hello  world\t\xF4\x8F\xBF\xBF 日本語 😀\n\n";
  const std::vector<uint32_t> ids = MustEncode(text);
  EXPECT_EQ(MustDecode(ids), text);
  ExpectPiecesMatchDecode(ids);
  LockstepStream stream(stub());
  std::string streamed;
  for (const uint32_t id : ids) {
    std::string delta;
    ASSERT_TRUE(stream.Send({id}, false, &delta));
    streamed += delta;
  }
  std::vector<std::string> trailing;
  EXPECT_TRUE(stream.Close(&trailing).ok());
  for (const std::string& t : trailing) streamed += t;
  EXPECT_EQ(streamed, text);
}

}  // namespace
}  // namespace llm
