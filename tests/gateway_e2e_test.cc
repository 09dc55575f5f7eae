// The HTTP gateway end to end with the REAL default model
// (SmolLM2-135M-Instruct, Q4_1): the real tokenizer_server, model_server and
// llm_gateway on free loopback ports, spoken to over plain HTTP/1.1 from
// this process.
//
//   - /health, /v1/models, /tokenize and /detokenize;
//   - a non-streamed and a streamed chat completion (greedy) that answer
//     "What is the capital of France?" with Paris, the same text both ways,
//     with finish_reason and usage;
//   - seeded sampling repeats, n > 1, a stop string that never reaches the
//     output;
//   - an error per status: 400 (malformed JSON, a bad parameter named, a
//     prompt over the context), 404 (unknown model, unknown path), 405, 413
//     (body over --max_body_bytes), 429 (--max_concurrent 1 and a stream in
//     flight), 503 (the model service killed);
//   - a client that closes its stream mid-answer frees its slot at once
//     (the generation is cancelled, not run to max_tokens);
//   - hostile bodies (deep nesting, bytes after the JSON) are 400s and the
//     gateway serves on; /tokenize renders chat messages as chat does;
//   - with Gemma 3 270M (BOS, byte fallback): echo logprobs whose offsets
//     index into the text, partial characters as "bytes:\xNN".
//
// Needs models/SmolLM2-135M-Instruct.Q4_1.gguf and
// models/gemma-3-270m-q4_k_m.gguf (scripts/fetch-model.sh [gemma3-270m];
// scripts/test.sh fetches both).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "common/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/http_client.h"
#include "tests/server_process.h"

namespace llm {
namespace {

using nlohmann::json;
using ::testing::AnyOf;
using testing::Clock;
using testing::Connect;
using ::testing::HasSubstr;
using testing::Http;
using testing::HttpResponse;
using ::testing::Not;
using testing::RequestText;
using testing::SendAll;
using testing::ServerProcess;

constexpr char kQuestion[] = "What is the capital of France? Answer in one word.";
constexpr int kMaxBody = 256 * 1024;

std::string ModelPath() {
  return llm::testing::SourceDir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

// The JSON of every "data: " event of an SSE body, and whether it ended
// with "data: [DONE]".
std::vector<json> Events(const std::string& body, bool* done) {
  std::vector<json> out;
  *done = false;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t nl = body.find('\n', pos);
    if (nl == std::string::npos) nl = body.size();
    const std::string line = body.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.rfind("data: ", 0) != 0) continue;
    const std::string data = line.substr(6);
    if (data == "[DONE]") {
      *done = true;
      continue;
    }
    out.push_back(json::parse(data, nullptr, false));
  }
  return out;
}

class GatewayE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { StartServers(ModelPath()); }
  // The suite's tokenizer, model server and gateway, with the model at `path`.
  static void StartServers(const std::string& path) {
    std::string error;
    std::unique_ptr<ServerProcess> tokenizer, model;
    error = testing::StartTokenizerAndModel(path, &tokenizer, &model);
    ASSERT_EQ(error, "");
    tokenizer_ = tokenizer.release();
    model_ = model.release();
    gateway_ = StartGateway(model_->address(), &error).release();
    ASSERT_NE(gateway_, nullptr) << error;
    const HttpResponse models = Http(gateway_->port(), "GET", "/v1/models");
    ASSERT_EQ(models.status, 200) << models.body;
    model_id_ = new std::string(models.Json()["data"][0]["id"].get<std::string>());
  }
  static void TearDownTestSuite() {
    delete gateway_;
    delete model_;
    delete tokenizer_;
    delete model_id_;
    gateway_ = model_ = tokenizer_ = nullptr;
    model_id_ = nullptr;
  }

  // A gateway over the suite's tokenizer and `model_address`, one chat
  // request at a time.
  static std::unique_ptr<ServerProcess> StartGateway(const std::string& model_address,
                                                     std::string* error,
                                                     std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--tokenizer",
                                      tokenizer_->address(),
                                      "--model",
                                      model_address,
                                      "--max_concurrent",
                                      "1",
                                      "--max_queued",
                                      "0",
                                      "--max_body_bytes",
                                      std::to_string(kMaxBody),
                                      "--reconnect_timeout",
                                      "1",
                                      "--timeout",
                                      "10"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return ServerProcess::Start("llm_gateway", flags, error);
  }

  static int port() { return gateway_->port(); }

  // A chat request's body: one user message, greedy unless `extra` says
  // otherwise.
  static std::string Chat(const std::string& question, json extra = json::object()) {
    json body{{"model", *model_id_},
              {"messages", json::array({{{"role", "user"}, {"content", question}}})},
              {"temperature", 0},
              {"max_tokens", 32}};
    body.update(extra);
    return body.dump();
  }

  static HttpResponse PostChat(const std::string& body) {
    return Http(port(), "POST", "/v1/chat/completions", body);
  }

  // A completions request that scores `prompt` (echo, max_tokens 0) with
  // `logprobs` alternatives at each position.
  static HttpResponse PostEcho(const std::string& prompt, int logprobs) {
    return Http(port(), "POST", "/v1/completions",
                json{{"model", *model_id_},
                     {"prompt", prompt},
                     {"echo", true},
                     {"logprobs", logprobs},
                     {"max_tokens", 0}}
                    .dump());
  }

  static void ExpectError(const HttpResponse& r, int status, const std::string& param = "") {
    EXPECT_EQ(r.status, status) << r.body;
    const json j = r.Json();
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string()) << r.body;
    EXPECT_TRUE(j["error"]["type"].is_string()) << r.body;
    if (!param.empty()) {
      EXPECT_EQ(j["error"]["param"], param) << r.body;
    }
  }

  static ServerProcess* tokenizer_;
  static ServerProcess* model_;
  static ServerProcess* gateway_;
  static std::string* model_id_;
};

ServerProcess* GatewayE2ETest::tokenizer_ = nullptr;
ServerProcess* GatewayE2ETest::model_ = nullptr;
ServerProcess* GatewayE2ETest::gateway_ = nullptr;
std::string* GatewayE2ETest::model_id_ = nullptr;

TEST_F(GatewayE2ETest, HealthAndModels) {
  const HttpResponse health = Http(port(), "GET", "/health");
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(health.Json()["status"], "ok");
  EXPECT_EQ(health.Json()["tokenizer"][tokenizer_->address()], "SERVING");
  EXPECT_EQ(health.Json()["model"][model_->address()], "SERVING");
  const HttpResponse models = Http(port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.Json()["object"], "list");
  ASSERT_EQ(models.Json()["data"].size(), 1u);
  EXPECT_EQ(models.Json()["data"][0]["object"], "model");
  const HttpResponse one = Http(port(), "GET", "/v1/models/" + *model_id_);
  EXPECT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(one.Json()["id"], *model_id_);
  ExpectError(Http(port(), "GET", "/v1/models/gpt-4"), 404, "model");
}

TEST_F(GatewayE2ETest, TokenizeAndDetokenize) {
  const HttpResponse t = Http(port(), "POST", "/tokenize",
                              json{{"model", *model_id_}, {"prompt", "<|im_start|>Paris"}}.dump());
  ASSERT_EQ(t.status, 200) << t.body;
  const std::vector<int> tokens = t.Json()["tokens"];
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(tokens[0], 1) << "<|im_start|> read as the special token";
  EXPECT_EQ(t.Json()["count"], tokens.size());
  EXPECT_EQ(t.Json()["max_model_len"], 8192);
  const HttpResponse plain =
      Http(port(), "POST", "/tokenize",
           json{{"prompt", "<|im_start|>Paris"}, {"add_special_tokens", false}}.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_GT(plain.Json()["count"].get<int>(), static_cast<int>(tokens.size()));
  const HttpResponse d = Http(port(), "POST", "/detokenize", json{{"tokens", tokens}}.dump());
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.Json()["prompt"], "<|im_start|>Paris");
  ExpectError(Http(port(), "POST", "/detokenize", json{{"tokens", {-1}}}.dump()), 400, "tokens");
  ExpectError(Http(port(), "POST", "/tokenize", json{{"prompt", 5}}.dump()), 400, "prompt");
  ExpectError(Http(port(), "GET", "/tokenize"), 405);
}

TEST_F(GatewayE2ETest, ChatStreamedAndNotAnswerParis) {
  const HttpResponse plain = PostChat(Chat(kQuestion));
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_THAT(plain.headers, HasSubstr("Content-Type: application/json"));
  const json j = plain.Json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["model"], *model_id_);
  EXPECT_THAT(j["id"].get<std::string>(), ::testing::StartsWith("chatcmpl-"));
  ASSERT_EQ(j["choices"].size(), 1u);
  const std::string answer = j["choices"][0]["message"]["content"];
  EXPECT_THAT(answer, HasSubstr("Paris"));
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  const int prompt_tokens = j["usage"]["prompt_tokens"];
  const int completion_tokens = j["usage"]["completion_tokens"];
  EXPECT_GT(prompt_tokens, 10);
  EXPECT_GT(completion_tokens, 0);
  EXPECT_EQ(j["usage"]["total_tokens"], prompt_tokens + completion_tokens);

  const HttpResponse streamed =
      PostChat(Chat(kQuestion, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_THAT(streamed.headers, HasSubstr("Content-Type: text/event-stream"));
  bool done = false;
  const std::vector<json> events = Events(streamed.body, &done);
  EXPECT_TRUE(done) << streamed.body;
  ASSERT_GE(events.size(), 3u) << streamed.body;
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  std::string finish;
  for (const json& e : events) {
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    if (e["choices"].empty()) continue;
    const json& delta = e["choices"][0]["delta"];
    if (delta.contains("content")) text += delta["content"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, answer);
  EXPECT_EQ(finish, "stop");
  const json& last = events.back();
  EXPECT_TRUE(last["choices"].empty());
  EXPECT_EQ(last["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(last["usage"]["completion_tokens"], completion_tokens);
}

TEST_F(GatewayE2ETest, SeedRepeatsAndNGivesSeveralChoices) {
  const std::string body =
      Chat("Write a sentence about the sea.",
           {{"temperature", 0.9}, {"top_p", 0.95}, {"seed", 7}, {"n", 2}, {"max_tokens", 16}});
  const HttpResponse a = PostChat(body);
  const HttpResponse b = PostChat(body);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  ASSERT_EQ(a.Json()["choices"].size(), 2u);
  EXPECT_EQ(a.Json()["choices"], b.Json()["choices"]);
  EXPECT_EQ(a.Json()["choices"][1]["index"], 1);
  EXPECT_NE(a.Json()["choices"][0]["message"]["content"],
            a.Json()["choices"][1]["message"]["content"]);
  EXPECT_EQ(a.Json()["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(a.Json()["usage"]["completion_tokens"], 32);
}

// The stdout of a shell command (empty when it fails).
std::string RunCommand(const std::string& command) {
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    if (pclose(p) != 0) out.clear();
  }
  return out;
}

constexpr char kScoredText[] =
    "The Eiffel Tower was built for the 1889 World's Fair in Paris. At first many artists "
    "disliked it, but it soon became the symbol of the city, and millions climb it every year.";

// Echo + logprobs, as evaluation harnesses score text (lm-evaluation-harness's
// local-completions): every prompt token after the first gets the logprob
// llm-perplexity computes for it on the same text and model, and the sums
// agree within 1e-3 (in fact to float rounding: the same engine, a different
// path). The first token's logprob is null.
TEST_F(GatewayE2ETest, CompletionsEchoLogprobsMatchLlmPerplexity) {
  const HttpResponse r = PostEcho(kScoredText, 1);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.Json();
  EXPECT_EQ(j["object"], "text_completion");
  const json& choice = j["choices"][0];
  EXPECT_EQ(choice["text"], kScoredText);
  EXPECT_EQ(choice["finish_reason"], "length");
  const json& lp = choice["logprobs"];
  const size_t n = lp["tokens"].size();
  ASSERT_GT(n, 20u);
  EXPECT_EQ(j["usage"]["prompt_tokens"], n);
  EXPECT_EQ(j["usage"]["completion_tokens"], 0);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  std::string joined;
  for (const json& t : lp["tokens"]) joined += t.get<std::string>();
  EXPECT_EQ(joined, kScoredText);

  const std::string text_file = ::testing::TempDir() + "/scored_text.txt";
  FILE* f = fopen(text_file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs(kScoredText, f);
  fclose(f);
  const std::string out =
      RunCommand(StrCat(testing::BinPath("llm-perplexity"), " --model ", ModelPath(), " --file ",
                        text_file, " --ctx ", n, " --score_from 0 --token_logprobs --threads 2"));
  const json ref = json::parse(out, nullptr, false);
  ASSERT_TRUE(ref.contains("token_logprobs")) << out;
  ASSERT_EQ(ref["token_logprobs"].size(), n - 1);
  double sum = 0, ref_sum = 0;
  for (size_t i = 1; i < n; ++i) {
    const float got = lp["token_logprobs"][i];
    const float want = ref["token_logprobs"][i - 1];
    EXPECT_NEAR(got, want, 1e-3) << "token " << i << " " << lp["tokens"][i];
    sum += got;
    ref_sum += want;
    // The position's top alternative, and the token itself when it is not
    // that one (OpenAI's logprobs + 1).
    const json& top = lp["top_logprobs"][i];
    ASSERT_GE(top.size(), 1u);
    ASSERT_LE(top.size(), 2u);
    EXPECT_EQ(top[lp["tokens"][i].get<std::string>()], lp["token_logprobs"][i]) << top;
    for (const auto& [token, logprob] : top.items()) EXPECT_GE(logprob.get<float>(), got - 1e-6);
  }
  EXPECT_NEAR(sum, ref_sum, 1e-3);
}

// Completions: streamed and not agree; logprobs list each generated token
// (greedy: the top alternative is the token itself); several prompts (text
// and token ids) get a choice each; chat logprobs likewise.
TEST_F(GatewayE2ETest, CompletionsAndChatLogprobs) {
  const json body{{"model", *model_id_},
                  {"prompt", "The capital of France is"},
                  {"temperature", 0},
                  {"max_tokens", 8},
                  {"logprobs", 2}};
  const HttpResponse plain = Http(port(), "POST", "/v1/completions", body.dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json plain_json = plain.Json();
  const json& choice = plain_json["choices"][0];
  const std::string text = choice["text"];
  EXPECT_FALSE(text.empty());
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 8u) << plain.body;
  EXPECT_EQ(choice["finish_reason"], "length");
  for (size_t i = 0; i < 8; ++i) {
    const json& top = lp["top_logprobs"][i];
    ASSERT_EQ(top.size(), 2u) << top;
    ASSERT_TRUE(top.contains(lp["tokens"][i].get<std::string>())) << top;
    EXPECT_EQ(top[lp["tokens"][i].get<std::string>()], lp["token_logprobs"][i]);
    EXPECT_LE(lp["token_logprobs"][i].get<float>(), 0.0f);
  }

  json stream_body = body;
  stream_body["stream"] = true;
  const HttpResponse streamed = Http(port(), "POST", "/v1/completions", stream_body.dump());
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  bool done = false;
  std::string joined;
  json streamed_logprobs = json::array();
  for (const json& e : Events(streamed.body, &done)) {
    EXPECT_EQ(e["object"], "text_completion");
    joined += e["choices"][0]["text"].get<std::string>();
    const json& l = e["choices"][0]["logprobs"];
    if (!l.is_null()) {
      for (const json& v : l["token_logprobs"]) streamed_logprobs.push_back(v);
    }
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(joined, text);
  EXPECT_EQ(streamed_logprobs, lp["token_logprobs"]);

  const HttpResponse tokens =
      Http(port(), "POST", "/tokenize", json{{"prompt", "The capital of France is"}}.dump());
  const HttpResponse batch =
      Http(port(), "POST", "/v1/completions",
           json{{"model", *model_id_},
                {"prompt", json::array({"The capital of France is", tokens.Json()["tokens"]})},
                {"temperature", 0},
                {"max_tokens", 8}}
               .dump());
  ASSERT_EQ(batch.status, 200) << batch.body;
  ASSERT_EQ(batch.Json()["choices"].size(), 2u);
  EXPECT_EQ(batch.Json()["choices"][1]["index"], 1);
  EXPECT_EQ(batch.Json()["choices"][0]["text"], text);
  EXPECT_EQ(batch.Json()["choices"][1]["text"], text) << "token ids prompt the same";

  const HttpResponse chat = PostChat(Chat(kQuestion, {{"logprobs", true}, {"top_logprobs", 3}}));
  ASSERT_EQ(chat.status, 200) << chat.body;
  const json chat_json = chat.Json();
  const json& content = chat_json["choices"][0]["logprobs"]["content"];
  ASSERT_FALSE(content.empty()) << chat.body;
  for (const json& entry : content) {
    ASSERT_EQ(entry["top_logprobs"].size(), 3u);
    EXPECT_EQ(entry["top_logprobs"][0]["token"], entry["token"]) << "greedy picks the top";
    EXPECT_EQ(entry["top_logprobs"][0]["logprob"], entry["logprob"]);
    EXPECT_TRUE(entry["bytes"].is_array());
  }
  ExpectError(Http(port(), "POST", "/v1/completions",
                   json{{"model", *model_id_}, {"prompt", "x"}, {"max_tokens", 0}}.dump()),
              400, "max_tokens");
  ExpectError(Http(port(), "POST", "/v1/completions",
                   json{{"model", *model_id_}, {"prompt", json::array({1, 999999})}}.dump()),
              400, "prompt");
}

// Conversations (X-Session-Id) keep their model session: the second turn
// prefills only what it adds (usage.prompt_tokens_details.cached_tokens; a
// request without a conversation finds the model server's prefix cache) and
// answers exactly what the whole conversation in a new session answers; a
// second request on a running conversation gets 409; bad ids and n > 1 400.
TEST_F(GatewayE2ETest, ConversationKeepsItsSession) {
  const std::string conv = "X-Session-Id: e2e-conv-1\r\n";
  json messages = json::array({{{"role", "user"}, {"content", kQuestion}}});
  const auto chat = [&](const std::string& headers) {
    return Http(
        port(), "POST", "/v1/chat/completions",
        json{{"model", *model_id_}, {"messages", messages}, {"temperature", 0}, {"max_tokens", 24}}
            .dump(),
        headers);
  };
  const HttpResponse first = chat(conv);
  ASSERT_EQ(first.status, 200) << first.body;
  const int first_prompt = first.Json()["usage"]["prompt_tokens"];
  // Earlier tests may have left the question's blocks in the model server's
  // prefix cache; never the whole prompt (its last token is computed).
  EXPECT_LT(first.Json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            first_prompt);
  messages.push_back(
      {{"role", "assistant"}, {"content", first.Json()["choices"][0]["message"]["content"]}});
  messages.push_back({{"role", "user"}, {"content", "And of Italy?"}});
  const HttpResponse second = chat(conv);
  ASSERT_EQ(second.status, 200) << second.body;
  const int cached = second.Json()["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GE(cached, first_prompt) << second.body;
  EXPECT_LT(cached, second.Json()["usage"]["prompt_tokens"].get<int>());
  const HttpResponse alone = chat("");
  ASSERT_EQ(alone.status, 200) << alone.body;
  // A new session with the same conversation finds the second turn's full
  // KV blocks (16 positions each) in the model server's prefix cache.
  const int alone_prompt = alone.Json()["usage"]["prompt_tokens"];
  EXPECT_GE(alone.Json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
            alone_prompt - 16)
      << alone.body;
  EXPECT_EQ(second.Json()["choices"][0]["message"]["content"],
            alone.Json()["choices"][0]["message"]["content"]);

  // A running conversation refuses a second request (409) before the
  // gateway's own limit (429) would.
  const int fd = Connect(port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(
      fd, RequestText("POST", "/v1/chat/completions",
                      Chat("Tell me a long story.",
                           {{"stream", true}, {"max_tokens", 2000}, {"logit_bias", {{"2", -100}}}}),
                      "X-Session-Id: e2e-conv-2\r\n")));
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 30000), 0) << got;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  ExpectError(
      Http(port(), "POST", "/v1/chat/completions", Chat(kQuestion), "X-Session-Id: e2e-conv-2\r\n"),
      409, "x-session-id");
  close(fd);
  ExpectError(
      Http(port(), "POST", "/v1/chat/completions", Chat(kQuestion), "X-Session-Id: bad id\r\n"),
      400, "x-session-id");
  ExpectError(Http(port(), "POST", "/v1/chat/completions", Chat(kQuestion, {{"n", 2}}), conv), 400,
              "n");
}

// SIGTERM drains: a stream already running ends normally ([DONE], every
// token), while /health and new requests answer 503; then the gateway exits 0.
TEST_F(GatewayE2ETest, SigtermDrainsRunningStreams) {
  std::string error;
  // A drain long enough for the stream on a loaded machine (with the whole
  // suite at -j2, 400 tokens once took 28 s, near the default 30 s).
  std::unique_ptr<ServerProcess> gw =
      StartGateway(model_->address(), &error, {"--drain_timeout", "300"});
  ASSERT_NE(gw, nullptr) << error;
  const int fd = Connect(gw->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(
      fd, RequestText("POST", "/v1/chat/completions",
                      Chat("Tell me a story.",
                           // Long enough (seconds here) that the stream is
                           // still running when the drain is checked below.
                           {{"stream", true}, {"max_tokens", 400}, {"ignore_eos", true}}))));
  std::string got;
  char buf[4096];
  const auto read_some = [&] {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 30000) <= 0) return false;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    got.append(buf, static_cast<size_t>(n));
    return true;
  };
  while (got.find("\"content\":\"") == std::string::npos ||
         got.find("data: ") == got.rfind("data: ")) {
    ASSERT_TRUE(read_some()) << got;  // the role chunk and a token: running
  }
  ASSERT_EQ(kill(gw->pid(), SIGTERM), 0);
  // The signal is handled asynchronously: /health says 503 once it is.
  HttpResponse health = Http(gw->port(), "GET", "/health");
  for (int i = 0; i < 100 && health.status == 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    health = Http(gw->port(), "GET", "/health");
  }
  EXPECT_EQ(health.status, 503) << health.body;
  EXPECT_EQ(health.Json()["status"], "draining") << health.body;
  ExpectError(Http(gw->port(), "POST", "/v1/chat/completions", Chat(kQuestion)), 503);
  while (read_some()) {
  }
  close(fd);
  bool done = false;
  const size_t body = got.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  const std::vector<json> events = Events(got.substr(body + 4), &done);
  EXPECT_TRUE(done) << "the running stream was cut: " << got;
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "length") << events.back();
  const std::optional<int> status = gw->Terminate(std::chrono::seconds(20), /*sig=*/0);
  ASSERT_TRUE(status.has_value()) << "the gateway did not exit after the drain";
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << *status;
}

// Speculative decoding (the "speculate" extension): greedy output is the
// same as without; usage reports the proposals as OpenAI's predicted
// outputs do; out of [0, 16] is a 400 naming the field.
TEST_F(GatewayE2ETest, SpeculationGivesTheSameAnswerAndCountsProposals) {
  const std::string echo =
      "Repeat this line three times: the cat sat on the mat and the dog sat on the log.";
  const HttpResponse plain =
      PostChat(Chat(echo, {{"temperature", 0}, {"max_tokens", 40}, {"speculate", 0}}));
  ASSERT_EQ(plain.status, 200) << plain.body;
  const HttpResponse fast =
      PostChat(Chat(echo, {{"temperature", 0}, {"max_tokens", 40}, {"speculate", 4}}));
  ASSERT_EQ(fast.status, 200) << fast.body;
  EXPECT_EQ(fast.Json()["choices"][0]["message"]["content"],
            plain.Json()["choices"][0]["message"]["content"]);
  EXPECT_FALSE(plain.Json()["usage"].contains("completion_tokens_details")) << plain.body;
  const json details = fast.Json()["usage"]["completion_tokens_details"];
  ASSERT_TRUE(details.is_object()) << fast.body;
  EXPECT_GT(details["accepted_prediction_tokens"].get<int>(), 0) << fast.body;
  EXPECT_GE(details["rejected_prediction_tokens"].get<int>(), 0) << fast.body;
  ExpectError(PostChat(Chat(echo, {{"speculate", 17}})), 400, "speculate");
}

TEST_F(GatewayE2ETest, StopStringNeverReachesTheOutput) {
  const HttpResponse r = PostChat(Chat(kQuestion, {{"stop", "aris"}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string text = r.Json()["choices"][0]["message"]["content"];
  EXPECT_THAT(text, Not(HasSubstr("aris")));
  EXPECT_THAT(text, HasSubstr("P"));
  EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "stop");
}

// The value of the sample `name` (with its labels, as the text format writes
// them) in a Prometheus text exposition, or -1 when absent.
double Sample(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

TEST_F(GatewayE2ETest, MetricsCountRequestsTokensAndFirstTokens) {
  const std::string before = Http(port(), "GET", "/metrics").body;
  const double chats = std::max(
      0.0,
      Sample(before, R"(llm_gateway_requests_total{code="200",endpoint="/v1/chat/completions"})"));
  const double completion =
      std::max(0.0, Sample(before, R"(llm_gateway_tokens_total{kind="completion"})"));
  const double firsts =
      std::max(0.0, Sample(before, "llm_gateway_time_to_first_token_seconds_count"));
  // vLLM's end-to-end latency, labelled with the model's id.
  const std::string e2e =
      StrCat("vllm:e2e_request_latency_seconds_count{model_name=\"", *model_id_, "\"}");
  const double e2es = std::max(0.0, Sample(before, e2e));
  const HttpResponse r = PostChat(Chat(kQuestion));
  ASSERT_EQ(r.status, 200) << r.body;
  const int64_t tokens = r.Json()["usage"]["completion_tokens"];
  const HttpResponse m = Http(port(), "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_THAT(m.headers, HasSubstr("text/plain"));
  EXPECT_EQ(
      Sample(m.body, R"(llm_gateway_requests_total{code="200",endpoint="/v1/chat/completions"})"),
      chats + 1);
  EXPECT_EQ(Sample(m.body, R"(llm_gateway_tokens_total{kind="completion"})"),
            completion + static_cast<double>(tokens));
  EXPECT_EQ(Sample(m.body, "llm_gateway_time_to_first_token_seconds_count"), firsts + 1);
  EXPECT_EQ(Sample(m.body, e2e), e2es + 1);
  EXPECT_EQ(Sample(m.body, "llm_gateway_generations_active"), 0);
  ExpectError(Http(port(), "POST", "/metrics"), 405);
}

// /tokenize with chat messages (vLLM's form): the ids a chat request
// prefills (its usage.prompt_tokens); without add_generation_prompt, the
// same without the assistant's header.
TEST_F(GatewayE2ETest, TokenizeRendersMessagesAsChatDoes) {
  const json messages = json::array({{{"role", "user"}, {"content", kQuestion}}});
  const HttpResponse chat = PostChat(Chat(kQuestion, {{"max_tokens", 1}}));
  ASSERT_EQ(chat.status, 200) << chat.body;
  const HttpResponse t = Http(port(), "POST", "/tokenize", json{{"messages", messages}}.dump());
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(t.Json()["count"], chat.Json()["usage"]["prompt_tokens"]);
  const HttpResponse bare =
      Http(port(), "POST", "/tokenize",
           json{{"messages", messages}, {"add_generation_prompt", false}}.dump());
  ASSERT_EQ(bare.status, 200) << bare.body;
  const std::vector<int> all = t.Json()["tokens"], some = bare.Json()["tokens"];
  ASSERT_LT(some.size(), all.size());
  EXPECT_TRUE(std::equal(some.begin(), some.end(), all.begin()));
  ExpectError(
      Http(port(), "POST", "/tokenize", json{{"messages", messages}, {"prompt", "x"}}.dump()), 400,
      "messages");
}

// Bodies that crashed the gateway or passed: a value nested 600 levels
// deep where an error message dumped it (the worker's stack overflowed),
// 100,000 levels, bytes after the JSON value, a logit_bias key with a
// blank; each is a 400, and the gateway serves on.
TEST_F(GatewayE2ETest, HostileBodiesAre400AndTheGatewayServesOn) {
  const std::string deep = std::string(600, '[') + std::string(600, ']');
  const std::string deeper = std::string(100000, '[') + std::string(100000, ']');
  const std::string model = json(*model_id_).dump();
  const std::pair<std::string, std::string> cases[] = {
      {"/detokenize", StrCat(R"({"tokens": [)", deep, "]}")},
      {"/tokenize", StrCat(R"({"prompt": "x", "model": )", deep, "}")},
      {"/v1/completions", StrCat(R"({"model": )", model, R"(, "prompt": [1, )", deep, "]}")},
      {"/v1/chat/completions", deeper},
      {"/v1/completions",
       StrCat(R"({"model": )", model, R"(, "prompt": "x"})", std::string("\0garbage", 8))},
  };
  for (const auto& [path, body] : cases) {
    const HttpResponse r = Http(port(), "POST", path, body);
    ExpectError(r, 400);
    EXPECT_THAT(r.body, AnyOf(HasSubstr("deeper than 64 levels"), HasSubstr("NUL byte"))) << path;
  }
  ExpectError(PostChat(Chat(kQuestion, {{"logit_bias", {{" 5", 1}}}})), 400, "logit_bias");
  const HttpResponse stops = PostChat(Chat(kQuestion, {{"stop", {"a", "b", "c", "d", "e"}}}));
  ExpectError(stops, 400, "stop");
  EXPECT_THAT(stops.body, HasSubstr("at most 4"));
  // Inside the documented ranges: served.
  EXPECT_EQ(PostChat(Chat(kQuestion, {{"top_p", 1e-300}, {"max_tokens", 2}})).status, 200);
  EXPECT_EQ(PostChat(Chat(kQuestion, {{"response_format", {{"type", "text"}}}, {"max_tokens", 2}}))
                .status,
            200);
  ExpectError(PostChat(Chat(kQuestion, {{"response_format", {{"type", "xml"}}}})), 400,
              "response_format");
  EXPECT_EQ(Http(port(), "GET", "/v1/models").status, 200);
}

TEST_F(GatewayE2ETest, ErrorsHaveOpenAiShapeAndStatus) {
  ExpectError(PostChat("{not json"), 400);
  ExpectError(PostChat(Chat(kQuestion, {{"top_p", 7}})), 400, "top_p");
  ExpectError(PostChat(Chat(kQuestion, {{"temperature", "warm"}})), 400, "temperature");
  ExpectError(PostChat(Chat(kQuestion, {{"logit_bias", {{"999999", 1}}}})), 400, "logit_bias");
  ExpectError(PostChat(Chat(kQuestion, {{"model", "gpt-4"}})), 404, "model");
  ExpectError(Http(port(), "GET", "/v1/nothing"), 404);
  ExpectError(Http(port(), "GET", "/v1/chat/completions"), 405);
  ExpectError(PostChat(Chat(std::string(kMaxBody, 'a'))), 413);
  // ~10,000 tokens: over SmolLM2's 8192.
  std::string long_prompt;
  for (int i = 0; i < 10000; ++i) long_prompt += " cat";
  const HttpResponse over = PostChat(Chat(long_prompt));
  ExpectError(over, 400, "messages");
  EXPECT_EQ(over.Json()["error"]["code"], "context_length_exceeded");
}

// With --max_concurrent 1: a stream in flight makes the next request 429;
// closing the stream cancels its generation, so the slot frees at once.
TEST_F(GatewayE2ETest, OverloadAndDisconnectCancels) {
  const int fd = Connect(port());
  ASSERT_GE(fd, 0);
  // 4000 tokens with EOS banned: a minute or more if it ran to the end.
  ASSERT_TRUE(
      SendAll(fd, RequestText("POST", "/v1/chat/completions",
                              Chat("Tell me a long story.", {{"stream", true},
                                                             {"max_tokens", 4000},
                                                             {"temperature", 1.0},
                                                             {"logit_bias", {{"2", -100}}}}))));
  std::string got;
  char buf[4096];
  const auto events = [&] {
    size_t count = 0;
    for (size_t at = got.find("data: "); at != std::string::npos; at = got.find("data: ", at + 1)) {
      ++count;
    }
    return count;
  };
  while (events() < 6) {  // the role chunk and five tokens: the stream is running
    pollfd p{fd, POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 30000), 0) << got;
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  const HttpResponse busy = PostChat(Chat(kQuestion));
  ExpectError(busy, 429);
  EXPECT_THAT(busy.headers, HasSubstr("Retry-After: 1")) << busy.headers;
  EXPECT_THAT(busy.Json()["error"]["message"].get<std::string>(),
              HasSubstr("1 request generating"));
  close(fd);
  // The generation ends within a few tokens of the close (not after the
  // 4000 it asked for): the gateway's own gauge says so without a request
  // that would itself take a slot and a prefill's time.
  const auto closed = Clock::now();
  double active = 1;
  while (active != 0 && Clock::now() - closed < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    active = Sample(Http(port(), "GET", "/metrics").body, "llm_gateway_generations_active");
  }
  EXPECT_EQ(active, 0);
  EXPECT_LT(Clock::now() - closed, std::chrono::seconds(3))
      << "the closed stream's generation was not cancelled";
  const HttpResponse after = PostChat(Chat(kQuestion, {{"max_tokens", 4}}));
  EXPECT_EQ(after.status, 200) << after.body;
}

// 64 streams at once through one gateway (its default --max_concurrent, over
// a model server with room for all their sessions): every one answers 200,
// streams text and a finish reason, and ends with [DONE]; none is lost or
// refused.
TEST_F(GatewayE2ETest, SixtyFourConcurrentStreamsAllComplete) {
  std::string error;
  std::unique_ptr<ServerProcess> model = ServerProcess::Start(
      "model_server", {"--model", ModelPath(), "--kv_cache_mb", "256"}, &error);
  ASSERT_NE(model, nullptr) << error;
  auto channel = grpc::CreateChannel(model->address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  constexpr int kStreams = 64;
  const std::string max_concurrent = std::to_string(kStreams);
  std::unique_ptr<ServerProcess> gateway =
      ServerProcess::Start("llm_gateway",
                           {"--tokenizer", tokenizer_->address(), "--model", model->address(),
                            "--max_concurrent", max_concurrent},
                           &error);
  ASSERT_NE(gateway, nullptr) << error;
  std::vector<HttpResponse> responses(kStreams);
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      responses[i] =
          Http(gateway->port(), "POST", "/v1/chat/completions",
               Chat(kQuestion,
                    {{"stream", true}, {"max_tokens", 16}, {"temperature", 0.8}, {"seed", i}}));
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kStreams; ++i) {
    const HttpResponse& r = responses[i];
    ASSERT_EQ(r.status, 200) << "stream " << i << ": " << r.body;
    bool done = false;
    const std::vector<json> events = Events(r.body, &done);
    EXPECT_TRUE(done) << "stream " << i << ": " << r.body;
    std::string text, finish;
    for (const json& e : events) {
      if (!e.contains("choices") || e["choices"].empty()) continue;
      const json& delta = e["choices"][0]["delta"];
      if (delta.contains("content")) text += delta["content"].get<std::string>();
      if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
    }
    EXPECT_FALSE(text.empty()) << "stream " << i << ": " << r.body;
    EXPECT_THAT(finish, AnyOf("stop", "length")) << "stream " << i << ": " << r.body;
  }
}

// With a queue (--max_queued) a request that finds every place taken waits
// for one instead of failing: a batch larger than --max_concurrent goes
// through (issue 28: a LangChain batch of 100 failed with 429).
TEST_F(GatewayE2ETest, AQueuedRequestWaitsForAPlace) {
  std::string error;
  std::unique_ptr<ServerProcess> gateway = ServerProcess::Start(
      "llm_gateway",
      {"--tokenizer", tokenizer_->address(), "--model", model_->address(), "--max_concurrent", "2",
       "--max_queued", "16", "--queue_timeout", "300"},
      &error);
  ASSERT_NE(gateway, nullptr) << error;
  constexpr int kRequests = 8;
  std::vector<HttpResponse> responses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      responses[i] = Http(gateway->port(), "POST", "/v1/chat/completions",
                          Chat(kQuestion, {{"max_tokens", 8}, {"seed", i}}));
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(responses[i].status, 200) << "request " << i << ": " << responses[i].body;
  }
  const std::string metrics = Http(gateway->port(), "GET", "/metrics").body;
  EXPECT_EQ(Sample(metrics, "llm_gateway_queue_wait_seconds_count"), kRequests);
  EXPECT_EQ(Sample(metrics, "llm_gateway_requests_rejected_total"), 0);
  EXPECT_EQ(Sample(metrics, "llm_gateway_requests_queued"), 0);
}

// civetweb's own answers (a method it does not serve, a malformed request
// line) come in OpenAI's error shape too.
TEST_F(GatewayE2ETest, TheServersOwnErrorsAreJson) {
  for (const std::string method : {"TRACE", "FOO"}) {
    const HttpResponse r = Http(port(), method, "/v1/models");
    EXPECT_GE(r.status, 400) << method;
    EXPECT_LT(r.status, 500) << method;
    const json j = r.Json();
    ASSERT_TRUE(j.contains("error")) << method << ": " << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string());
  }
}

// Slow clients (headers at a byte a second, issue 28 C) hold the API's
// workers only until --http_request_timeout, and never the admin listener:
// /health and /metrics there answer while they hold every worker.
TEST_F(GatewayE2ETest, SlowClientsDoNotBlockHealth) {
  std::string error;
  std::unique_ptr<ServerProcess> gateway = ServerProcess::Start(
      "llm_gateway",
      {"--tokenizer", tokenizer_->address(), "--model", model_->address(), "--max_concurrent", "1",
       "--max_queued", "0", "--admin_listen", "127.0.0.1:0", "--http_request_timeout", "3",
       "--http_keep_alive_timeout", "0"},
      &error);
  ASSERT_NE(gateway, nullptr) << error;
  const std::string admin_line = gateway->ReadStdoutLine(std::chrono::seconds(10));
  const std::string prefix = "llm_gateway: admin on port ";
  ASSERT_EQ(admin_line.rfind(prefix, 0), 0u) << admin_line;
  const int admin_port = std::atoi(admin_line.c_str() + prefix.size());
  // More slow clients than the API has workers (1 + 8 quick ones).
  constexpr int kSlow = 24;
  std::vector<int> slow;
  for (int i = 0; i < kSlow; ++i) {
    const int fd = Connect(gateway->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, "GET /health HTTP/1.1\r\nX-Slow: "));
    slow.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread trickle([&] {  // a byte a second on each, never ending the headers
    while (!stop.load()) {
      for (int fd : slow) send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  });
  const auto still_open = [](int fd) {
    char c;
    const ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  };
  const HttpResponse health = Http(admin_port, "GET", "/health");
  const HttpResponse metrics = Http(admin_port, "GET", "/metrics");
  int open = 0;
  for (int fd : slow) open += still_open(fd) ? 1 : 0;
  EXPECT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(health.Json()["status"], "ok");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_THAT(metrics.body, HasSubstr("llm_gateway_requests_total"));
  EXPECT_GT(open, 0) << "the slow clients were gone before the admin listener was asked";
  EXPECT_EQ(Http(admin_port, "GET", "/v1/models").status, 404);
  // The request timeout ends every slow client (each sends a byte a second
  // forever), and the API answers again.
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::seconds(120)) {
    open = 0;
    for (int fd : slow) open += still_open(fd) ? 1 : 0;
    if (open == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  stop = true;
  trickle.join();
  for (int fd : slow) close(fd);
  EXPECT_EQ(open, 0) << "slow clients still held after two minutes";
  EXPECT_EQ(Http(gateway->port(), "GET", "/health").status, 200);
}

// A request that arrives while the model server is down waits for it
// (--reconnect_timeout) and is answered once a new one listens at the same
// address (issue 28 D: the channel used to stay failed for 9-14 s after the
// server was back, and a new request with no idle connection got 503 at
// once).
TEST_F(GatewayE2ETest, ARequestWaitsForARestartedModelServer) {
  std::string error;
  std::unique_ptr<ServerProcess> model =
      ServerProcess::Start("model_server", {"--model", ModelPath(), "--kv_cache_mb", "64"}, &error);
  ASSERT_NE(model, nullptr) << error;
  const std::string address = model->address();
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  std::unique_ptr<ServerProcess> gateway = ServerProcess::Start(
      "llm_gateway",
      {"--tokenizer", tokenizer_->address(), "--model", address, "--reconnect_timeout", "120"},
      &error);
  ASSERT_NE(gateway, nullptr) << error;
  ASSERT_EQ(
      Http(gateway->port(), "POST", "/v1/chat/completions", Chat(kQuestion, {{"max_tokens", 2}}))
          .status,
      200);
  model->Terminate(std::chrono::seconds(10), SIGKILL);
  HttpResponse waiting;
  std::thread client([&] {
    waiting =
        Http(gateway->port(), "POST", "/v1/chat/completions", Chat(kQuestion, {{"max_tokens", 4}}));
  });
  // The request is in: the gateway is waiting for a model server.
  const auto start = Clock::now();
  while (Sample(Http(gateway->port(), "GET", "/metrics").body, "llm_gateway_generations_active") <
             1 &&
         Clock::now() - start < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::unique_ptr<ServerProcess> restarted = ServerProcess::Start(
      "model_server", {"--model", ModelPath(), "--kv_cache_mb", "64", "--listen", address}, &error);
  ASSERT_NE(restarted, nullptr) << error;
  client.join();
  EXPECT_EQ(waiting.status, 200) << waiting.body;
}

// Conversations beyond the model server's session limit: the idle ones
// give way to new ones (the fifth used to get 429 for the session TTL), and
// the gateway rebuilds an evicted conversation's session at its next turn,
// with the answer that the whole conversation gives in a new session.
TEST_F(GatewayE2ETest, IdleConversationsGiveWayAtTheModelServersSessionLimit) {
  std::string error;
  std::unique_ptr<ServerProcess> model = ServerProcess::Start(
      "model_server", {"--model", ModelPath(), "--kv_cache_mb", "64", "--max_sessions", "4"},
      &error);
  ASSERT_NE(model, nullptr) << error;
  auto channel = grpc::CreateChannel(model->address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  std::unique_ptr<ServerProcess> gateway = StartGateway(model->address(), &error);
  ASSERT_NE(gateway, nullptr) << error;
  const auto chat = [&](const json& messages, const std::string& conversation) {
    return Http(
        gateway->port(), "POST", "/v1/chat/completions",
        json{{"model", *model_id_}, {"messages", messages}, {"temperature", 0}, {"max_tokens", 8}}
            .dump(),
        conversation.empty() ? "" : StrCat("X-Session-Id: ", conversation, "\r\n"));
  };
  const std::vector<std::string> questions = {"Name a colour.", "Name a fruit.", "Name a city.",
                                              "Name a river.",  "Name a tree.",  "Name a bird."};
  std::vector<json> conversations;
  for (size_t i = 0; i < questions.size(); ++i) {
    json messages = json::array({{{"role", "user"}, {"content", questions[i]}}});
    const HttpResponse r = chat(messages, StrCat("limit-conv-", i));
    ASSERT_EQ(r.status, 200) << "conversation " << i << ": " << r.body;
    messages.push_back(
        {{"role", "assistant"}, {"content", r.Json()["choices"][0]["message"]["content"]}});
    messages.push_back({{"role", "user"}, {"content", "And another?"}});
    conversations.push_back(std::move(messages));
  }
  // The first conversation's session was evicted: its second turn rebuilds it.
  const HttpResponse resumed = chat(conversations[0], "limit-conv-0");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  const HttpResponse alone = chat(conversations[0], "");
  ASSERT_EQ(alone.status, 200) << alone.body;
  EXPECT_EQ(resumed.Json()["choices"][0]["message"]["content"],
            alone.Json()["choices"][0]["message"]["content"]);
}

// Structured output through the gateway with the real model: a JSON schema
// (OpenAI's response_format), choices (vLLM's structured_outputs), a regex;
// and a schema the engine does not support is a 400 naming the keyword.
TEST_F(GatewayE2ETest, StructuredOutputFollowsItsConstraint) {
  const json schema = {{"type", "object"},
                       {"properties",
                        {{"name", {{"type", "string"}, {"maxLength", 20}}},
                         {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 120}}}}},
                       {"required", {"name", "age"}},
                       {"additionalProperties", false}};
  const HttpResponse r = PostChat(Chat(
      "Describe a person as JSON.",
      {{"max_tokens", 64},
       {"response_format",
        {{"type", "json_schema"}, {"json_schema", {{"name", "person"}, {"schema", schema}}}}}}));
  ASSERT_EQ(r.status, 200) << r.body;
  const json answer =
      json::parse(r.Json()["choices"][0]["message"]["content"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(answer.is_object()) << r.body;
  EXPECT_TRUE(answer["name"].is_string()) << answer;
  ASSERT_TRUE(answer["age"].is_number_integer()) << answer;
  EXPECT_GE(answer["age"].get<int>(), 0);
  EXPECT_LE(answer["age"].get<int>(), 120);
  EXPECT_EQ(answer.size(), 2u) << answer;
  EXPECT_EQ(r.Json()["choices"][0]["finish_reason"], "stop");

  const HttpResponse choice =
      PostChat(Chat("Is Paris in France?", {{"structured_outputs", {{"choice", {"yes", "no"}}}}}));
  ASSERT_EQ(choice.status, 200) << choice.body;
  EXPECT_THAT(choice.Json()["choices"][0]["message"]["content"].get<std::string>(),
              AnyOf("yes", "no"));

  const HttpResponse regex = Http(port(), "POST", "/v1/completions",
                                  json{{"model", *model_id_},
                                       {"prompt", "The year is"},
                                       {"max_tokens", 8},
                                       {"temperature", 0},
                                       {"structured_outputs", {{"regex", " [12][0-9]{3}"}}}}
                                      .dump());
  ASSERT_EQ(regex.status, 200) << regex.body;
  const std::string year = regex.Json()["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(year.size(), 5u) << year;

  const HttpResponse refused = PostChat(
      Chat(kQuestion,
           {{"response_format",
             {{"type", "json_schema"},
              {"json_schema", {{"name", "n"}, {"schema", {{"not", {{"type", "string"}}}}}}}}}}));
  ExpectError(refused, 400, "response_format");
  EXPECT_THAT(refused.Json()["error"]["message"].get<std::string>(), HasSubstr("not"));
}

TEST_F(GatewayE2ETest, ServicesDownIs503) {
  std::string error;
  std::unique_ptr<ServerProcess> model =
      ServerProcess::Start("model_server", {"--model", ModelPath(), "--kv_cache_mb", "64"}, &error);
  ASSERT_NE(model, nullptr) << error;
  auto channel = grpc::CreateChannel(model->address(), grpc::InsecureChannelCredentials());
  ASSERT_TRUE(testing::WaitUntilServing(channel, std::chrono::seconds(60), &error)) << error;
  std::unique_ptr<ServerProcess> gateway = StartGateway(model->address(), &error);
  ASSERT_NE(gateway, nullptr) << error;
  EXPECT_EQ(Http(gateway->port(), "GET", "/health").status, 200);
  model->Terminate(std::chrono::seconds(10), SIGKILL);
  const HttpResponse health = Http(gateway->port(), "GET", "/health");
  EXPECT_EQ(health.status, 503) << health.body;
  EXPECT_THAT(health.Json()["model"][model->address()].get<std::string>(),
              HasSubstr("NOT SERVING"));
  const HttpResponse chat = Http(gateway->port(), "POST", "/v1/chat/completions", Chat(kQuestion));
  ExpectError(chat, 503);
}

// Gemma 3 270M: a vocabulary that adds BOS and falls back to bytes for
// characters it lacks. Its own servers in the statics GatewayE2ETest's
// suite has released by then (suites set up and tear down in turn).
class GatewayGemmaE2ETest : public GatewayE2ETest {
 protected:
  static void SetUpTestSuite() {
    StartServers(llm::testing::SourceDir() + "/models/gemma-3-270m-q4_k_m.gguf");
  }
};

// The bytes a logprobs token stands for: its text, or what the escapes of
// a "bytes:" token (OpenAI's form for bytes that are not UTF-8 on their
// own, as Python writes a bytes object) stand for.
std::string TokenBytes(const std::string& token) {
  if (token.rfind("bytes:", 0) != 0) return token;
  std::string out;
  for (size_t i = 6; i < token.size(); ++i) {
    if (token[i] != '\\' || i + 1 == token.size()) {
      out += token[i];
      continue;
    }
    const char c = token[++i];
    if (c == 'x' && i + 2 < token.size()) {
      out += static_cast<char>(std::stoi(token.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
    }
  }
  return out;
}

// Echo with logprobs where the encoder adds BOS and the text has characters
// split across tokens: tokens[0] is "<bos>" (logprob null) at offset 0; the
// text is the prompt as sent, and every other token's bytes are in it at
// its text_offset; a partial character is "bytes:\xNN"; each position's
// top_logprobs lists its token (at most logprobs + 1 entries).
TEST_F(GatewayGemmaE2ETest, EchoLogprobsIndexIntoTheText) {
  const std::string prompt = "Le café 🦙 coûte 5€ ꙮ 𓀀 日本";
  const HttpResponse r = PostEcho(prompt, 2);
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.Json();
  const json& choice = j["choices"][0];
  const std::string text = choice["text"];
  EXPECT_EQ(text, prompt);
  const json& lp = choice["logprobs"];
  const size_t n = lp["tokens"].size();
  ASSERT_GT(n, 10u) << r.body;
  EXPECT_EQ(lp["tokens"][0], "<bos>");
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_EQ(lp["text_offset"][0], 0);
  size_t partial = 0, end = 0;
  for (size_t i = 1; i < n; ++i) {
    const std::string token = lp["tokens"][i];
    const std::string bytes = TokenBytes(token);
    const size_t offset = lp["text_offset"][i];
    EXPECT_EQ(offset, end) << "token " << i << " " << token;
    EXPECT_EQ(text.substr(offset, bytes.size()), bytes) << "token " << i << " " << token;
    end = offset + bytes.size();
    partial += token != bytes;
    const json& top = lp["top_logprobs"][i];
    EXPECT_LE(top.size(), 3u) << top;
    ASSERT_TRUE(top.contains(token)) << i << " " << top;
    EXPECT_EQ(top[token], lp["token_logprobs"][i]);
  }
  EXPECT_EQ(end, text.size());
  EXPECT_GT(partial, 0u) << "the prompt's rare characters are split into bytes: " << r.body;
}

}  // namespace
}  // namespace llm
