#include "gateway/openai_request.h"

#include <pthread.h>

#include <functional>
#include <string>
#include <vector>

#include "common/strings.h"
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

// Malformed JSON: ParseJsonBody's error (api_error_test.cc); JSON that is
// not an object is refused too.
TEST(ParseChatRequestTest, MalformedJson) {
  ChatRequest r;
  EXPECT_THAT(Parse("{not json", &r).value_or(ApiError()).message, HasSubstr("not valid JSON"));
  std::optional<ApiError> e = Parse("[1, 2]", &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
  EXPECT_THAT(e->message, HasSubstr("must be a JSON object"));
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
      {Body(R"("tools": [{"type": "function"}])"), "tools[0].function"},
      {Body(R"("tools": {"type": "function"})"), "tools"},
      {Body(R"("tools": [{"type": "retrieval", "function": {"name": "f"}}])"), "tools[0]"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "a b"}}])"),
       "tools[0].function.name"},
      {Body(R"("tools": [{"type": "function", "function": {"name": ""}}])"),
       "tools[0].function.name"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}])"),
       "tools[0].function.parameters"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f", "parameters":)"
            R"( {"type": "string"}}}])"),
       "tools[0].function.parameters"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f", "description": 1}}])"),
       "tools[0].function.description"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f"}}, )"
            R"({"type": "function", "function": {"name": "f"}}])"),
       "tools[1].function.name"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f"}}], )"
            R"("tool_choice": "sometimes")"),
       "tool_choice"},
      {Body(R"("tool_choice": "required")"), "tool_choice"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f"}}], )"
            R"("tool_choice": {"type": "function", "function": {"name": "g"}})"),
       "tool_choice"},
      {Body(R"("tools": [{"type": "function", "function": {"name": "f"}}], )"
            R"("tool_choice": {"type": "function"})"),
       "tool_choice"},
      {Body(R"("parallel_tool_calls": "yes")"), "parallel_tool_calls"},
      {Body(R"("functions": [])"), "functions"},
      {R"({"model": "m", "messages": [{"role": "tool", "content": "42"}]})",
       "messages[0].tool_call_id"},
      {R"({"model": "m", "messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
       "messages[0].tool_calls"},
      {R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": "c"}]}]})",
       "messages[0].tool_calls[0]"},
      {R"({"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": "c", )"
       R"("function": {"name": "f", "arguments": 5}}]}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"model": "m", "messages": [{"role": "assistant"}]})", "messages[0].content"},
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

TEST(ParseChatRequestTest, ToolsKeepTheClientsKeyOrder) {
  ChatRequest r;
  ASSERT_EQ(
      Parse(Body(R"("tools": [{"type": "function", "function": {"name": "get_weather", )"
                 R"("description": "Weather.", "parameters": {"type": "object", "properties": )"
                 R"({"zeta": {"type": "string"}, "alpha": {"type": "integer"}}, )"
                 R"("required": ["zeta"]}, "strict": true}}], "parallel_tool_calls": false)"),
            &r),
      std::nullopt);
  ASSERT_EQ(r.tools.size(), 1u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather.");
  EXPECT_EQ(r.tools[0].parameters,
            R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":)"
            R"({"type":"integer"}},"required":["zeta"]})");
  EXPECT_EQ(r.tools[0].json,
            R"({"type":"function","function":{"name":"get_weather","description":"Weather.",)"
            R"("parameters":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":)"
            R"({"type":"integer"}},"required":["zeta"]},"strict":true}})");
  EXPECT_EQ(r.tool_choice.mode, client::ToolChoiceMode::kAuto);  // the default with tools
  EXPECT_FALSE(r.tool_choice.parallel);
}

TEST(ParseChatRequestTest, ToolChoices) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f"}}])";
  ChatRequest r;
  ASSERT_EQ(Parse(Body(""), &r), std::nullopt);
  EXPECT_EQ(r.tool_choice.mode, client::ToolChoiceMode::kNone);
  EXPECT_TRUE(r.tools.empty());
  ASSERT_EQ(Parse(Body(R"("tool_choice": "none")"), &r), std::nullopt);
  EXPECT_EQ(r.tool_choice.mode, client::ToolChoiceMode::kNone);
  ASSERT_EQ(Parse(Body(tools + R"(, "tool_choice": "none")"), &r), std::nullopt);
  EXPECT_EQ(r.tool_choice.mode, client::ToolChoiceMode::kNone);
  ASSERT_EQ(Parse(Body(tools + R"(, "tool_choice": "required")"), &r), std::nullopt);
  EXPECT_EQ(r.tool_choice.mode, client::ToolChoiceMode::kRequired);
  EXPECT_TRUE(r.tool_choice.parallel);
  ASSERT_EQ(
      Parse(Body(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "f"}})"),
            &r),
      std::nullopt);
  EXPECT_EQ(r.tool_choice.mode, client::ToolChoiceMode::kFunction);
  EXPECT_EQ(r.tool_choice.function, "f");
  // tools: [] is no tools.
  ASSERT_EQ(Parse(Body(R"("tools": [])"), &r), std::nullopt);
  EXPECT_EQ(r.tool_choice.mode, client::ToolChoiceMode::kNone);
}

TEST(ParseChatRequestTest, ToolMessages) {
  ChatRequest r;
  ASSERT_EQ(Parse(R"({"model": "m", "messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
       {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": {"z": 1}}}]},
      {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "18 C"},
      {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "noon"}]}]})",
                  &r)
                .value_or(ApiError{0, "ok"})
                .message,
            "ok");
  ASSERT_EQ(r.messages.size(), 4u);
  const client::ChatMessage& a = r.messages[1];
  EXPECT_EQ(a.content, "");
  ASSERT_EQ(a.tool_calls.size(), 2u);
  EXPECT_EQ(a.tool_calls[0].id, "call_1");
  EXPECT_EQ(a.tool_calls[0].name, "get_weather");
  EXPECT_EQ(a.tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(a.tool_calls[1].arguments, R"({"z":1})");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[2].name, "get_weather");
  EXPECT_EQ(r.messages[2].content, "18 C");
  EXPECT_EQ(r.messages[3].content, "noon");
  EXPECT_EQ(r.messages[3].name, "");
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

// Runs `f` on a thread with a `stack_bytes` stack (civetweb's workers have
// 100 KiB): a recursion as deep as a body's nesting would overflow it.
void RunOnSmallStack(size_t stack_bytes, std::function<void()> f) {
  pthread_attr_t attr;
  ASSERT_EQ(pthread_attr_init(&attr), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&attr, stack_bytes), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(
                &thread, &attr,
                [](void* arg) -> void* {
                  (*static_cast<std::function<void()>*>(arg))();
                  return nullptr;
                },
                &f),
            0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

// 100,000 levels of nesting wherever a value goes, parsed on a 64 KiB stack:
// refused while parsing (400 naming the limit), never built, copied or
// dumped into a message (each of which recurses per level).
TEST(RequestBodyTest, DeepNestingIsRefusedOnASmallStack) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string chat = R"({"model": "m", "messages": [{"role": "user", "content": "x"}], )";
  std::vector<std::optional<ApiError>> errors(6);
  RunOnSmallStack(64 << 10, [&] {
    CompletionRequest c;
    errors[0] = ParseCompletionRequest(R"({"model": "m", "prompt": [1, )" + deep + "]}",
                                       RequestLimits(), &c);
    errors[1] =
        ParseCompletionRequest(R"({"model": "m", "prompt": )" + deep + "}", RequestLimits(), &c);
    ChatRequest r;
    errors[2] = ParseChatRequest(chat + R"("stop": )" + deep + "}", RequestLimits(), &r);
    errors[3] = ParseChatRequest(deep, RequestLimits(), &r);
    DetokenizeRequest d;
    errors[4] = ParseDetokenizeRequest(R"({"tokens": [)" + deep + "]}", &d);
    TokenizeRequest t;
    errors[5] = ParseTokenizeRequest(R"({"model": )" + deep + "}", RequestLimits(), &t);
  });
  // The param names the top-level field the nesting is in (none for a body
  // that is not an object).
  const char* params[] = {"prompt", "prompt", "stop", "", "tokens", "model"};
  for (size_t i = 0; i < errors.size(); ++i) {
    ASSERT_TRUE(errors[i].has_value()) << i;
    EXPECT_EQ(errors[i]->http_status, 400) << i;
    EXPECT_THAT(errors[i]->message, HasSubstr("deeper than 64 levels")) << i;
    EXPECT_EQ(errors[i]->param, params[i]) << i;
  }
}

// A JSON schema of 10,000 levels given as an object: the body's nesting
// bound refuses it, naming the field it is in (as a string, the
// constraint's own bound does: docs/structured_output.md).
TEST(RequestBodyTest, ASchemaNestedTooDeepNamesItsField) {
  std::string schema;
  for (int i = 0; i < 10000; ++i) schema += R"({"type": "array", "items": )";
  schema += "{}" + std::string(10000, '}');
  ChatRequest r;
  std::optional<ApiError> e = Parse(
      Body(StrCat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "d", )",
                  R"("schema": )", schema, "}}")),
      &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 400);
  EXPECT_EQ(e->param, "response_format");
  EXPECT_THAT(e->message, HasSubstr("deeper than 64 levels (in response_format)"));
  // A string ("{\"a\": [[[") is not nesting; a syntax error names no field.
  e = Parse(
      Body(
          R"("json_schema": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "x": ])"),
      &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_THAT(e->message, HasSubstr("not valid JSON"));
  EXPECT_EQ(e->param, "");
}

// A client's value in a message: a structure described, a string cut.
TEST(RequestBodyTest, ErrorsDoNotEchoValuesUnbounded) {
  CompletionRequest c;
  std::optional<ApiError> e =
      ParseCompletionRequest(R"({"model": "m", "prompt": [1, [[2]]]})", RequestLimits(), &c);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "prompt");
  EXPECT_THAT(e->message, HasSubstr("got an array"));
  ChatRequest r;
  const std::string role(100000, 'r');
  e = Parse(R"({"model": "m", "messages": [{"role": ")" + role + R"(", "content": "x"}]})", &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "messages[0].role");
  EXPECT_LT(e->message.size(), 300u);
  e = Parse(Body(R"("logit_bias": {")" + role + R"(": 1})"), &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "logit_bias");
  EXPECT_LT(e->message.size(), 300u);
}

TEST(RequestBodyTest, TrailingBytesAreRefused) {
  for (const std::string& tail : {std::string("\0garbage", 8), std::string(" {}")}) {
    ChatRequest r;
    std::optional<ApiError> e = Parse(Body("") + tail, &r);
    ASSERT_TRUE(e.has_value());
    EXPECT_THAT(e->message, HasSubstr("not valid JSON"));
    CompletionRequest c;
    EXPECT_TRUE(
        ParseCompletionRequest(R"({"model": "m", "prompt": "x"})" + tail, RequestLimits(), &c)
            .has_value());
  }
}

// top_p is in (0, 1]: a tiny positive value is accepted and stays positive
// as a float (it rounded to 0 and failed later, naming no field).
TEST(ParseChatRequestTest, TinyTopPStaysPositive) {
  ChatRequest r;
  ASSERT_EQ(Parse(Body(R"("top_p": 1e-300)"), &r), std::nullopt);
  EXPECT_GT(r.params.sampling.top_p, 0.0f);
  r.params.max_tokens = 1;
  EXPECT_TRUE(client::ValidateParams(r.params).ok()) << client::ValidateParams(r.params);
  std::optional<ApiError> e = Parse(Body(R"("top_p": 0)"), &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "top_p");
  EXPECT_THAT(e->message, HasSubstr("(0, 1]"));
}

TEST(ParseChatRequestTest, LogitBiasKeysAreDecimalDigits) {
  ChatRequest r;
  ASSERT_EQ(Parse(Body(R"("logit_bias": {"2147483647": 1, "0": -1})"), &r), std::nullopt);
  for (const char* key : {" 5", "5 ", "+5", "-1", "0x5", "2147483648", "99999999999", ""}) {
    std::optional<ApiError> e = Parse(Body(StrCat(R"("logit_bias": {")", key, R"(": 1})")), &r);
    ASSERT_TRUE(e.has_value()) << "'" << key << "'";
    EXPECT_EQ(e->param, "logit_bias");
  }
}

TEST(ParseChatRequestTest, StopLimitIsNamed) {
  ChatRequest r;
  std::optional<ApiError> e = Parse(Body(R"("stop": ["a", "b", "c", "d", "e"])"), &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "stop");
  EXPECT_THAT(e->message, HasSubstr("at most 4"));
  EXPECT_THAT(e->message, HasSubstr("got 5"));
}

// {"type": "text"} is the default some clients send every time: no
// constraint. The structured outputs come three ways (OpenAI, vLLM,
// llama.cpp), one per request.
TEST(ParseChatRequestTest, ResponseFormatTextIsAccepted) {
  ChatRequest r;
  EXPECT_EQ(Parse(Body(R"("response_format": {"type": "text"})"), &r), std::nullopt);
  EXPECT_FALSE(r.constraint.has_value());
  CompletionRequest c;
  EXPECT_EQ(ParseCompletionRequest(
                R"({"model": "m", "prompt": "x", "response_format": {"type": "text"}})",
                RequestLimits(), &c),
            std::nullopt);
  for (const char* format : {R"("text")", R"({"type": "yaml"})", R"({})", R"({"type": 1})",
                             R"({"type": "json_schema", "json_schema": {"name": "x"}})"}) {
    std::optional<ApiError> e = Parse(Body(StrCat(R"("response_format": )", format)), &r);
    ASSERT_TRUE(e.has_value()) << format;
    EXPECT_EQ(e->param, "response_format");
  }
}

TEST(ParseChatRequestTest, StructuredOutputsEveryWay) {
  struct Case {
    const char* extra;
    constrain::Kind kind;
    const char* param;
  };
  const Case cases[] = {
      {R"("response_format": {"type": "json_object"})", constrain::Kind::kJsonObject,
       "response_format"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true,
          "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}})",
       constrain::Kind::kJsonSchema, "response_format"},
      {R"("structured_outputs": {"json": {"type": "string"}})", constrain::Kind::kJsonSchema,
       "structured_outputs.json"},
      {R"("structured_outputs": {"regex": "[ab]+"})", constrain::Kind::kRegex,
       "structured_outputs.regex"},
      {R"("structured_outputs": {"grammar": "root ::= \"x\""})", constrain::Kind::kGrammar,
       "structured_outputs.grammar"},
      {R"("structured_outputs": {"choice": ["yes", "no"]})", constrain::Kind::kChoice,
       "structured_outputs.choice"},
      {R"("json_schema": {"type": "object"})", constrain::Kind::kJsonSchema, "json_schema"},
      {R"("grammar": "root ::= \"x\"")", constrain::Kind::kGrammar, "grammar"},
  };
  for (const Case& c : cases) {
    ChatRequest r;
    ASSERT_EQ(Parse(Body(c.extra), &r), std::nullopt) << c.extra;
    ASSERT_TRUE(r.constraint.has_value()) << c.extra;
    EXPECT_EQ(r.constraint->kind, c.kind) << c.extra;
    EXPECT_EQ(r.constraint_param, c.param);
  }
  ChatRequest strict;
  ASSERT_EQ(Parse(Body(cases[1].extra), &strict), std::nullopt);
  EXPECT_TRUE(strict.constraint->strict);
  EXPECT_THAT(strict.constraint->text, HasSubstr("\"integer\""));
  ChatRequest choice;
  ASSERT_EQ(Parse(Body(cases[5].extra), &choice), std::nullopt);
  EXPECT_THAT(choice.constraint->choices, ::testing::ElementsAre("yes", "no"));
  // Two at once, or a bad shape: 400 naming the parameter.
  ChatRequest r;
  std::optional<ApiError> two =
      Parse(Body(R"("response_format": {"type": "json_object"}, "grammar": "root ::= \"x\"")"), &r);
  ASSERT_TRUE(two.has_value());
  EXPECT_THAT(two->message, HasSubstr("give one"));
  for (const char* bad :
       {R"("structured_outputs": {"xml": "a"})", R"("structured_outputs": {"choice": []})",
        R"("json_schema": 5)", R"("grammar": 5)"}) {
    ChatRequest b;
    EXPECT_TRUE(Parse(Body(bad), &b).has_value()) << bad;
  }
}

// A schema's properties are generated in its order: the constraint's text
// keeps the body's key order (nlohmann::json would sort them), however the
// schema is given.
TEST(ParseChatRequestTest, SchemaKeepsTheBodysKeyOrder) {
  constexpr char kSchema[] =
      R"({"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": )"
      R"({"type": "string"}}, "required": ["zeta", "alpha"]})";
  constexpr char kText[] = R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":)"
                           R"({"type":"string"}},"required":["zeta","alpha"]})";
  for (const std::string& extra :
       {StrCat(R"("response_format": {"type": "json_schema", "json_schema": {"name": "p", )",
               R"("schema": )", kSchema, "}}"),
        StrCat(R"("structured_outputs": {"json": )", kSchema, "}"),
        StrCat(R"("json_schema": )", kSchema)}) {
    ChatRequest r;
    ASSERT_EQ(Parse(Body(extra), &r), std::nullopt) << extra;
    ASSERT_TRUE(r.constraint.has_value()) << extra;
    EXPECT_EQ(r.constraint->text, kText) << extra;
  }
  CompletionRequest c;
  ASSERT_EQ(ParseCompletionRequest(
                StrCat(R"({"model": "m", "prompt": "x", "json_schema": )", kSchema, "}"),
                RequestLimits(), &c),
            std::nullopt);
  ASSERT_TRUE(c.constraint.has_value());
  EXPECT_EQ(c.constraint->text, kText);
}

TEST(ParseTokenizeRequestTest, PromptOrMessages) {
  TokenizeRequest t;
  ASSERT_EQ(ParseTokenizeRequest(R"({"prompt": "Hi"})", RequestLimits(), &t), std::nullopt);
  EXPECT_EQ(t.prompt, "Hi");
  EXPECT_TRUE(t.messages.empty());
  EXPECT_TRUE(t.add_special_tokens);
  EXPECT_FALSE(t.model.has_value());
  ASSERT_EQ(ParseTokenizeRequest(R"({"model": "m", "prompt": "Hi", "add_special_tokens": false})",
                                 RequestLimits(), &t),
            std::nullopt);
  EXPECT_EQ(t.model, "m");
  EXPECT_FALSE(t.add_special_tokens);
  // vLLM's chat form: the template adds the special tokens, so none on top by default.
  ASSERT_EQ(ParseTokenizeRequest(R"({"messages": [{"role": "user", "content": "Hi"}]})",
                                 RequestLimits(), &t),
            std::nullopt);
  ASSERT_EQ(t.messages.size(), 1u);
  EXPECT_EQ(t.messages[0].content, "Hi");
  EXPECT_FALSE(t.add_special_tokens);
  EXPECT_TRUE(t.add_generation_prompt);
  ASSERT_EQ(ParseTokenizeRequest(R"({"messages": [{"role": "user", "content": "Hi"}],
      "add_generation_prompt": false, "add_special_tokens": true})",
                                 RequestLimits(), &t),
            std::nullopt);
  EXPECT_FALSE(t.add_generation_prompt);
  EXPECT_TRUE(t.add_special_tokens);

  const std::pair<std::string, std::string> cases[] = {
      {R"({})", "prompt"},
      {R"({"prompt": 5})", "prompt"},
      {R"({"prompt": "x", "messages": [{"role": "user", "content": "x"}]})", "messages"},
      {R"({"messages": []})", "messages"},
      {R"({"messages": [{"role": "robot", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": 1})",
       "add_generation_prompt"},
      {R"({"prompt": "x", "add_special_tokens": "no"})", "add_special_tokens"},
      {R"({"prompt": "x", "model": 5})", "model"},
  };
  for (const auto& [body, param] : cases) {
    std::optional<ApiError> e = ParseTokenizeRequest(body, RequestLimits(), &t);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->param, param) << body;
  }
}

TEST(ParseDetokenizeRequestTest, TokenIds) {
  DetokenizeRequest d;
  ASSERT_EQ(ParseDetokenizeRequest(R"({"tokens": [1, 2], "model": "m"})", &d), std::nullopt);
  EXPECT_EQ(d.tokens, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(d.model, "m");
  ASSERT_EQ(ParseDetokenizeRequest(R"({"tokens": []})", &d), std::nullopt);
  EXPECT_TRUE(d.tokens.empty());
  for (const char* body :
       {R"({})", R"({"tokens": 1})", R"({"tokens": [-1]})", R"({"tokens": [1.5]})",
        R"({"tokens": [[1]]})", R"({"tokens": [4294967296]})"}) {
    std::optional<ApiError> e = ParseDetokenizeRequest(body, &d);
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->param, "tokens") << body;
  }
}

// The gateway validates a request's parameters once, in its parser, with
// OpenAI's ranges; the client library validates its own contract again
// inside every generation. Whatever the parser accepts at the edges of its
// ranges, the library accepts too, so that a request that passed its parser
// never fails after a stream's headers are out.
TEST(ParseChatRequestTest, WhatTheParserAcceptsTheLibraryAccepts) {
  const std::string edges[] = {
      R"("temperature": 0, "top_p": 1e-300, "min_p": 1, "top_k": -1)",
      R"("temperature": 2, "top_p": 1, "min_p": 0, "top_k": 2147483647)",
      R"("presence_penalty": -2, "frequency_penalty": 2, "seed": -9223372036854775808)",
      R"("presence_penalty": 2, "frequency_penalty": -2, "seed": 9223372036854775807)",
      R"("logprobs": true, "top_logprobs": 20, "speculate": 16, "max_tokens": 1)",
      R"("logit_bias": {"0": -100, "2147483647": 100}, "stop": ["a", "b", "c", "d"])",
  };
  for (const std::string& extra : edges) {
    ChatRequest r;
    ASSERT_EQ(Parse(Body(extra), &r), std::nullopt) << extra;
    client::GenerateParams p = r.params;
    if (p.max_tokens == 0) p.max_tokens = 1;  // the gateway fills in its default
    EXPECT_TRUE(client::ValidateParams(p).ok()) << extra << ": " << client::ValidateParams(p);
  }
}

}  // namespace
}  // namespace llm::gateway
