#include "gateway/handler.h"

#include <pthread.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "gateway/fake_services.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

using nlohmann::json;
using testing::FakeExchange;
using ::testing::HasSubstr;

// civetweb 1.15's worker threads, as Debian builds it (USE_STACK_SIZE).
constexpr size_t kWorkerStack = 100 * 1024;

// Runs `f` on a thread with civetweb's worker stack.
void OnWorkerStack(const std::function<void()>& f) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kWorkerStack);
  pthread_t thread;
  auto* task = new std::function<void()>(f);
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* p) -> void* {
                  auto* fn = static_cast<std::function<void()>*>(p);
                  (*fn)();
                  delete fn;
                  return nullptr;
                },
                task),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

class HandlerTest : public ::testing::Test {
 protected:
  void SetUp() override { Make(HandlerOptions()); }

  void Make(HandlerOptions options) {
    std::unique_ptr<client::testing::FakeModel> model =
        testing::ChainModel(/*context=*/256, /*eos_after=*/1000);
    model_ = model.get();
    absl::StatusOr<client::ChatTemplate> tmpl = client::ChatTemplate::FromJinja(
        "{% for m in messages %}{{ m.content }}{% endfor %}", "concat", "", "</s>");
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    handler_ = std::make_unique<Handler>(
        std::move(options), testing::FakeServices(std::move(model)), *std::move(tmpl), [] {
          ServiceHealth h;
          h.tokenizer.emplace_back("t:1", "SERVING");
          h.model.emplace_back("m:1", "SERVING");
          return h;
        });
  }

  // POST `body` to `path`; the exchange as answered.
  std::unique_ptr<FakeExchange> Post(
      std::string path, json body, std::vector<std::pair<std::string, std::string>> headers = {}) {
    auto http =
        std::make_unique<FakeExchange>("POST", std::move(path), body.dump(), std::move(headers));
    handler_->Handle(*http);
    return http;
  }

  json Chat(std::vector<std::string> turns, const std::string& session = "") {
    json messages = json::array();
    for (size_t i = 0; i < turns.size(); ++i) {
      messages.push_back({{"role", i % 2 == 0 ? "user" : "assistant"}, {"content", turns[i]}});
    }
    std::vector<std::pair<std::string, std::string>> headers;
    if (!session.empty()) headers.emplace_back("X-Session-Id", session);
    auto http = Post(
        "/v1/chat/completions",
        {{"model", "fake-model"}, {"messages", messages}, {"max_tokens", 3}, {"temperature", 0}},
        headers);
    EXPECT_EQ(http->status(), 200) << http->response();
    return json::parse(http->response());
  }

  client::testing::FakeModel* model_ = nullptr;
  std::unique_ptr<Handler> handler_;
};

TEST_F(HandlerTest, ChatAnswers) {
  const json r = Chat({"abc"});
  EXPECT_EQ(r["choices"][0]["message"]["content"], "def");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(r["usage"]["completion_tokens"], 3);
  EXPECT_EQ(model_->sessions.size(), 0u);  // released
}

TEST_F(HandlerTest, ChatStreams) {
  auto http = Post("/v1/chat/completions", {{"model", "fake-model"},
                                            {"messages", {{{"role", "user"}, {"content", "abc"}}}},
                                            {"max_tokens", 3},
                                            {"temperature", 0},
                                            {"stream", true}});
  EXPECT_TRUE(http->streamed());
  EXPECT_EQ(http->status(), 200);
  std::string text;
  for (absl::string_view line : absl::StrSplit(http->response(), "\n\n")) {
    if (!absl::StartsWith(line, "data: {")) continue;
    const json chunk = json::parse(std::string(line.substr(6)));
    if (chunk["choices"][0]["delta"].contains("content")) {
      text += chunk["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  EXPECT_EQ(text, "def");
  EXPECT_THAT(http->response(), ::testing::EndsWith("data: [DONE]\n\n"));
}

// A streamed client that goes away ends the generation at the next token.
TEST_F(HandlerTest, AClientGoneCancelsItsStream) {
  auto http =
      std::make_unique<FakeExchange>("POST", "/v1/chat/completions",
                                     json{{"model", "fake-model"},
                                          {"messages", {{{"role", "user"}, {"content", "abc"}}}},
                                          {"max_tokens", 200},
                                          {"temperature", 0},
                                          {"stream", true}}
                                         .dump());
  http->FailWritesAfter(4);
  handler_->Handle(*http);
  EXPECT_LT(std::count(http->response().begin(), http->response().end(), '\n'), 20);
  EXPECT_EQ(model_->sessions.size(), 0u);
  EXPECT_EQ(handler_->in_flight(), 0);
}

TEST_F(HandlerTest, ErrorsHaveOpenAisShape) {
  FakeExchange unknown("TRACE", "/v1/nothing");
  EXPECT_EQ(handler_->Handle(unknown), 404);
  const json e = json::parse(unknown.response());
  EXPECT_THAT(e["error"]["message"].get<std::string>(), HasSubstr("no such endpoint"));
  FakeExchange wrong("DELETE", "/v1/chat/completions");
  EXPECT_EQ(handler_->Handle(wrong), 405);
  EXPECT_EQ(json::parse(wrong.response())["error"]["type"], "invalid_request_error");
}

// The crash of issue 28 (A): a 600-deep array where a token id belongs was
// quoted whole with nlohmann's recursive dump() and overflowed civetweb's
// 100 KiB worker stack. Now the value is never dumped: a short message, on
// the worker's stack.
TEST_F(HandlerTest, ADeeplyNestedValueIsNotEchoed) {
  const std::string deep = std::string(600, '[') + std::string(600, ']');
  for (const std::string path : {"/detokenize", "/tokenize"}) {
    const std::string body = path == "/detokenize"
                                 ? StrCat("{\"tokens\":[", deep, "]}")
                                 : StrCat("{\"model\":", deep, ",\"prompt\":\"a\"}");
    FakeExchange http("POST", path, body);
    OnWorkerStack([&] { handler_->Handle(http); });
    EXPECT_GE(http.status(), 400) << path;
    EXPECT_LT(http.response().size(), 400u) << http.response();
  }
}

// A conversation's turn syncs its named session (the whole history, with
// sync_history: the fake keeps the common prefix as the model server does);
// after the model server lost it (a restart), the turn is computed whole,
// and cached_tokens and the conversation token metric say so.
TEST_F(HandlerTest, CachedTokensCountOnlyWhatWasNotComputed) {
  const json first = Chat({"abc"}, "conv-1");
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  const json second = Chat({"abc", "def", "ghi"}, "conv-1");
  EXPECT_EQ(second["usage"]["prompt_tokens"], 9);
  // "abcde": the last answer token was sampled, never fed.
  EXPECT_EQ(second["usage"]["prompt_tokens_details"]["cached_tokens"], 5);
  model_->sessions.clear();  // a restarted model server
  const json third = Chat({"abc", "def", "ghi", "jkl", "mno"}, "conv-1");
  EXPECT_EQ(third["usage"]["prompt_tokens"], 15);
  EXPECT_EQ(third["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  ASSERT_EQ(model_->sessions.size(), 1u);  // kept under its name, not released
  EXPECT_EQ(model_->sessions.begin()->first, "conv-conv-1");
  FakeExchange metrics("GET", "/metrics");
  EXPECT_EQ(handler_->HandleAdmin(metrics), 200);
  EXPECT_THAT(metrics.response(),
              HasSubstr("\nllm_gateway_conversation_tokens_total{kind=\"kept\"} 5\n"));
  EXPECT_THAT(metrics.response(),
              HasSubstr("\nllm_gateway_conversation_tokens_total{kind=\"computed\"} 22\n"));
}

TEST_F(HandlerTest, AdminServesHealthAndMetricsOnly) {
  FakeExchange health("GET", "/health");
  EXPECT_EQ(handler_->HandleAdmin(health), 200);
  EXPECT_EQ(json::parse(health.response())["status"], "ok");
  FakeExchange metrics("GET", "/metrics");
  EXPECT_EQ(handler_->HandleAdmin(metrics), 200);
  EXPECT_THAT(metrics.response(), HasSubstr("llm_gateway_requests_queued"));
  FakeExchange chat("POST", "/v1/chat/completions", "{}");
  EXPECT_EQ(handler_->HandleAdmin(chat), 404);
}

// vLLM's end-to-end latency, with the model's id as model_name: one
// observation per generating request answered 200, none for an error.
TEST_F(HandlerTest, EndToEndLatencyCountsAnsweredGenerations) {
  Chat({"abc"});
  Chat({"abc", "def", "ghi"});
  FakeExchange bad("POST", "/v1/chat/completions", "{}");
  EXPECT_EQ(handler_->Handle(bad), 400);
  FakeExchange metrics("GET", "/metrics");
  EXPECT_EQ(handler_->HandleAdmin(metrics), 200);
  EXPECT_THAT(metrics.response(), HasSubstr("# TYPE vllm:e2e_request_latency_seconds histogram"));
  EXPECT_THAT(metrics.response(),
              HasSubstr(StrCat("\nvllm:e2e_request_latency_seconds_count{model_name=\"",
                               handler_->model_id(), "\"} 2\n")));
}

TEST_F(HandlerTest, ABodyThatStopsArrivingIs408) {
  class Stalled : public FakeExchange {
   public:
    using FakeExchange::FakeExchange;
    int64_t content_length() const override { return 100; }
    int Read(char*, size_t) override { return -1; }  // civetweb's read timed out
  };
  Stalled http("POST", "/v1/chat/completions");
  EXPECT_EQ(handler_->Handle(http), 408);
  EXPECT_THAT(http.response(), HasSubstr("did not arrive"));
}

// The admission place and the conversation are given back before the
// answer's last bytes go out: a client that sends its next request the
// moment it has the answer (the openai SDK, a conversation's next turn)
// finds them free, and gets neither 429 nor 409.
TEST_F(HandlerTest, APlaceIsFreeWhenTheAnswerArrives) {
  HandlerOptions options;
  options.admission.max_active = 1;
  options.admission.max_queued = 0;
  Make(options);
  class Watching : public FakeExchange {
   public:
    Watching(Handler& h, std::string body, bool stream)
        : FakeExchange("POST", "/v1/chat/completions", std::move(body),
                       {{"X-Session-Id", "watched"}}),
          h_(h),
          stream_(stream) {}
    void Respond(int status, std::string_view type, std::string_view body,
                 std::span<const HttpHeader> extra) override {
      active_at_end = h_.admission().active();
      FakeExchange::Respond(status, type, body, extra);
    }
    bool Write(std::string_view data) override {
      if (stream_ && data.find("[DONE]") != std::string_view::npos) {
        active_at_end = h_.admission().active();
      }
      return FakeExchange::Write(data);
    }
    int active_at_end = -1;

   private:
    Handler& h_;
    bool stream_;
  };
  for (const bool stream : {false, true}) {
    Watching http(*handler_,
                  json{{"model", "fake-model"},
                       {"messages", {{{"role", "user"}, {"content", "abc"}}}},
                       {"max_tokens", 3},
                       {"stream", stream}}
                      .dump(),
                  stream);
    EXPECT_EQ(handler_->Handle(http), 200) << http.response();
    EXPECT_EQ(http.active_at_end, 0) << "stream " << stream;
  }
}

}  // namespace
}  // namespace llm::gateway
