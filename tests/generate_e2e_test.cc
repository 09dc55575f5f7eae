// End-to-end generation with the REAL default model (SmolLM2-135M-Instruct,
// Q4_1): the real tokenizer_server and model_server on free loopback ports
// (started once per suite) and the real `llm` binary, checked against the
// in-process engine and against themselves.
//
//   - greedy `llm generate` gives the tokens of a greedy loop over
//     engine::LoadEngine in this process (same prompt text, same tokenizer);
//   - a seeded sampled run repeats exactly, and the default top-N logits give
//     the same tokens as full logits;
//   - a stop string ends the output without leaking;
//   - a three-turn `llm chat` stays on one model session whose prefilled
//     tokens grow by each turn's new tokens only;
//   - the model server is SIGKILLed and restarted on the same port between
//     two chat turns: the chat goes on (the session is rebuilt from the
//     client's history) and the answer is the one it gives without the
//     restart; drained (SIGTERM) and restarted with --session_dir, the
//     server serves the session again under its id and nothing is rebuilt;
//   - the command line: the end of the context is a normal stop (a model
//     server with --max_context), usage errors exit 2 with a suggestion,
//     --version and each command's --help, swapped tokenizer and model
//     addresses are named, a model that stays loading is waited for visibly
//     (a fake service), and every `llm` example of README.md runs as written.
//
// Needs models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/strings.h"
#include "common/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "llm/v1/model.grpc.pb.h"
#include "model_svc/engine/loader.h"
#include "nlohmann/json.hpp"
#include "tests/server_process.h"
#include "tokenizer_svc/gguf_vocab_loader.h"
#include "tokenizer_svc/tokenizer.h"

namespace llm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::ServerProcess;

constexpr int kMaxTokens = 24;
constexpr char kPrompt[] = "Which planet is known as the Red Planet?";
// SmolLM2's chat template for kPrompt: its default system message, the user
// turn, the assistant's header (see client/generate/chat_template.h).
constexpr char kFormattedPrompt[] =
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n<|im_start|>user\nWhich planet is known as the Red "
    "Planet?<|im_end|>\n<|im_start|>assistant\n";
constexpr int32_t kImEnd = 2;  // SmolLM2's EOS

std::string ModelPath() {
  return llm::testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

std::vector<std::string> TokenizerFlags() { return {"--vocab", ModelPath()}; }
std::vector<std::string> ModelFlags() { return {"--model", ModelPath(), "--kv_cache_mb", "64"}; }

// A child process with pipes on stdin and stdout (stderr is inherited).
class Child {
 public:
  static std::unique_ptr<Child> Start(const std::vector<std::string>& argv) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0) return nullptr;
    if (pipe2(out, O_CLOEXEC) != 0) {
      close(in[0]);
      close(in[1]);
      return nullptr;
    }
    std::string error;
    const pid_t pid = testing::Spawn(argv, in[0], out[1], &error);
    close(in[0]);
    close(out[1]);
    if (pid < 0) {
      ADD_FAILURE() << error;
      close(in[1]);
      close(out[0]);
      return nullptr;
    }
    auto c = std::unique_ptr<Child>(new Child());
    c->pid_ = pid;
    c->stdin_ = in[1];
    c->stdout_ = out[0];
    return c;
  }

  ~Child() {
    CloseStdin();
    if (pid_ > 0) testing::WaitForExit(pid_, std::chrono::seconds(10));
    if (stdout_ >= 0) close(stdout_);
  }

  bool WriteLine(const std::string& line) {
    const std::string s = line + "\n";
    return write(stdin_, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  }

  void CloseStdin() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
  }

  // One line of stdout without the newline; nullopt on EOF or timeout.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout) {
    const auto deadline = testing::Clock::now() + timeout;
    while (true) {
      const size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - testing::Clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{stdout_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(stdout_, buf, sizeof(buf));
      if (n <= 0) return std::nullopt;
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  // Closes stdin, reads the rest of stdout, and returns the exit status.
  int Finish(std::string* rest = nullptr) {
    CloseStdin();
    while (auto line = ReadLine(std::chrono::seconds(60))) {
      if (rest != nullptr) *rest += *line + "\n";
    }
    const std::optional<int> status = testing::WaitForExit(pid_, std::chrono::seconds(30));
    pid_ = -1;
    if (!status || !WIFEXITED(*status)) return -1;
    return WEXITSTATUS(*status);
  }

 private:
  Child() = default;
  pid_t pid_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  std::string buffer_;
};

// One answer of `llm ... --json`: its token events and the summary.
struct Answer {
  std::vector<int32_t> tokens;
  std::string text;
  nlohmann::json summary;
};

// Reads JSON lines up to and including a summary (a line with "stop_reason").
std::optional<Answer> ReadAnswer(Child& child) {
  Answer a;
  while (auto line = child.ReadLine(std::chrono::seconds(120))) {
    nlohmann::json j = nlohmann::json::parse(*line, nullptr, false);
    if (j.is_discarded()) {
      ADD_FAILURE() << "not JSON: " << *line;
      return std::nullopt;
    }
    if (j.contains("stop_reason")) {
      a.summary = j;
      return a;
    }
    a.text += j["text"].get<std::string>();
    if (!j["token"].is_null()) a.tokens.push_back(j["token"].get<int32_t>());
  }
  ADD_FAILURE() << "no summary line";
  return std::nullopt;
}

// A finished command: its exit status (-1: killed or not exited), stdout
// and stderr.
struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::string text;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  return text;
}

// Runs argv in `dir` (relative paths in argv are relative to it) with
// `input` on stdin, to completion; stdout and stderr go through files.
CliRun RunCli(const std::vector<std::string>& argv, const std::string& input = "",
              const std::string& dir = ".") {
  CliRun run;
  const std::string base = StrCat(::testing::TempDir(), "generate_e2e_cli_", getpid());
  const std::string in_path = base + ".in", out_path = base + ".out", err_path = base + ".err";
  {
    const int fd = open(in_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, input.data(), input.size()) != static_cast<ssize_t>(input.size())) {
      ADD_FAILURE() << "cannot write " << in_path;
      if (fd >= 0) close(fd);
      return run;
    }
    close(fd);
  }
  const int in_fd = open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
  const int out_fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  // sh: cd to the directory and send stderr to its file ($1, $2), then exec argv.
  std::vector<std::string> sh = {
      "/bin/sh", "-c", "cd \"$1\" && f=$2 && shift 2 && exec \"$@\" 2>\"$f\"", "sh", dir, err_path};
  sh.insert(sh.end(), argv.begin(), argv.end());
  std::string error;
  const pid_t pid = testing::Spawn(sh, in_fd, out_fd, &error);
  close(in_fd);
  close(out_fd);
  if (pid < 0) {
    ADD_FAILURE() << error;
    return run;
  }
  const std::optional<int> status = testing::WaitForExit(pid, std::chrono::seconds(180));
  if (status && WIFEXITED(*status)) run.exit_code = WEXITSTATUS(*status);
  run.out = ReadFile(out_path);
  run.err = ReadFile(err_path);
  unlink(in_path.c_str());
  unlink(out_path.c_str());
  unlink(err_path.c_str());
  return run;
}

class GenerateE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    tokenizer_server_ =
        ServerProcess::Start("tokenizer_server", TokenizerFlags(), &error).release();
    ASSERT_NE(tokenizer_server_, nullptr) << error << " (run scripts/fetch-model.sh)";
    model_server_ = ServerProcess::Start("model_server", ModelFlags(), &error).release();
    ASSERT_NE(model_server_, nullptr) << error;
    for (ServerProcess* s : {tokenizer_server_, model_server_}) {
      auto channel = grpc::CreateChannel(s->address(), grpc::InsecureChannelCredentials());
      ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
    }
  }
  static void TearDownTestSuite() {
    delete tokenizer_server_;
    delete model_server_;
    tokenizer_server_ = model_server_ = nullptr;
  }

  static std::vector<std::string> LlmArgs(const std::string& command,
                                          const std::string& model_address,
                                          std::vector<std::string> flags) {
    std::vector<std::string> argv = {
        testing::BinPath("llm"), command,  "--tokenizer",  tokenizer_server_->address(), "--model",
        model_address,           "--json", "--max-tokens", std::to_string(kMaxTokens)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return argv;
  }

  // `llm generate --json` on the suite's servers.
  static std::optional<Answer> Generate(std::vector<std::string> flags, int* exit_code) {
    flags.insert(flags.begin(), {"--prompt", kPrompt});
    auto child = Child::Start(LlmArgs("generate", model_server_->address(), flags));
    if (child == nullptr) return std::nullopt;
    child->CloseStdin();
    std::optional<Answer> a = ReadAnswer(*child);
    *exit_code = child->Finish();
    return a;
  }

  // An `llm chat` of `turns` on the model server at `address`: its answers
  // (fewer when one fails, the failure reported).
  static std::vector<Answer> Chat(const std::string& address, const std::vector<std::string>& flags,
                                  const std::vector<std::string>& turns) {
    std::vector<Answer> answers;
    auto child = Child::Start(LlmArgs("chat", address, flags));
    if (child == nullptr) {
      ADD_FAILURE() << "llm chat did not start";
      return answers;
    }
    for (const std::string& t : turns) {
      std::optional<Answer> a;
      if (child->WriteLine(t)) a = ReadAnswer(*child);
      if (!a.has_value()) {
        ADD_FAILURE() << "no answer to " << t;
        break;
      }
      answers.push_back(*std::move(a));
    }
    EXPECT_EQ(child->Finish(), 0);
    return answers;
  }

  static std::vector<v1::SessionInfo> Sessions(const std::string& address) {
    auto stub =
        v1::Model::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::ListSessionsResponse response;
    const grpc::Status s = stub->ListSessions(&context, v1::ListSessionsRequest(), &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {response.sessions().begin(), response.sessions().end()};
  }

  static ServerProcess* tokenizer_server_;
  static ServerProcess* model_server_;
};

ServerProcess* GenerateE2ETest::tokenizer_server_ = nullptr;

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
ServerProcess* GenerateE2ETest::model_server_ = nullptr;

// Greedy decoding in this process: the engine and tokenizer libraries
// directly, no gRPC, no client library.
std::vector<int32_t> InProcessGreedy(const std::string& text, int max_tokens) {
  engine::LoadOptions options;
  options.model_path = ModelPath();
  options.kv_cache_mb = 64;
  auto engine = engine::LoadEngine(options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  auto vocab = tok::LoadGgufVocab(ModelPath(), std::nullopt);
  EXPECT_TRUE(vocab.ok()) << vocab.status();
  auto tokenizer = tok::Tokenizer::Create(*std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  tok::EncodeOptions encode;
  encode.allow_all_special = true;
  auto ids = (*tokenizer)->Encode(text, encode);
  EXPECT_TRUE(ids.ok()) << ids.status();
  engine::AppendRequest request;
  request.tokens.assign(ids->begin(), ids->end());
  auto step = (*engine)->Append(request);
  std::vector<int32_t> out;
  while (step.ok() && static_cast<int>(out.size()) < max_tokens) {
    const std::vector<float>& l = step->logits.back().values;
    const int32_t next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    if (next == kImEnd) break;
    out.push_back(next);
    if (static_cast<int>(out.size()) == max_tokens) break;
    engine::AppendRequest d;
    d.session_id = step->session_id;
    d.tokens = {next};
    d.decode = true;
    step = (*engine)->Append(d);
  }
  EXPECT_TRUE(step.ok()) << step.status();
  return out;
}

TEST_F(GenerateE2ETest, GreedyMatchesTheInProcessEngine) {
  int exit_code = -1;
  std::optional<Answer> a = Generate({"--temperature", "0"}, &exit_code);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(exit_code, 0);
  EXPECT_FALSE(a->tokens.empty());
  EXPECT_EQ(a->tokens, InProcessGreedy(kFormattedPrompt, kMaxTokens)) << a->text;
  EXPECT_THAT(a->text, HasSubstr("Mars"));
  EXPECT_EQ(a->summary["tokens"].get<size_t>(), a->tokens.size());
  EXPECT_GT(a->summary["prompt_tokens"].get<int>(), 30);
  EXPECT_GT(a->summary["time_to_first_token_ms"].get<double>(), 0.0);
  EXPECT_EQ(a->summary["session_rebuilds"].get<int>(), 0);
  EXPECT_TRUE(Sessions(model_server_->address()).empty()) << "the session was not released";
}

TEST_F(GenerateE2ETest, SeededSamplingRepeatsExactly) {
  const std::vector<std::string> flags = {"--temperature", "0.8", "--top-p", "0.9", "--seed", "7"};
  int code1 = -1, code2 = -1, code3 = -1;
  std::optional<Answer> a = Generate(flags, &code1);
  std::optional<Answer> b = Generate(flags, &code2);
  // The default encoding here is top-N (top-k 40): exact, so full logits
  // draw the same tokens.
  std::vector<std::string> full = flags;
  full.insert(full.end(), {"--logits", "full"});
  std::optional<Answer> c = Generate(full, &code3);
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(code1 + code2 + code3, 0);
  EXPECT_FALSE(a->tokens.empty());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->text, b->text);
  EXPECT_EQ(a->tokens, c->tokens);
}

// Speculative decoding (n-gram proposals) changes nothing in the answer:
// greedy, and seeded sampling (one draw per token either way, over the same
// logits: the kernels are batch invariant).
TEST_F(GenerateE2ETest, SpeculationGivesTheSameAnswer) {
  for (const std::vector<std::string>& sampling :
       {std::vector<std::string>{"--temperature", "0"},
        std::vector<std::string>{"--temperature", "0.8", "--top-p", "0.9", "--seed", "7"}}) {
    SCOPED_TRACE(sampling[1]);
    int code1 = -1, code2 = -1;
    std::vector<std::string> off = sampling;
    off.insert(off.end(), {"--speculate", "0"});
    std::optional<Answer> plain = Generate(off, &code1);
    std::vector<std::string> flags = sampling;
    flags.insert(flags.end(), {"--speculate", "6"});
    std::optional<Answer> fast = Generate(flags, &code2);
    ASSERT_TRUE(plain && fast);
    EXPECT_EQ(code1 + code2, 0);
    EXPECT_FALSE(plain->tokens.empty());
    EXPECT_EQ(fast->tokens, plain->tokens);
    EXPECT_EQ(fast->text, plain->text);
    EXPECT_EQ(fast->summary["stop_reason"], plain->summary["stop_reason"]);
    EXPECT_EQ(plain->summary["proposed_tokens"].get<int>(), 0);
    EXPECT_GT(fast->summary["proposed_tokens"].get<int>(), 0) << fast->summary.dump();
    EXPECT_LE(fast->summary["accepted_tokens"].get<int>(),
              fast->summary["proposed_tokens"].get<int>());
  }
  EXPECT_TRUE(Sessions(model_server_->address()).empty()) << "a session was not released";
}

TEST_F(GenerateE2ETest, StopStringEndsTheOutputWithoutLeaking) {
  int exit_code = -1;
  std::optional<Answer> greedy = Generate({"--temperature", "0"}, &exit_code);
  ASSERT_TRUE(greedy.has_value());
  // A stop string from the middle of the greedy answer, across a token
  // boundary when possible.
  const std::string& text = greedy->text;
  ASSERT_GT(text.size(), 20u) << text;
  const std::string stop = text.substr(text.size() / 2, 5);
  const size_t first = text.find(stop);
  std::optional<Answer> cut = Generate({"--temperature", "0", "--stop", stop}, &exit_code);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(exit_code, 0);
  EXPECT_EQ(cut->summary["stop_reason"], "stop");
  EXPECT_EQ(cut->text, text.substr(0, first)) << "stop string '" << stop << "'";
  EXPECT_EQ(cut->text.find(stop), std::string::npos);
}

TEST_F(GenerateE2ETest, ThreeTurnChatReusesOneSession) {
  // Without speculation, whose rolled-back proposals count as decoded but
  // leave the session: then num_tokens = prefilled + decoded exactly.
  auto child = Child::Start(
      LlmArgs("chat", model_server_->address(), {"--temperature", "0", "--speculate", "0"}));
  ASSERT_NE(child, nullptr);
  int64_t prefilled = 0;
  int64_t generated = 0;
  std::string id;
  for (const char* message : {"What is the capital of France?", "And of Italy?", "Thanks!"}) {
    ASSERT_TRUE(child->WriteLine(message));
    std::optional<Answer> a = ReadAnswer(*child);
    ASSERT_TRUE(a.has_value());
    prefilled += a->summary["prompt_tokens"].get<int64_t>();
    const std::vector<v1::SessionInfo> sessions = Sessions(model_server_->address());
    ASSERT_EQ(sessions.size(), 1u);
    if (id.empty()) id = sessions[0].session_id();
    EXPECT_EQ(sessions[0].session_id(), id);
    // Only each turn's new tokens were prefilled (plus, after a turn that
    // hit max-tokens, its last sampled token, counted in prompt_tokens).
    EXPECT_EQ(sessions[0].prefilled_tokens(), prefilled) << message;
    generated += static_cast<int64_t>(a->tokens.size());
    EXPECT_EQ(sessions[0].num_tokens(),
              sessions[0].prefilled_tokens() + sessions[0].decoded_tokens());
    EXPECT_GT(a->summary["tokens"].get<int>(), 0);
  }
  EXPECT_EQ(child->Finish(), 0);
  EXPECT_TRUE(Sessions(model_server_->address()).empty());
}

TEST_F(GenerateE2ETest, ChatSurvivesAModelServerRestart) {
  const std::vector<std::string> turns = {"What is the capital of France?", "And of Italy?"};
  // Without a restart, on the suite's server.
  const std::vector<Answer> expected =
      Chat(model_server_->address(), {"--temperature", "0"}, turns);
  ASSERT_EQ(expected.size(), turns.size());
  // With a server of its own, killed and restarted on the same port between
  // the turns.
  std::string error;
  std::unique_ptr<ServerProcess> server =
      ServerProcess::Start("model_server", ModelFlags(), &error);
  ASSERT_NE(server, nullptr) << error;
  const std::string address = server->address();
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  auto child = Child::Start(LlmArgs("chat", address, {"--temperature", "0"}));
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(child->WriteLine(turns[0]));
  std::optional<Answer> first = ReadAnswer(*child);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->tokens, expected[0].tokens);

  server->Terminate(std::chrono::seconds(10), SIGKILL);
  server = ServerProcess::Start(
      "model_server", {"--model", ModelPath(), "--kv_cache_mb", "64", "--listen", address}, &error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_EQ(server->address(), address);

  ASSERT_TRUE(child->WriteLine(turns[1]));
  std::optional<Answer> second = ReadAnswer(*child);
  ASSERT_TRUE(second.has_value());
  EXPECT_GE(second->summary["session_rebuilds"].get<int>(), 1);
  EXPECT_EQ(second->tokens, expected[1].tokens);
  EXPECT_EQ(second->text, expected[1].text);
  EXPECT_EQ(child->Finish(), 0);

  // Drained (SIGTERM) rather than killed, with --session_dir: the restarted
  // server (a new epoch) serves the session again under its id, the client
  // finds it there, and nothing is rebuilt.
  const std::string dir = StrCat(::testing::TempDir(), "generate_e2e_sessions_", getpid());
  std::filesystem::remove_all(dir);
  const std::vector<std::string> kept = {"--model",  ModelPath(), "--kv_cache_mb", "64",
                                         "--listen", address,     "--session_dir", dir};
  server->Terminate(std::chrono::seconds(10));
  server = ServerProcess::Start("model_server", kept, &error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  child = Child::Start(LlmArgs("chat", address, {"--temperature", "0"}));
  ASSERT_NE(child, nullptr);
  ASSERT_TRUE(child->WriteLine(turns[0]));
  first = ReadAnswer(*child);
  ASSERT_TRUE(first.has_value());
  const std::optional<int> drained = server->Terminate(std::chrono::seconds(15));
  ASSERT_TRUE(drained.has_value() && testing::ExitedZero(*drained));
  server = ServerProcess::Start("model_server", kept, &error);
  ASSERT_NE(server, nullptr) << error;
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  ASSERT_TRUE(child->WriteLine(turns[1]));
  second = ReadAnswer(*child);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->summary["session_rebuilds"].get<int>(), 0);
  EXPECT_EQ(second->tokens, expected[1].tokens);
  EXPECT_EQ(child->Finish(), 0);
  std::filesystem::remove_all(dir);
}

// `llm chat --save FILE`, then everything restarted and `--resume FILE`:
// the third turn's answer is the uninterrupted chat's, and the restarted
// server prefilled only that turn's tokens (the history came back as a
// snapshot). A file whose snapshot cannot be imported falls back to
// prefilling the tokens again (same answer); a file that is no chat file
// exits 2.
TEST_F(GenerateE2ETest, ChatSavedAndResumedAfterARestartPrefillsNoHistory) {
  const std::vector<std::string> turns = {"What is the capital of France?", "And of Italy?",
                                          "And of Spain?"};
  const std::vector<std::string> greedy = {"--temperature", "0", "--speculate", "0"};
  const std::vector<Answer> expected = Chat(model_server_->address(), greedy, turns);
  ASSERT_EQ(expected.size(), turns.size());
  const std::string file = StrCat(::testing::TempDir(), "chat_save_", getpid(), ".llmchat");
  std::string error;
  std::unique_ptr<ServerProcess> server =
      ServerProcess::Start("model_server", ModelFlags(), &error);
  ASSERT_NE(server, nullptr) << error;
  const std::vector<Answer> saved =
      Chat(server->address(), Concat(greedy, {"--save", file}), {turns[0], turns[1]});
  ASSERT_EQ(saved.size(), 2u);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(saved[i].tokens, expected[i].tokens);
  ASSERT_TRUE(std::filesystem::exists(file));
  server->Terminate(std::chrono::seconds(10), SIGKILL);

  // A damaged copy of the file: its snapshot's bytes flipped near the end.
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 100u);
  const std::string damaged = StrCat(file, ".damaged");
  {
    std::string copy = bytes;
    copy[copy.size() - 20] ^= 0x55;
    std::ofstream(damaged, std::ios::binary) << copy;
  }

  for (const std::string& resume : {file, damaged}) {
    SCOPED_TRACE(resume);
    server = ServerProcess::Start("model_server", ModelFlags(), &error);
    ASSERT_NE(server, nullptr) << error;
    auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
    ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
    auto child =
        Child::Start(LlmArgs("chat", server->address(), Concat(greedy, {"--resume", resume})));
    ASSERT_NE(child, nullptr);
    ASSERT_TRUE(child->WriteLine(turns[2]));
    std::optional<Answer> third = ReadAnswer(*child);
    ASSERT_TRUE(third.has_value());
    EXPECT_EQ(third->tokens, expected[2].tokens);
    EXPECT_EQ(third->text, expected[2].text);
    const std::vector<v1::SessionInfo> sessions = Sessions(server->address());
    ASSERT_EQ(sessions.size(), 1u);
    const int64_t prompt = third->summary["prompt_tokens"].get<int64_t>();
    if (resume == file) {
      // Only the third turn's tokens were prefilled: the history was imported.
      EXPECT_EQ(sessions[0].prefilled_tokens(), prompt);
      EXPECT_EQ(third->summary["session_rebuilds"].get<int>(), 0);
    } else {
      EXPECT_GT(sessions[0].prefilled_tokens(), prompt);  // the history prefilled again
    }
    EXPECT_EQ(child->Finish(), 0);
    server->Terminate(std::chrono::seconds(10));
  }

  std::ofstream(damaged, std::ios::binary | std::ios::trunc) << "not a chat";
  auto bad = Child::Start(LlmArgs("chat", model_server_->address(), {"--resume", damaged}));
  ASSERT_NE(bad, nullptr);
  EXPECT_EQ(bad->Finish(), 2);
  std::filesystem::remove(file);
  std::filesystem::remove(damaged);
}

TEST_F(GenerateE2ETest, BadValuesAndUnreachableServers) {
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--temperature", "-1"},
                                              {"--top-p", "1.5"},
                                              {"--min-p", "2"},
                                              {"--top-k", "-3"},
                                              {"--max-tokens", "0"},
                                              {"--logits", "top-n:0"},
                                              {"--stop", ""}}) {
    std::vector<std::string> flags = {"--prompt", "x"};
    flags.insert(flags.end(), bad.begin(), bad.end());
    auto child = Child::Start(LlmArgs("generate", model_server_->address(), flags));
    ASSERT_NE(child, nullptr);
    EXPECT_EQ(child->Finish(), 2) << bad[0];
  }
  auto child = Child::Start({testing::BinPath("llm"), "generate", "--prompt", "x", "--tokenizer",
                             tokenizer_server_->address(), "--model", "127.0.0.1:1"});
  ASSERT_NE(child, nullptr);
  EXPECT_EQ(child->Finish(), 1);
  auto health = Child::Start({testing::BinPath("llm"), "health", "--tokenizer",
                              tokenizer_server_->address(), "--model", model_server_->address()});
  ASSERT_NE(health, nullptr);
  std::string out;
  EXPECT_EQ(health->Finish(&out), 0);
  EXPECT_THAT(out, HasSubstr("SERVING"));
}

// Decoding up to the end of the model's context is a normal end: the model
// server's --max_context 64 (ModelInfo.context_length), so a generation
// that ignores EOS stops with stop_reason "context" and exit status 0 after
// 64 - prompt + 1 tokens (the last one is sampled from the logits of the
// 64th position and not fed).
TEST_F(GenerateE2ETest, ContextEndIsANormalStop) {
  constexpr int kContext = 64;
  std::string error;
  std::unique_ptr<ServerProcess> server = ServerProcess::Start(
      "model_server",
      {"--model", ModelPath(), "--kv_cache_mb", "64", "--max_context", std::to_string(kContext)},
      &error);
  ASSERT_NE(server, nullptr) << error;
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  const CliRun run = RunCli(
      LlmArgs("generate", server->address(),
              {"--prompt", kPrompt, "--temperature", "0", "--ignore-eos", "--max-tokens", "200"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  const std::vector<std::string> lines = absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty()) << run.err;
  const nlohmann::json summary = nlohmann::json::parse(lines.back(), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << lines.back();
  EXPECT_EQ(summary["stop_reason"], "context") << lines.back();
  const int prompt = summary["prompt_tokens"].get<int>();
  ASSERT_LT(prompt, kContext);
  EXPECT_EQ(summary["tokens"].get<int>(), kContext - prompt + 1) << lines.back();
  EXPECT_TRUE(Sessions(server->address()).empty());
}

// A fake service in this process on a free loopback port (*port); null if
// it cannot start.
std::unique_ptr<grpc::Server> ServeOnLoopback(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

// A model service whose sessions hold `steps` decoded tokens at most, and
// whose Info does not say so (context_length 0): the decode step past them
// answers OUT_OF_RANGE, as model_server does at the end of the context. Its
// logits always put token 504 first (greedy). It keeps the tokens of every
// Prefill (WaitForPrefills).
class ShortContextModelService final : public v1::Model::Service {
 public:
  explicit ShortContextModelService(int steps) : steps_(steps) {}

  // The tokens of the first `n` Prefill calls, once there are that many
  // (fewer after `timeout`).
  std::vector<std::vector<int32_t>> WaitForPrefills(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mutex_);
    const auto enough = [&] { return prefills_.size() >= n; };
    mutex_.AwaitWithTimeout(absl::Condition(&enough), timeout);
    return prefills_;
  }

  grpc::Status Info(grpc::ServerContext*, const v1::ModelInfoRequest*,
                    v1::ModelInfo* info) override {
    info->set_name("short-context fake");
    info->set_vocab_size(49152);  // SmolLM2's
    info->set_replica_id("fake.1");
    return grpc::Status::OK;
  }
  grpc::Status Prefill(grpc::ServerContext*, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override {
    {
      absl::MutexLock lock(&mutex_);
      prefills_.emplace_back(request->tokens().begin(), request->tokens().end());
      // One session: its length, as the client checks it.
      const int64_t kept = request->session_id().empty() ? 0
                           : request->has_truncate_to()  ? request->truncate_to()
                                                         : length_;
      length_ = kept + request->tokens_size();
      response->set_num_tokens(length_);
    }
    response->set_session_id("fake.1.0000000000000001");
    SetLogits(response->mutable_logits());
    return grpc::Status::OK;
  }
  grpc::Status DecodeStream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::DecodeTokenResponse, v1::DecodeTokenRequest>* stream) override {
    v1::DecodeTokenRequest request;
    for (int fed = 0; stream->Read(&request); ++fed) {
      if (fed == steps_) {
        return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "the session is full");
      }
      v1::DecodeTokenResponse response;
      {
        absl::MutexLock lock(&mutex_);
        response.set_num_tokens(++length_);
      }
      SetLogits(response.mutable_logits());
      stream->Write(response);
    }
    return grpc::Status::OK;
  }
  grpc::Status Release(grpc::ServerContext*, const v1::ReleaseRequest*,
                       v1::ReleaseResponse*) override {
    return grpc::Status::OK;
  }

 private:
  static void SetLogits(v1::Logits* logits) {
    logits->set_encoding(v1::LogitsOptions::LOGITS_TOP_N);
    logits->add_top_ids(504);
    logits->add_top_logits(10.0f);
    logits->set_log_sum_exp(10.0f);
  }
  const int steps_;
  absl::Mutex mutex_;
  std::vector<std::vector<int32_t>> prefills_ ABSL_GUARDED_BY(mutex_);
  int64_t length_ ABSL_GUARDED_BY(mutex_) = 0;
};

// The end of the context learned from a decode step's OUT_OF_RANGE (Info
// did not give the context length) is a normal stop too: the token whose
// step failed is the last one, stop_reason "context", exit status 0.
TEST_F(GenerateE2ETest, ContextEndFromADecodeStepIsANormalStop) {
  ShortContextModelService service(3);
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(&service, &port);
  ASSERT_NE(server, nullptr);
  const CliRun run =
      RunCli(LlmArgs("generate", StrCat("127.0.0.1:", port),
                     {"--prompt", "x", "--raw", "--temperature", "0", "--max-tokens", "50"}));
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << run.out << run.err;  // 3 fed tokens, the 4th, the summary
  const nlohmann::json summary = nlohmann::json::parse(lines.back(), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << lines.back();
  EXPECT_EQ(summary["stop_reason"], "context");
  EXPECT_EQ(summary["tokens"], 4);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(nlohmann::json::parse(lines[i])["token"], 504) << lines[i];
  }
  server->Shutdown();
}

// A child process on a new pseudo-terminal (its stdin, stdout and stderr),
// with TERM=xterm and no locale variables: what a person at a terminal runs.
class PtyChild {
 public:
  static std::unique_ptr<PtyChild> Start(const std::vector<std::string>& argv) {
    std::vector<std::string> args = argv;
    std::vector<char*> arg_ptrs;
    for (std::string& a : args) arg_ptrs.push_back(a.data());
    arg_ptrs.push_back(nullptr);
    // No locale variables: the "C" locale, as in a bare container, where
    // llm chat must still read UTF-8.
    std::vector<std::string> env = {"TERM=xterm"};
    for (char** e = environ; *e != nullptr; ++e) {
      const absl::string_view var(*e);
      if (!absl::StartsWith(var, "TERM=") && !absl::StartsWith(var, "LANG=") &&
          !absl::StartsWith(var, "LC_")) {
        env.push_back(*e);
      }
    }
    std::vector<char*> env_ptrs;
    for (std::string& e : env) env_ptrs.push_back(e.data());
    env_ptrs.push_back(nullptr);
    int master = -1;
    const pid_t parent = getpid();
    const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
    if (pid < 0) {
      ADD_FAILURE() << "forkpty: " << std::strerror(errno);
      return nullptr;
    }
    if (pid == 0) {  // async-signal-safe calls only
      if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(126);
      execve(arg_ptrs[0], arg_ptrs.data(), env_ptrs.data());
      _exit(127);
    }
    auto child = std::unique_ptr<PtyChild>(new PtyChild());
    child->pid_ = pid;
    child->master_ = master;
    return child;
  }

  ~PtyChild() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      testing::WaitForExit(pid_, std::chrono::seconds(10));
    }
    if (master_ >= 0) close(master_);
  }

  // Types `keys` (bytes as a terminal sends them).
  // Types `keys` once the line editor reads the terminal raw: keys typed
  // while the terminal is still in canonical mode (between the prompt and
  // libedit's switch) are cooked by the tty (a Ctrl-D there is an EOF that
  // the switch to raw mode drops, and the child waits forever).
  bool Type(const std::string& keys) {
    const auto deadline = testing::Clock::now() + std::chrono::seconds(60);
    termios tio{};
    while (tcgetattr(master_, &tio) == 0 && (tio.c_lflag & ICANON) != 0) {
      if (testing::Clock::now() > deadline) return false;  // a hang guard
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return write(master_, keys.data(), keys.size()) == static_cast<ssize_t>(keys.size());
  }

  // Reads what the child writes until `done(output so far)`, or 60 s (then
  // false: a hang guard, not a timed expectation).
  template <typename Done>
  bool ReadUntil(Done&& done) {
    const auto deadline = testing::Clock::now() + std::chrono::seconds(60);
    while (!done(output_)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - testing::Clock::now());
      if (left.count() <= 0) return false;
      pollfd p{master_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(master_, buf, sizeof(buf));
      if (n <= 0) return done(output_);  // EIO once the child has gone
      output_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }

  // The exit status (-1: killed or not exited).
  int Wait() {
    ReadUntil([](const std::string&) { return false; });  // to EOF
    const std::optional<int> status = testing::WaitForExit(pid_, std::chrono::seconds(30));
    pid_ = -1;
    return status && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  }

  const std::string& output() const { return output_; }

 private:
  PtyChild() = default;
  pid_t pid_ = -1;
  int master_ = -1;
  std::string output_;
};

// `llm chat` on a terminal edits lines (libedit): Left moves in the line,
// Up brings back the last message, and a UTF-8 character is one character.
// The model (a fake that keeps what it is sent) gets the edited text. Before,
// the escape sequences of the keys went to the model as they were.
TEST_F(GenerateE2ETest, ChatEditsLinesOnATerminal) {
  ShortContextModelService service(100);
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(&service, &port);
  ASSERT_NE(server, nullptr);
  auto chat = PtyChild::Start({testing::BinPath("llm"), "chat", "--tokenizer",
                               tokenizer_server_->address(), "--model", StrCat("127.0.0.1:", port),
                               "--temperature", "0", "--max-tokens", "1", "--json"});
  ASSERT_NE(chat, nullptr);
  // The prompt of turn `n` (0-based): after the n-th answer's summary line.
  const auto prompt = [](int n) {
    return [n](const std::string& out) {
      size_t pos = 0;
      for (int i = 0; i < n; ++i) {
        pos = out.find("stop_reason", pos);
        if (pos == std::string::npos) return false;
        ++pos;
      }
      return out.find("> ", pos) != std::string::npos;
    };
  };
  constexpr char kLeft[] = "\x1b[D";
  constexpr char kUp[] = "\x1b[A";
  const std::vector<std::string> turns = {
      StrCat("abc", kLeft, kLeft, "X\r"),  // aXbc
      StrCat(kUp, "\r"),                   // aXbc again, from the history
      StrCat("\xC3\xA9", kLeft, "x\r"),    // xé (é is one character)
  };
  for (size_t i = 0; i < turns.size(); ++i) {
    ASSERT_TRUE(chat->ReadUntil(prompt(static_cast<int>(i)))) << chat->output();
    ASSERT_TRUE(chat->Type(turns[i]));
  }
  ASSERT_TRUE(chat->ReadUntil(prompt(3))) << chat->output();
  ASSERT_TRUE(chat->Type("\x04"));  // Ctrl-D: the end
  EXPECT_EQ(chat->Wait(), 0) << chat->output();

  const std::vector<std::vector<int32_t>> prefills = service.WaitForPrefills(3, absl::Seconds(1));
  ASSERT_EQ(prefills.size(), 3u) << chat->output();
  auto vocab = tok::LoadGgufVocab(ModelPath(), std::nullopt);
  ASSERT_TRUE(vocab.ok()) << vocab.status();
  auto tokenizer = tok::Tokenizer::Create(*std::move(vocab));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string user[] = {"aXbc", "aXbc", "x\xC3\xA9"};
  for (size_t i = 0; i < prefills.size(); ++i) {
    const std::vector<uint32_t> ids(prefills[i].begin(), prefills[i].end());
    absl::StatusOr<std::string> text = (*tokenizer)->Decode(ids);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_THAT(*text, HasSubstr(StrCat("<|im_start|>user\n", user[i], "<|im_end|>")))
        << "turn " << i;
  }
  server->Shutdown();
}

// Usage errors exit with status 2 and name the flag; a typo gets the nearest
// flag as a suggestion.
TEST_F(GenerateE2ETest, UsageErrorsExitWith2) {
  const std::string llm = testing::BinPath("llm");
  const struct {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"generate", "--promt", "x"}, "llm generate: unknown flag --promt; did you mean --prompt?"},
      {{"generate", "--prompt", "x", "--temperature", "abc"},
       "llm generate: bad value 'abc' for --temperature: expected a number"},
      {{"generate", "--prompt", "x", "--max-tokens", "1000000000000"},
       "llm generate: bad value '1000000000000' for --max-tokens: expected an integer from "
       "-2147483648 to 2147483647"},
      {{"generate", "--prompt"}, "llm generate: --prompt needs a value"},
      {{"chat", "--top_k=many"}, "llm chat: bad value 'many' for --top_k"},
      {{"health", "--wiat", "3"}, "llm health: unknown flag --wiat; did you mean --wait?"},
      {{"tokenize", "--vocba", "x"}, "llm tokenize: unknown flag --vocba; did you mean --vocab?"},
      {{"generat", "--prompt", "x"}, "llm: unknown command 'generat'; did you mean 'generate'?"},
      {{"generate", "--prompt", "x", "extra"}, "llm generate: unexpected argument 'extra'"},
      // Bad values name the flag, not the API's field (top_p).
      {{"generate", "--prompt", "x", "--top-p", "0"},
       "llm: --top-p must be in (0, 1] (1 = off), got 0\n"},
      {{"chat", "--top-k", "-3"}, "llm: --top-k must be >= 0 (0 = off), got -3\n"},
      {{"chat", "--min-p", "2"}, "llm: --min-p must be in [0, 1] (0 = off), got 2\n"},
      {{"generate", "--prompt", "x", "--repeat-penalty", "0"},
       "llm: --repeat-penalty must be finite and > 0 (1 = off), got 0\n"},
      {{"generate", "--prompt", "x", "--max-tokens", "0"},
       "llm: --max-tokens must be >= 1, got 0\n"},
      {{"generate", "--prompt", "x", "--speculate", "17"},
       "llm: --speculate must be in [0, 16], got 17\n"},
      {{"generate", "--prompt", "x", "--stop", ""},
       "llm: --stop: a stop string must not be empty\n"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {llm};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const CliRun run = RunCli(argv);
    EXPECT_EQ(run.exit_code, 2) << c.args[1] << ": " << run.err;
    EXPECT_THAT(run.err, HasSubstr(c.message));
    EXPECT_EQ(run.out, "");
  }
}

// `llm --version`, each command's own --help, and the servers' --version and
// --help (no build paths, no absl's "Debug build" line).
TEST_F(GenerateE2ETest, VersionAndHelp) {
  const std::string llm = testing::BinPath("llm");
  CliRun run = RunCli({llm, "--version"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, ::testing::MatchesRegex("llm [0-9]+\\.[0-9]+\\.[0-9]+ \\(.* build.*\\)\n"));
  const struct {
    std::string command;
    std::vector<std::string> has;
    std::vector<std::string> lacks;
  } commands[] = {
      {"generate", {"Usage: llm generate", "--max-tokens", "--stop", "--wait-ready"}, {"--vocab"}},
      {"chat", {"Usage: llm chat", "--temperature"}, {"--prompt", "--vocab"}},
      {"health", {"Usage: llm health", "--wait", "--tokenizer"}, {"--temperature"}},
      {"tokenize", {"Usage: llm tokenize", "--vocab", "--allowed-special"}, {"--temperature"}},
      {"detokenize", {"Usage: llm detokenize", "--server"}, {"--allowed-special"}},
  };
  for (const auto& c : commands) {
    run = RunCli({llm, c.command, "--help"});
    EXPECT_EQ(run.exit_code, 0) << c.command;
    for (const std::string& s : c.has) EXPECT_THAT(run.out, HasSubstr(s)) << c.command;
    for (const std::string& s : c.lacks) {
      EXPECT_THAT(run.out, Not(HasSubstr(s + " "))) << c.command;
    }
    EXPECT_THAT(run.out, Not(HasSubstr("Commands:"))) << c.command;  // not the global help
  }
  for (const std::string server : {"tokenizer_server", "model_server"}) {
    run = RunCli({testing::BinPath(server), "--version"});
    EXPECT_EQ(run.exit_code, 0) << server;
    EXPECT_THAT(run.out, ::testing::MatchesRegex(server + " [0-9]+\\.[0-9]+\\.[0-9]+ \\(.*\\)\n"));
    EXPECT_THAT(run.out, Not(HasSubstr("NDEBUG")));
    run = RunCli({testing::BinPath(server), "--help"});
    EXPECT_EQ(run.exit_code, 0) << server;
    EXPECT_THAT(run.out, HasSubstr("--listen"));
    EXPECT_THAT(run.out, Not(HasSubstr("Flags from")));
    EXPECT_THAT(run.out, Not(HasSubstr(".cc")));
    EXPECT_THAT(run.out, Not(HasSubstr(testing::SourceDir())));
  }
  // The model server names the one bad numeric flag and its rule.
  run = RunCli({testing::BinPath("model_server"), "--model", ModelPath(), "--kv_cache_mb", "0"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_EQ(run.err, "model_server: --kv_cache_mb must be >= 1, got 0\n");
  run = RunCli({testing::BinPath("model_server"), "--model", ModelPath(), "--kv-cache-mb", "x"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("bad value 'x' for --kv-cache-mb"));
}

// The tokenizer and model addresses swapped: `llm health` checks the named
// services (llm.v1.Tokenizer, llm.v1.Model) and says which one each address
// serves; `llm generate` says so too instead of an empty message.
TEST_F(GenerateE2ETest, SwappedAddressesAreNamed) {
  const std::string llm = testing::BinPath("llm");
  const std::string tok = tokenizer_server_->address(), model = model_server_->address();
  CliRun run = RunCli({llm, "health", "--tokenizer", model, "--model", tok});
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_THAT(run.out, HasSubstr(StrCat("tokenizer ", model,
                                        ": NOT SERVING (this address serves the model, not the "
                                        "tokenizer)")));
  EXPECT_THAT(run.out, HasSubstr(StrCat("model ", tok,
                                        ": NOT SERVING (this address serves the tokenizer, not "
                                        "the model)")));
  // One server alone: an empty address skips that service.
  run = RunCli({llm, "health", "--tokenizer", tok, "--model", ""});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, StrCat("tokenizer ", tok, ": SERVING\n"));
  run = RunCli({llm, "health", "--tokenizer=", "--model", model});
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out, StrCat("model ", model, ": SERVING\n"));

  run = RunCli({llm, "generate", "--prompt", "x", "--tokenizer", model, "--model", tok});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(StrCat("tokenizer service at ", model,
                                        ": this address serves the model, not the tokenizer")));
  run = RunCli({llm, "generate", "--prompt", "x", "--tokenizer", tok, "--model", tok});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(StrCat("model service at ", tok,
                                        ": this address serves the tokenizer, not the model")));
}

// A model service that is up but never finishes loading: Info answers
// UNAVAILABLE, as model_server does while it reads its weights.
class LoadingModelService final : public v1::Model::Service {
 public:
  grpc::Status Info(grpc::ServerContext*, const v1::ModelInfoRequest*, v1::ModelInfo*) override {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading");
  }
};

// `llm generate` says on stderr that it waits for the model to load, shows
// the time waited (a line every 5 s when stderr is not a terminal), and
// says so when --wait-ready runs out.
TEST_F(GenerateE2ETest, WaitsForALoadingModelAndSaysSo) {
  LoadingModelService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(&service, &port);
  ASSERT_NE(server, nullptr);
  ASSERT_GT(port, 0);
  const std::string address = StrCat("127.0.0.1:", port);
  const CliRun run =
      RunCli({testing::BinPath("llm"), "generate", "--prompt", "x", "--tokenizer",
              tokenizer_server_->address(), "--model", address, "--wait-ready", "6"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr(StrCat("llm: the model service at ", address,
                                        " is still loading; waiting for it (up to 6s, "
                                        "--wait-ready)\n")));
  EXPECT_THAT(run.err, HasSubstr("llm: still waiting for the model service to load (5 s)\n"));
  EXPECT_THAT(run.err, HasSubstr(StrCat("llm: the model service at ", address,
                                        " is still loading after 6s (--wait-ready 6)")));
  EXPECT_THAT(run.err, Not(HasSubstr("cannot reach")));
  EXPECT_EQ(run.out, "");
  server->Shutdown();
}

// Splits a command line as /bin/sh does for the README's examples: words,
// '...' literally, "..." with \" \\ \$ \` escapes, an unquoted | as its own
// word, and an unquoted # starting a comment.
std::vector<std::string> ShellWords(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '#' && !in_word) {
      break;
    } else if (c == '|') {
      if (in_word) words.push_back(word);
      words.push_back("|");
      word.clear();
      in_word = false;
    } else if (c == '\'') {
      const size_t end = line.find('\'', i + 1);
      word += line.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (c == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < line.size() && std::strchr("\"\\$`", line[i + 1])) ++i;
        word.push_back(line[i]);
      }
      in_word = true;
    } else {
      word.push_back(c);
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// A README line of output matches when equal; a JSON object matches when it
// has the same keys and values, where "..." in the README stands for any
// value and logprobs (which differ a little between CPUs) only need to be
// numbers.
bool OutputLineMatches(const std::string& expected, const std::string& actual) {
  if (expected == actual) return true;
  if (expected.empty() || expected[0] != '{') return false;
  std::string e = expected;
  for (size_t p; (p = e.find(":...")) != std::string::npos;) e.replace(p, 4, ":null");
  const nlohmann::json je = nlohmann::json::parse(e, nullptr, false);
  const nlohmann::json ja = nlohmann::json::parse(actual, nullptr, false);
  if (!je.is_object() || !ja.is_object() || je.size() != ja.size()) return false;
  for (const auto& [key, value] : je.items()) {
    if (!ja.contains(key)) return false;
    if (value.is_null() || key == "logprob") {
      if (!value.is_null() && !ja[key].is_number()) return false;
      continue;
    }
    if (ja[key] != value) return false;
  }
  return true;
}

// Every `llm` example in README.md, run as written (with the suite's server
// addresses for the default ones, from the source directory) and compared
// with the output the README shows ("..." for lines left out).
TEST_F(GenerateE2ETest, ReadmeExamplesWork) {
  std::ifstream file(testing::SourceDir() + "/README.md");
  ASSERT_TRUE(file) << "no README.md";
  std::vector<std::string> lines;
  for (std::string line; std::getline(file, line);) lines.push_back(line);
  const auto indented = [&](size_t i) { return lines[i].rfind("    ", 0) == 0; };
  const auto is_command = [](const std::string& text) {
    return text.rfind("build/bin/", 0) == 0 || text.rfind("echo ", 0) == 0 ||
           text.rfind("scripts/", 0) == 0;
  };
  int examples = 0;
  std::set<std::string> commands;
  bool stop_example = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!indented(i)) continue;
    const std::string text = lines[i].substr(4);
    // Every example works from a fresh clone: nothing from beside the checkout
    // (the model comes from scripts/fetch-model.sh into models/).
    if (is_command(text)) {
      EXPECT_EQ(text.find("../"), std::string::npos) << text;
    }
    if (!is_command(text) || text.find("build/bin/llm ") == std::string::npos) continue;
    // Its output and, for chat, its input ("> " lines).
    std::vector<std::string> expected;
    std::string input;
    for (size_t j = i + 1; j < lines.size() && indented(j) && !is_command(lines[j].substr(4));
         ++j) {
      const std::string out = lines[j].substr(4);
      if (out.rfind("> ", 0) == 0) {
        input += out.substr(2) + "\n";
      } else {
        expected.push_back(out);
      }
    }
    std::vector<std::string> words = ShellWords(text);
    const auto pipe = std::find(words.begin(), words.end(), "|");
    if (pipe != words.end()) {  // echo WORDS | llm ...
      ASSERT_EQ(words[0], "echo") << text;
      input = absl::StrJoin(std::vector<std::string>(words.begin() + 1, pipe), " ") + "\n";
      words.erase(words.begin(), pipe + 1);
    }
    ASSERT_GE(words.size(), 2u) << text;
    ASSERT_EQ(words[0], "build/bin/llm") << text;
    words[0] = testing::BinPath("llm");
    for (std::string& w : words) {  // the README's default addresses: the suite's servers
      if (w == "127.0.0.1:50051") w = tokenizer_server_->address();
      if (w == "127.0.0.1:50052") w = model_server_->address();
    }
    const std::string command = words[1];
    commands.insert(command);
    if (command == "generate" || command == "chat" || command == "health") {
      words.insert(words.end(), {"--tokenizer", tokenizer_server_->address(), "--model",
                                 model_server_->address()});
    }
    ++examples;
    const CliRun run = RunCli(words, input, testing::SourceDir());
    EXPECT_EQ(run.exit_code, 0) << text << "\n" << run.err;
    std::vector<std::string> actual = absl::StrSplit(run.out, '\n');
    if (!actual.empty() && actual.back().empty()) actual.pop_back();
    // The README shows no output for health (it prints the suite's addresses)
    // nor for some generations.
    if (command == "health") continue;
    if (!expected.empty()) {
      const auto dots = std::find(expected.begin(), expected.end(), "...");
      if (dots == expected.end()) {
        EXPECT_EQ(actual.size(), expected.size()) << text << "\n" << run.out;
      } else {
        EXPECT_GE(actual.size(), expected.size() - 1) << text << "\n" << run.out;
      }
      const size_t head = static_cast<size_t>(dots - expected.begin());
      for (size_t k = 0; k < head && k < actual.size(); ++k) {
        EXPECT_TRUE(OutputLineMatches(expected[k], actual[k]))
            << text << "\nREADME: " << expected[k] << "\nactual: " << actual[k];
      }
      const size_t tail = dots == expected.end() ? 0 : expected.size() - head - 1;
      for (size_t k = 1; k <= tail && k <= actual.size(); ++k) {
        const std::string& e = expected[expected.size() - k];
        const std::string& a = actual[actual.size() - k];
        EXPECT_TRUE(OutputLineMatches(e, a)) << text << "\nREADME: " << e << "\nactual: " << a;
      }
    }
    // --stop "\n\n" stops at the first blank line, which never reaches the output.
    const auto stop = std::find(words.begin(), words.end(), "--stop");
    if (stop != words.end() && stop + 1 != words.end() && *(stop + 1) == "\\n\\n") {
      stop_example = true;
      words.push_back("--json");
      const CliRun json = RunCli(words, input, testing::SourceDir());
      ASSERT_EQ(json.exit_code, 0) << json.err;
      std::string generated;
      nlohmann::json summary;
      const std::vector<std::string> json_lines = absl::StrSplit(json.out, '\n', absl::SkipEmpty());
      for (const std::string& line : json_lines) {
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        ASSERT_TRUE(j.is_object()) << line;
        if (j.contains("stop_reason")) {
          summary = j;
        } else {
          generated += j["text"].get<std::string>();
        }
      }
      EXPECT_EQ(summary["stop_reason"], "stop") << json.out;
      EXPECT_FALSE(generated.empty());
      EXPECT_EQ(generated.find("\n\n"), std::string::npos) << generated;
      EXPECT_EQ(run.out, generated + "\n");  // the plain run printed the same text
    }
  }
  EXPECT_GE(examples, 10);
  EXPECT_EQ(commands,
            (std::set<std::string>{"generate", "chat", "health", "tokenize", "detokenize"}));
  EXPECT_TRUE(stop_example) << "the README's --stop \"\\n\\n\" example is gone";
}

}  // namespace
}  // namespace llm
