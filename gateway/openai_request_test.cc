#include "gateway/openai_request.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

using ::testing::HasSubstr;

std::optional<ApiError> Parse(const std::string& body, ChatRequest* out) {
  return ParseChatRequest(body, RequestLimits(), out);
}

constexpr char kMessages[] = R"("messages": [{"role": "user", "content": "Hi"}])";

std::string Body(const std::string& extra) {
  return std::string(R"({"model": "m", )") + kMessages + (extra.empty() ? "" : ", " + extra) + "}";
}

TEST(ParseChatRequestTest, Defaults) {
  ChatRequest r;
  ASSERT_EQ(Parse(Body(""), &r), std::nullopt);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "Hi");
  EXPECT_EQ(r.params.sampling.temperature, 1.0f);
  EXPECT_EQ(r.params.sampling.top_p, 1.0f);
  EXPECT_EQ(r.params.sampling.top_k, 0);
  EXPECT_EQ(r.params.max_tokens, 0);
  EXPECT_FALSE(r.has_seed);
  EXPECT_FALSE(r.has_speculate);
  EXPECT_EQ(r.params.speculate, 0);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.n, 1);
}

TEST(ParseChatRequestTest, EveryParameter) {
  ChatRequest r;
  ASSERT_EQ(Parse(Body(R"("temperature": 0, "top_p": 0.5, "top_k": 7, "min_p": 0.1,
      "seed": 42, "stop": ["a", "bc"], "max_tokens": 9, "presence_penalty": 0.5,
      "frequency_penalty": -0.5, "logit_bias": {"12": -100, "3": 2.5}, "n": 2,
      "stream": true, "stream_options": {"include_usage": true}, "user": "ignored",
      "ignore_eos": true, "speculate": 5)"),
                  &r),
            std::nullopt);
  EXPECT_TRUE(r.has_speculate);
  EXPECT_EQ(r.params.speculate, 5);
  EXPECT_EQ(r.params.sampling.temperature, 0.0f);
  EXPECT_EQ(r.params.sampling.top_p, 0.5f);
  EXPECT_EQ(r.params.sampling.top_k, 7);
  EXPECT_FLOAT_EQ(r.params.sampling.min_p, 0.1f);
  EXPECT_TRUE(r.has_seed);
  EXPECT_EQ(r.params.sampling.seed, 42u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r.params.max_tokens, 9);
  EXPECT_EQ(r.params.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.params.sampling.frequency_penalty, -0.5f);
  ASSERT_EQ(r.params.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(r.n, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.params.ignore_eos);
}

TEST(ParseChatRequestTest, MaxCompletionTokensWinsAndStopMayBeAString) {
  ChatRequest r;
  ASSERT_EQ(Parse(Body(R"("max_tokens": 5, "max_completion_tokens": 7, "stop": "x")"), &r),
            std::nullopt);
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
}

TEST(ParseChatRequestTest, ContentPartsAndDeveloperRole) {
  ChatRequest r;
  ASSERT_EQ(Parse(R"({"model": "m", "messages": [{"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})",
                  &r),
            std::nullopt);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "ab");
}

TEST(ParseChatRequestTest, MalformedJson) {
  ChatRequest r;
  std::optional<ApiError> e = Parse("{not json", &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
  EXPECT_EQ(e->param, "");
  EXPECT_THAT(e->message, HasSubstr("not valid JSON"));
  ASSERT_TRUE(Parse("[1, 2]", &r).has_value());
}

TEST(ParseChatRequestTest, BadValuesNameTheirParameter) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"messages": [{"role": "user", "content": "x"}]})", "model"},
      {R"({"model": "m"})", "messages"},
      {R"({"model": "m", "messages": []})", "messages"},
      {R"({"model": "m", "messages": [{"role": "robot", "content": "x"}]})", "messages[0].role"},
      {R"({"model": "m", "messages": [{"role": "user"}]})", "messages[0].content"},
      {Body(R"("temperature": -1)"), "temperature"},
      {Body(R"("temperature": "hot")"), "temperature"},
      {Body(R"("top_p": 0)"), "top_p"},
      {Body(R"("top_p": 1.5)"), "top_p"},
      {Body(R"("top_k": 1.5)"), "top_k"},
      {Body(R"("min_p": 2)"), "min_p"},
      {Body(R"("max_tokens": 0)"), "max_tokens"},
      {Body(R"("max_completion_tokens": -3)"), "max_completion_tokens"},
      {Body(R"("seed": "x")"), "seed"},
      {Body(R"("stop": 5)"), "stop"},
      {Body(R"("stop": [""])"), "stop"},
      {Body(R"("stop": ["a", "b", "c", "d", "e"])"), "stop"},
      {Body(R"("n": 0)"), "n"},
      {Body(R"("n": 100)"), "n"},
      {Body(R"("presence_penalty": 3)"), "presence_penalty"},
      {Body(R"("logit_bias": {"x": 1})"), "logit_bias"},
      {Body(R"("logit_bias": {"1": 101})"), "logit_bias"},
      {Body(R"("stream": "yes")"), "stream"},
      {Body(R"("stream_options": {"include_usage": true})"), "stream_options"},
      {Body(R"("top_logprobs": 2)"), "top_logprobs"},
      {Body(R"("logprobs": true, "top_logprobs": 21)"), "top_logprobs"},
      {Body(R"("tools": [{"type": "function"}])"), "tools"},
      {Body(R"("speculate": 17)"), "speculate"},
      {Body(R"("speculate": -1)"), "speculate"},
      {Body(R"("speculate": 2.5)"), "speculate"},
  };
  for (const auto& [body, param] : cases) {
    ChatRequest r;
    std::optional<ApiError> e = Parse(body, &r);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->http_status, 400) << body;
    EXPECT_EQ(e->param, param) << body;
    EXPECT_EQ(e->type, "invalid_request_error") << body;
  }
}

TEST(ParseChatRequestTest, Logprobs) {
  ChatRequest r;
  ASSERT_EQ(Parse(Body(R"("logprobs": true, "top_logprobs": 3)"), &r), std::nullopt);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.params.top_logprobs, 3);
  EXPECT_EQ(r.params.prompt_logprobs, -1);
}

std::optional<ApiError> ParseCompletion(const std::string& body, CompletionRequest* out) {
  return ParseCompletionRequest(body, RequestLimits(), out);
}

TEST(ParseCompletionRequestTest, EveryPromptForm) {
  CompletionRequest r;
  ASSERT_EQ(ParseCompletion(R"({"model": "m", "prompt": "Hi"})", &r), std::nullopt);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Hi");
  EXPECT_FALSE(r.prompts[0].is_ids);
  EXPECT_FALSE(r.has_max_tokens);
  EXPECT_EQ(r.logprobs, -1);
  ASSERT_EQ(ParseCompletion(R"({"model": "m", "prompt": [5, 6, 7]})", &r), std::nullopt);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{5, 6, 7}));
  ASSERT_EQ(ParseCompletion(R"({"model": "m", "prompt": ["a", [1, 2]], "n": 2})", &r),
            std::nullopt);
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[0].text, "a");
  EXPECT_TRUE(r.prompts[1].is_ids);
  EXPECT_EQ(r.n, 2);
}

TEST(ParseCompletionRequestTest, EchoAndLogprobsScoreThePrompt) {
  CompletionRequest r;
  ASSERT_EQ(
      ParseCompletion(
          R"({"model": "m", "prompt": "Hi", "echo": true, "logprobs": 2, "max_tokens": 0})", &r),
      std::nullopt);
  EXPECT_TRUE(r.echo);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(r.params.top_logprobs, 2);
  EXPECT_EQ(r.params.prompt_logprobs, 2);
  EXPECT_TRUE(r.has_max_tokens);
  EXPECT_EQ(r.params.max_tokens, 0);
  ASSERT_EQ(ParseCompletion(R"({"model": "m", "prompt": "Hi", "logprobs": 0})", &r), std::nullopt);
  EXPECT_EQ(r.params.prompt_logprobs, -1);  // no echo: the prompt is not scored
}

TEST(ParseCompletionRequestTest, BadValuesNameTheirParameter) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"model": "m"})", "prompt"},
      {R"({"model": "m", "prompt": 5})", "prompt"},
      {R"({"model": "m", "prompt": []})", "prompt"},
      {R"({"model": "m", "prompt": [1, -2]})", "prompt"},
      {R"({"model": "m", "prompt": ["a", 3]})", "prompt[1]"},
      {R"({"model": "m", "prompt": ["a", []]})", "prompt[1]"},
      {R"({"model": "m", "prompt": "a", "max_tokens": 0})", "max_tokens"},
      {R"({"model": "m", "prompt": "a", "logprobs": true})", "logprobs"},
      {R"({"model": "m", "prompt": "a", "logprobs": 21})", "logprobs"},
      {R"({"model": "m", "prompt": "a", "suffix": "b"})", "suffix"},
      {R"({"model": "m", "prompt": "a", "best_of": 3})", "best_of"},
      {R"({"model": "m", "prompt": "a", "temperature": 3})", "temperature"},
      {R"({"prompt": "a"})", "model"},
  };
  for (const auto& [body, param] : cases) {
    CompletionRequest r;
    std::optional<ApiError> e = ParseCompletion(body, &r);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->http_status, 400) << body;
    EXPECT_EQ(e->param, param) << body;
  }
}

}  // namespace
}  // namespace llm::gateway
