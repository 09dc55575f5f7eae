// Tool calling on /v1/chat/completions and Anthropic's /v1/messages, over
// in-memory services whose model answers from a script: the answer is a
// function of the prompt the gateway rendered (so a test sees what the
// template got), written after the prompt's generation header.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "gateway/fake_services.h"
#include "gateway/handler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::gateway {
namespace {

using nlohmann::json;
using testing::FakeExchange;
using ::testing::HasSubstr;
using ::testing::Not;

// The answer to a prompt (the whole rendered text).
using Script = std::function<std::string(const std::string& prompt)>;

// A model that writes script(prompt) after the last `header` in its session,
// then EOS.
std::unique_ptr<client::testing::FakeModel> ScriptModel(std::string header, Script script) {
  auto model = std::make_unique<client::testing::FakeModel>(/*log=*/nullptr);
  model->vocab = testing::kVocab;
  model->context = 4096;
  model->capacity = 4096;
  model->logits_after = [header, script](const std::vector<int32_t>& held) {
    std::string text;
    for (int32_t id : held)
      text += id == testing::kEos ? std::string(testing::kEosText)
                                  : std::string(1, static_cast<char>(id));
    const size_t at = text.rfind(header);
    const size_t start = at == std::string::npos ? text.size() : at + header.size();
    const std::string answer = script(text.substr(0, start));
    const size_t n = text.size() - start;
    return testing::ArgmaxLogits(n < answer.size() ? static_cast<unsigned char>(answer[n])
                                                   : testing::kEos);
  };
  return model;
}

// A Qwen-like template: tools as a list, calls in history, "\x02" as the
// generation header ("<tool_call>" names its syntax).
constexpr char kHermesTemplate[] =
    "{# <tool_call> #}{% if tools %}[tools:{% for t in tools %}{{ t.function.name }};{% endfor %}]"
    "{% endif %}{% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.tool_calls %}"
    "{% for c in m.tool_calls %}<call {{ c.id }} {{ c.function.name }} "
    "{{ c.function.arguments | tojson }}>{% endfor %}{% endif %}{% if m.tool_call_id %}"
    "(re {{ m.tool_call_id }}){% endif %}|{% endfor %}{% if add_generation_prompt %}\x02{% endif "
    "%}";

constexpr char kCall[] =
    "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
    "\"Paris\"}}\n</tool_call>";

const json kWeatherTool = {{"type", "function"},
                           {"function",
                            {{"name", "get_weather"},
                             {"description", "The weather in a city."},
                             {"parameters",
                              {{"type", "object"},
                               {"properties", {{"city", {{"type", "string"}}}}},
                               {"required", {"city"}}}}}}};

class ToolsHandlerTest : public ::testing::Test {
 protected:
  void Make(const std::string& template_text, std::string header, Script script,
            HandlerOptions options = HandlerOptions()) {
    absl::StatusOr<client::ChatTemplate> t =
        template_text.empty() ? absl::StatusOr<client::ChatTemplate>(client::ChatTemplate::Raw())
                              : client::ChatTemplate::FromJinja(template_text, "test", "", "</s>");
    ASSERT_TRUE(t.ok()) << t.status();
    handler_ = std::make_unique<Handler>(
        std::move(options),
        testing::FakeServices(ScriptModel(std::move(header), std::move(script))), *std::move(t),
        [] { return ServiceHealth(); });
  }
  void MakeHermes(Script script) { Make(kHermesTemplate, "\x02", std::move(script)); }

  std::unique_ptr<FakeExchange> Post(
      std::string path, const json& body,
      std::vector<std::pair<std::string, std::string>> headers = {}) {
    auto http =
        std::make_unique<FakeExchange>("POST", std::move(path), body.dump(), std::move(headers));
    handler_->Handle(*http);
    return http;
  }

  static json ChatBody(json extra = json::object()) {
    json body = {{"model", "fake-model"},
                 {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
                 {"tools", {kWeatherTool}},
                 {"temperature", 0}};
    body.update(extra);
    return body;
  }

  std::unique_ptr<Handler> handler_;
};

// Server-sent events: (event name or "", data).
std::vector<std::pair<std::string, json>> Events(const std::string& response) {
  std::vector<std::pair<std::string, json>> out;
  for (absl::string_view block : absl::StrSplit(response, "\n\n")) {
    std::string name;
    for (absl::string_view line : absl::StrSplit(block, "\n")) {
      if (absl::StartsWith(line, "event: ")) name = std::string(line.substr(7));
      if (absl::StartsWith(line, "data: {")) {
        out.emplace_back(name, json::parse(std::string(line.substr(6))));
      }
    }
  }
  return out;
}

TEST_F(ToolsHandlerTest, ChatAnswersWithToolCalls) {
  std::string seen;
  MakeHermes([&](const std::string& prompt) {
    seen = prompt;
    return std::string(kCall);
  });
  auto http = Post("/v1/chat/completions", ChatBody());
  ASSERT_EQ(http->status(), 200) << http->response();
  EXPECT_THAT(seen, HasSubstr("[tools:get_weather;]"));  // the template got the tools
  const json r = json::parse(http->response());
  const json& choice = r["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["message"]["content"], "Checking.");
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  const json& call = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], "{\"city\":\"Paris\"}");
  EXPECT_TRUE(absl::StartsWith(call["id"].get<std::string>(), "call_"));
  EXPECT_EQ(call["id"].get<std::string>().size(), 29u);
}

TEST_F(ToolsHandlerTest, ChatStreamsToolCallDeltas) {
  MakeHermes([](const std::string&) { return std::string(kCall); });
  auto http = Post("/v1/chat/completions", ChatBody({{"stream", true}}));
  ASSERT_EQ(http->status(), 200);
  std::string content, name, arguments, id, finish;
  for (const auto& [event, chunk] : Events(http->response())) {
    const json& c = chunk["choices"][0];
    const json& delta = c["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) {
      const json& t = delta["tool_calls"][0];
      EXPECT_EQ(t["index"], 0);
      if (t.contains("id")) id = t["id"];
      if (t["function"].contains("name")) name += t["function"]["name"].get<std::string>();
      arguments += t["function"]["arguments"].get<std::string>();
    }
    if (c["finish_reason"].is_string()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, "Checking.");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, "{\"city\":\"Paris\"}");
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_THAT(http->response(), ::testing::EndsWith("data: [DONE]\n\n"));
}

TEST_F(ToolsHandlerTest, AnAnswerWithoutACallIsText) {
  MakeHermes([](const std::string&) { return std::string("It is sunny <b>today</b>."); });
  auto http = Post("/v1/chat/completions", ChatBody());
  ASSERT_EQ(http->status(), 200);
  const json choice = json::parse(http->response())["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["message"],
            json({{"role", "assistant"}, {"content", "It is sunny <b>today</b>."}}));
}

TEST_F(ToolsHandlerTest, ToolChoiceNoneRendersNoToolsAndParsesNothing) {
  std::string seen;
  MakeHermes([&](const std::string& prompt) {
    seen = prompt;
    return std::string(kCall);
  });
  auto http = Post("/v1/chat/completions", ChatBody({{"tool_choice", "none"}}));
  ASSERT_EQ(http->status(), 200);
  EXPECT_THAT(seen, Not(HasSubstr("[tools:")));
  const json choice = json::parse(http->response())["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["message"]["content"], kCall);
}

// The next turn: the assistant's call and the tool's result reach the
// template as transformers passes them.
TEST_F(ToolsHandlerTest, ToolResultsInTheNextTurn) {
  std::string seen;
  MakeHermes([&](const std::string& prompt) {
    seen = prompt;
    return std::string("18 C in Paris.");
  });
  json body = ChatBody();
  body["messages"] = {
      {{"role", "user"}, {"content", "Weather in Paris?"}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18 C"}}};
  auto http = Post("/v1/chat/completions", body);
  ASSERT_EQ(http->status(), 200) << http->response();
  EXPECT_THAT(seen, HasSubstr("assistant:<call call_1 get_weather {\"city\": \"Paris\"}>|"
                              "tool:18 C(re call_1)|"));
  EXPECT_EQ(json::parse(http->response())["choices"][0]["message"]["content"], "18 C in Paris.");
}

// A template without tool support (SmolLM2's, the default model's) gets
// the Hermes block in its system message; its calls parse the same way.
TEST_F(ToolsHandlerTest, TemplateWithoutToolsGetsTheHermesBlock) {
  std::string seen;
  Make(
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\nYou are SmolLM<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + "
      "message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if "
      "add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
      "<|im_start|>assistant\n", [&](const std::string& prompt) {
        seen = prompt;
        return std::string(
            "<tool_call>[{\"name\": \"get_weather\", \"arguments\": {\"city\": "
            "\"Paris\"}}]</tool_call>");
      });
  auto http = Post("/v1/chat/completions", ChatBody());
  ASSERT_EQ(http->status(), 200) << http->response();
  EXPECT_THAT(seen, HasSubstr("<|im_start|>system\nYou are SmolLM\n\n# Tools\n\nYou may call one "
                              "or more functions"));
  EXPECT_THAT(seen, HasSubstr("\"name\": \"get_weather\""));
  const json choice = json::parse(http->response())["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
}

TEST_F(ToolsHandlerTest, NoKnownSyntaxIs400NamingTheFamily) {
  Make(
      "{% if tools %}<｜tool▁calls▁begin｜>{% endif %}{% for m in messages %}{{ m.content }}"
      "{% endfor %}",
      "", [](const std::string&) { return std::string("x"); });
  auto http = Post("/v1/chat/completions", ChatBody());
  EXPECT_EQ(http->status(), 400);
  const json e = json::parse(http->response())["error"];
  EXPECT_EQ(e["param"], "tools");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("tool calling is not supported"));
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("family: unknown"));
  // Raw prompts: no template.
  Make("", "", [](const std::string&) { return std::string("x"); });
  http = Post("/v1/chat/completions", ChatBody());
  EXPECT_EQ(http->status(), 400);
  EXPECT_THAT(json::parse(http->response())["error"]["message"].get<std::string>(),
              HasSubstr("without a chat template"));
  // Without tools the same model answers.
  json plain = ChatBody();
  plain.erase("tools");
  EXPECT_EQ(Post("/v1/chat/completions", plain)->status(), 200);
}

// ---- Anthropic's Messages API ----

json MessagesBody(json extra = json::object()) {
  json body = {{"model", "fake-model"},
               {"max_tokens", 100},
               {"temperature", 0},
               {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}}};
  body.update(extra);
  return body;
}

const json kAnthropicTool = {{"name", "get_weather"},
                             {"description", "The weather in a city."},
                             {"input_schema",
                              {{"type", "object"},
                               {"properties", {{"city", {{"type", "string"}}}}},
                               {"required", {"city"}}}}};

TEST_F(ToolsHandlerTest, MessagesAnswer) {
  std::string seen;
  MakeHermes([&](const std::string& prompt) {
    seen = prompt;
    return std::string("Sunny.");
  });
  auto http = Post("/v1/messages", MessagesBody({{"system", "Be brief."}}));
  ASSERT_EQ(http->status(), 200) << http->response();
  EXPECT_EQ(seen, "system:Be brief.|user:Weather in Paris?|\x02");
  const json r = json::parse(http->response());
  EXPECT_TRUE(absl::StartsWith(r["id"].get<std::string>(), "msg_"));
  EXPECT_EQ(r["type"], "message");
  EXPECT_EQ(r["role"], "assistant");
  EXPECT_EQ(r["model"], "fake-model");
  EXPECT_EQ(r["content"], json::array({{{"type", "text"}, {"text", "Sunny."}}}));
  EXPECT_EQ(r["stop_reason"], "end_turn");
  EXPECT_TRUE(r["stop_sequence"].is_null());
  EXPECT_EQ(r["usage"], json({{"input_tokens", seen.size()}, {"output_tokens", 6}}));
}

TEST_F(ToolsHandlerTest, MessagesStopReasons) {
  MakeHermes([](const std::string&) { return std::string("one two three"); });
  json r = json::parse(Post("/v1/messages", MessagesBody({{"max_tokens", 3}}))->response());
  EXPECT_EQ(r["stop_reason"], "max_tokens");
  EXPECT_EQ(r["content"][0]["text"], "one");
  r = json::parse(
      Post("/v1/messages", MessagesBody({{"stop_sequences", {"zzz", " thr"}}}))->response());
  EXPECT_EQ(r["stop_reason"], "stop_sequence");
  EXPECT_EQ(r["stop_sequence"], " thr");
  EXPECT_EQ(r["content"][0]["text"], "one two");
}

TEST_F(ToolsHandlerTest, MessagesStreamInAnthropicsOrder) {
  MakeHermes([](const std::string&) { return std::string("Sunny."); });
  auto http = Post("/v1/messages", MessagesBody({{"stream", true}}));
  ASSERT_EQ(http->status(), 200);
  std::vector<std::string> names;
  std::string text;
  for (const auto& [event, data] : Events(http->response())) {
    EXPECT_EQ(event, data["type"]);  // the SSE event name is the data's type
    if (names.empty() || names.back() != event) names.push_back(event);
    if (event == "content_block_delta") text += data["delta"]["text"].get<std::string>();
    if (event == "message_start") {
      EXPECT_EQ(data["message"]["content"], json::array());
      EXPECT_GT(data["message"]["usage"]["input_tokens"], 0);
    }
    if (event == "message_delta") {
      EXPECT_EQ(data["delta"]["stop_reason"], "end_turn");
      EXPECT_EQ(data["usage"]["output_tokens"], 6);
    }
  }
  EXPECT_THAT(names, ::testing::ElementsAre("message_start", "content_block_start", "ping",
                                            "content_block_delta", "content_block_stop",
                                            "message_delta", "message_stop"));
  EXPECT_EQ(text, "Sunny.");
  EXPECT_THAT(http->response(), Not(HasSubstr("[DONE]")));
}

TEST_F(ToolsHandlerTest, MessagesToolUse) {
  std::string seen;
  MakeHermes([&](const std::string& prompt) {
    seen = prompt;
    return std::string(kCall);
  });
  auto http = Post("/v1/messages", MessagesBody({{"tools", {kAnthropicTool}}}));
  ASSERT_EQ(http->status(), 200) << http->response();
  EXPECT_THAT(seen, HasSubstr("[tools:get_weather;]"));
  const json r = json::parse(http->response());
  EXPECT_EQ(r["stop_reason"], "tool_use") << r;
  ASSERT_EQ(r["content"].size(), 2u);
  EXPECT_EQ(r["content"][0], json({{"type", "text"}, {"text", "Checking."}}));
  const json& use = r["content"][1];
  EXPECT_EQ(use["type"], "tool_use");
  EXPECT_TRUE(absl::StartsWith(use["id"].get<std::string>(), "toolu_"));
  EXPECT_EQ(use["name"], "get_weather");
  EXPECT_EQ(use["input"], json({{"city", "Paris"}}));

  // Streamed: a text block, then the tool_use block with its input as one
  // input_json_delta.
  http = Post("/v1/messages", MessagesBody({{"tools", {kAnthropicTool}}, {"stream", true}}));
  std::vector<json> starts;
  std::string partial;
  for (const auto& [event, data] : Events(http->response())) {
    if (event == "content_block_start") starts.push_back(data);
    if (event == "content_block_delta" && data["delta"]["type"] == "input_json_delta") {
      EXPECT_EQ(data["index"], 1);
      partial += data["delta"]["partial_json"].get<std::string>();
    }
    if (event == "message_delta") {
      EXPECT_EQ(data["delta"]["stop_reason"], "tool_use");
    }
  }
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0]["content_block"]["type"], "text");
  EXPECT_EQ(starts[1]["index"], 1);
  EXPECT_EQ(starts[1]["content_block"]["type"], "tool_use");
  EXPECT_EQ(starts[1]["content_block"]["name"], "get_weather");
  EXPECT_EQ(starts[1]["content_block"]["input"], json::object());
  EXPECT_EQ(json::parse(partial), json({{"city", "Paris"}}));
}

TEST_F(ToolsHandlerTest, MessagesToolResultRoundTrip) {
  std::string seen;
  MakeHermes([&](const std::string& prompt) {
    seen = prompt;
    return std::string("18 C.");
  });
  json body = MessagesBody({{"tools", {kAnthropicTool}}});
  body["messages"] = {{{"role", "user"}, {"content", "Weather in Paris?"}},
                      {{"role", "assistant"},
                       {"content",
                        {{{"type", "text"}, {"text", "Checking."}},
                         {{"type", "tool_use"},
                          {"id", "toolu_1"},
                          {"name", "get_weather"},
                          {"input", {{"city", "Paris"}}}}}}},
                      {{"role", "user"},
                       {"content",
                        {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "18 C"}},
                         {{"type", "text"}, {"text", "And?"}}}}}};
  auto http = Post("/v1/messages", body);
  ASSERT_EQ(http->status(), 200) << http->response();
  EXPECT_THAT(seen, HasSubstr("assistant:Checking.<call toolu_1 get_weather {\"city\": "
                              "\"Paris\"}>|tool:18 C(re toolu_1)|user:And?|\x02"));
  EXPECT_EQ(json::parse(http->response())["stop_reason"], "end_turn");
}

TEST_F(ToolsHandlerTest, MessagesPrefillIsContinued) {
  std::string seen;
  MakeHermes([&](const std::string& prompt) {
    seen = prompt;
    return std::string("ny.");
  });
  json body = MessagesBody();
  body["messages"].push_back({{"role", "assistant"}, {"content", "Sun"}});
  // The model's header is the last one; the answer continues "Sun".
  auto http = Post("/v1/messages", body);
  ASSERT_EQ(http->status(), 200) << http->response();
  EXPECT_EQ(seen, "user:Weather in Paris?|\x02");
  body["messages"].back()["content"] = "Sun ";
  EXPECT_EQ(Post("/v1/messages", body)->status(), 400);
}

TEST_F(ToolsHandlerTest, MessagesErrorsInAnthropicsShape) {
  MakeHermes([](const std::string&) { return std::string("x"); });
  json no_max = MessagesBody();
  no_max.erase("max_tokens");
  const std::vector<std::tuple<std::string, json, int, std::string>> cases = {
      {"POST", no_max, 400, "invalid_request_error"},
      {"POST", MessagesBody({{"model", "claude-3"}}), 404, "not_found_error"},
      {"POST", MessagesBody({{"temperature", 1.5}}), 400, "invalid_request_error"},
      {"POST",
       MessagesBody({{"messages", {{{"role", "user"}, {"content", {{{"type", "image"}}}}}}}}), 400,
       "invalid_request_error"},
      {"POST", MessagesBody({{"tools", {{{"type", "web_search_20250305"}, {"name", "s"}}}}}), 400,
       "invalid_request_error"},
      {"POST",
       MessagesBody(
           {{"tools", {kAnthropicTool}}, {"tool_choice", {{"type", "tool"}, {"name", "nope"}}}}),
       400, "invalid_request_error"},
      {"GET", json(), 405, "invalid_request_error"},
  };
  for (const auto& [method, body, status, type] : cases) {
    auto http =
        std::make_unique<FakeExchange>(method, "/v1/messages", body.is_null() ? "" : body.dump());
    handler_->Handle(*http);
    EXPECT_EQ(http->status(), status) << body;
    const json r = json::parse(http->response());
    EXPECT_EQ(r["type"], "error") << r;
    EXPECT_EQ(r["error"]["type"], type) << r;
    EXPECT_TRUE(r["error"]["message"].is_string());
  }
  auto bad = std::make_unique<FakeExchange>("POST", "/v1/messages", "{not json");
  handler_->Handle(*bad);
  EXPECT_EQ(bad->status(), 400);
  EXPECT_EQ(json::parse(bad->response())["error"]["type"], "invalid_request_error");
}

TEST_F(ToolsHandlerTest, CountTokens) {
  MakeHermes([](const std::string&) { return std::string("x"); });
  json body = MessagesBody();
  body.erase("max_tokens");
  auto http = Post("/v1/messages/count_tokens", body);
  ASSERT_EQ(http->status(), 200) << http->response();
  // The byte tokenizer: one token per byte of "user:Weather in Paris?|\x02".
  const size_t plain = std::string("user:Weather in Paris?|\x02").size();
  EXPECT_EQ(json::parse(http->response()), json({{"input_tokens", plain}}));
  body["tools"] = {kAnthropicTool};
  const json with_tools = json::parse(Post("/v1/messages/count_tokens", body)->response());
  EXPECT_EQ(with_tools["input_tokens"], plain + std::string("[tools:get_weather;]").size());
  body["model"] = "other";
  EXPECT_EQ(Post("/v1/messages/count_tokens", body)->status(), 404);
}

TEST_F(ToolsHandlerTest, TheSameApiKeyAsAnthropicsClientsSendIt) {
  HandlerOptions options;
  options.http_auth_token = "sk-secret";
  Make(
      kHermesTemplate, "\x02", [](const std::string&) { return std::string("ok"); },
      std::move(options));
  EXPECT_EQ(Post("/v1/messages", MessagesBody(), {{"x-api-key", "sk-secret"}})->status(), 200);
  EXPECT_EQ(Post("/v1/messages", MessagesBody(), {{"Authorization", "Bearer sk-secret"}})->status(),
            200);
  EXPECT_EQ(Post("/v1/chat/completions", ChatBody(), {{"x-api-key", "sk-secret"}})->status(), 200);
  auto denied = Post("/v1/messages", MessagesBody(), {{"x-api-key", "sk-wrong"}});
  EXPECT_EQ(denied->status(), 401);
  EXPECT_EQ(json::parse(denied->response())["error"]["type"], "authentication_error");
  EXPECT_THAT(denied->response(), Not(HasSubstr("sk-")));
  EXPECT_EQ(Post("/v1/messages", MessagesBody())->status(), 401);
}

}  // namespace
}  // namespace llm::gateway
