#include "client/tools/tool_call_parser.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

struct Parsed {
  std::string content;
  std::vector<ToolCall> calls;
  std::vector<ToolCallEvent> events;
};

ToolParserOptions Options(std::vector<std::string> names = {}) {
  ToolParserOptions o;
  auto n = std::make_shared<int>(0);
  o.new_id = [n] { return "id" + std::to_string((*n)++); };
  o.tool_names = std::move(names);
  return o;
}

// The answer fed in pieces of `chunk` bytes (0: whole).
Parsed Parse(ToolSyntax syntax, const std::string& text, size_t chunk = 0,
             ToolParserOptions options = Options()) {
  ToolCallParser p(syntax, std::move(options));
  Parsed out;
  if (chunk == 0) chunk = text.size() + 1;
  for (size_t i = 0; i < text.size(); i += chunk) p.Feed(text.substr(i, chunk), &out.events);
  p.Finish(&out.events);
  out.content = p.content();
  out.calls = p.calls();
  return out;
}

// The same result whether the text comes whole or a byte at a time (and in
// threes), and the events add up to it.
Parsed ParseEveryWay(ToolSyntax syntax, const std::string& text,
                     std::vector<std::string> names = {}) {
  const Parsed whole = Parse(syntax, text, 0, Options(names));
  for (size_t chunk : {1, 3}) {
    const Parsed split = Parse(syntax, text, chunk, Options(names));
    EXPECT_EQ(split.content, whole.content) << "chunk " << chunk;
    EXPECT_EQ(split.calls.size(), whole.calls.size()) << "chunk " << chunk;
    for (size_t i = 0; i < split.calls.size() && i < whole.calls.size(); ++i) {
      EXPECT_EQ(split.calls[i].name, whole.calls[i].name);
      EXPECT_EQ(split.calls[i].arguments, whole.calls[i].arguments);
    }
    std::string content;
    size_t calls = 0;
    for (const ToolCallEvent& e : split.events) {
      if (e.index < 0) {
        content += e.content;
      } else {
        EXPECT_EQ(e.index, static_cast<int>(calls));
        ++calls;
      }
    }
    EXPECT_EQ(content, split.content);
    EXPECT_EQ(calls, split.calls.size());
  }
  return whole;
}

MATCHER_P2(IsCall, name, arguments, "") { return arg.name == name && arg.arguments == arguments; }

using ::testing::ElementsAre;

// Qwen 2.5 / Hermes: two calls, as Qwen's documentation shows them.
TEST(ToolCallParserTest, HermesCalls) {
  const Parsed p = ParseEveryWay(
      ToolSyntax::kHermes,
      "<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": {\"location\": \"San "
      "Francisco, CA, USA\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_temperature_date\", "
      "\"arguments\": {\"location\": \"San Francisco, CA, USA\", \"date\": "
      "\"2024-10-01\"}}\n</tool_call>");
  EXPECT_EQ(p.content, "");
  EXPECT_THAT(
      p.calls,
      ElementsAre(IsCall("get_current_temperature", R"({"location":"San Francisco, CA, USA"})"),
                  IsCall("get_temperature_date",
                         R"({"location":"San Francisco, CA, USA","date":"2024-10-01"})")));
  EXPECT_EQ(p.calls[0].id, "id0");
  EXPECT_EQ(p.calls[1].id, "id1");
}

TEST(ToolCallParserTest, HermesTextBeforeAndAfter) {
  const Parsed p = ParseEveryWay(ToolSyntax::kHermes,
                                 "Let me check the weather.\n\n<tool_call>\n{\"name\": "
                                 "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                                 "</tool_call>\nDone.");
  EXPECT_EQ(p.content, "Let me check the weather.\nDone.");
  EXPECT_THAT(p.calls, ElementsAre(IsCall("get_weather", R"({"city":"Paris"})")));
  // Streamed: the text first, then the call, then the rest.
  ASSERT_EQ(p.events.size(), 3u);
  EXPECT_EQ(p.events[0].content, "Let me check the weather.");
  EXPECT_EQ(p.events[1].index, 0);
  EXPECT_EQ(p.events[2].content, "\nDone.");
}

// SmolLM2's trained variant: a JSON array in one <tool_call>.
TEST(ToolCallParserTest, HermesArrayOfCalls) {
  const Parsed p = ParseEveryWay(
      ToolSyntax::kHermes,
      "<tool_call>[\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}},\n"
      "{\"name\": \"get_time\", \"arguments\": {}}\n]</tool_call>");
  EXPECT_THAT(p.calls,
              ElementsAre(IsCall("get_weather", R"({"city":"Paris"})"), IsCall("get_time", "{}")));
}

TEST(ToolCallParserTest, TextWithoutCallsIsUnchanged) {
  for (const std::string text :
       {"The capital of France is Paris.", "  a < b and <tool> x </tool_call>\n\n", "<",
        "<tool_cal", "", "\n", "x <tool_call", "{\"json\": true}"}) {
    const Parsed p = ParseEveryWay(ToolSyntax::kHermes, text);
    EXPECT_EQ(p.content, text);
    EXPECT_TRUE(p.calls.empty());
  }
}

// A call never comes out half-parsed: cut off or malformed, it is content.
TEST(ToolCallParserTest, UnfinishedOrMalformedCallsAreContent) {
  for (const std::string text : {
           "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par",
           "Sure. <tool_call>\n{\"name\": \"get_weather\"",
           "<tool_call>not json</tool_call>",
           "<tool_call>{\"arguments\": {}}</tool_call>",                     // no name
           "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",   // not an object
           "<tool_call>{\"name\": \"f\", \"arguments\": {}} trailing text",  // no closing tag
           "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1]}</tool_call>",
       }) {
    const Parsed p = ParseEveryWay(ToolSyntax::kHermes, text);
    EXPECT_EQ(p.content, text);
    EXPECT_TRUE(p.calls.empty()) << text;
  }
  // Too deep to be a call.
  const std::string deep =
      "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": " + std::string(70, '[') +
      std::string(70, ']') + "}}</tool_call>";
  EXPECT_TRUE(Parse(ToolSyntax::kHermes, deep).calls.empty());
  EXPECT_EQ(Parse(ToolSyntax::kHermes, deep).content, deep);
}

TEST(ToolCallParserTest, HermesCallWithoutItsClosingTagAtTheEnd) {
  const Parsed p = ParseEveryWay(
      ToolSyntax::kHermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_");
  EXPECT_THAT(p.calls, ElementsAre(IsCall("f", R"({"a":1})")));
  EXPECT_EQ(p.content, "");
}

TEST(ToolCallParserTest, ArgumentsAsAStringOrMissing) {
  const Parsed p = ParseEveryWay(
      ToolSyntax::kHermes,
      "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": [1, 2]}\"}</tool_call>"
      "<tool_call>{\"name\": \"g\"}</tool_call>"
      "<tool_call>{\"name\": \"h\", \"parameters\": {\"z\": null}}</tool_call>");
  EXPECT_THAT(p.calls, ElementsAre(IsCall("f", R"({"a":[1,2]})"), IsCall("g", "{}"),
                                   IsCall("h", R"({"z":null})")));
}

TEST(ToolCallParserTest, MaxCallsDropsTheRest) {
  ToolParserOptions o = Options();
  o.max_calls = 1;
  const Parsed p = Parse(ToolSyntax::kHermes,
                         "<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>\n"
                         "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>",
                         0, std::move(o));
  EXPECT_THAT(p.calls, ElementsAre(IsCall("f", "{}")));
  EXPECT_EQ(p.content, "");
}

// Llama 3.1 / 3.2: the call is the whole answer.
TEST(ToolCallParserTest, Llama3JsonCall) {
  const Parsed p = ParseEveryWay(
      ToolSyntax::kLlama3,
      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}");
  EXPECT_EQ(p.content, "");
  EXPECT_THAT(p.calls, ElementsAre(IsCall("get_weather", R"({"city":"Paris","unit":"celsius"})")));
  // Llama 3.2 writes several separated by semicolons.
  EXPECT_THAT(ParseEveryWay(ToolSyntax::kLlama3,
                            "{\"name\": \"a\", \"parameters\": {}}; {\"type\": \"function\", "
                            "\"name\": \"b\", \"parameters\": {\"x\": 1}}")
                  .calls,
              ElementsAre(IsCall("a", "{}"), IsCall("b", R"({"x":1})")));
}

TEST(ToolCallParserTest, Llama3PlainAnswersStayContent) {
  for (const std::string text : {"{\"name\": \"Bob\", \"age\": 3}",
                                 "The call would be {\"name\": \"f\", \"parameters\": {}}",
                                 "  {\"name\": \"f\", \"param", "Paris."}) {
    const Parsed p = ParseEveryWay(ToolSyntax::kLlama3, text);
    EXPECT_EQ(p.content, text);
    EXPECT_TRUE(p.calls.empty()) << text;
  }
}

TEST(ToolCallParserTest, Llama3PythonTag) {
  EXPECT_THAT(ParseEveryWay(ToolSyntax::kLlama3,
                            "<|python_tag|>brave_search.call(query=\"weather in Paris\", count=3)")
                  .calls,
              ElementsAre(IsCall("brave_search", R"({"query":"weather in Paris","count":3})")));
  EXPECT_THAT(ParseEveryWay(ToolSyntax::kLlama3,
                            "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": "
                            "{\"city\": \"Paris\"}}")
                  .calls,
              ElementsAre(IsCall("get_weather", R"({"city":"Paris"})")));
  const Parsed raw = ParseEveryWay(ToolSyntax::kLlama3, "<|python_tag|>print(1 + 1)");
  EXPECT_TRUE(raw.calls.empty());
  EXPECT_EQ(raw.content, "<|python_tag|>print(1 + 1)");
}

// Mistral: the array after [TOOL_CALLS], with the model's 9-character ids.
TEST(ToolCallParserTest, MistralCalls) {
  const Parsed p = ParseEveryWay(
      ToolSyntax::kMistral,
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
      "\"abcDEF123\"}, {\"name\": \"get_time\", \"arguments\": {\"zone\": \"CET\"}}]");
  EXPECT_THAT(p.calls, ElementsAre(IsCall("get_weather", R"({"city":"Paris"})"),
                                   IsCall("get_time", R"({"zone":"CET"})")));
  EXPECT_EQ(p.calls[0].id, "abcDEF123");
  EXPECT_EQ(p.calls[1].id, "id0");
  // The newer form (Mistral Small 3.2, Magistral): name[ARGS]{...} per call.
  EXPECT_THAT(ParseEveryWay(ToolSyntax::kMistral,
                            "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]"
                            "get_time[ARGS]{}")
                  .calls,
              ElementsAre(IsCall("get_weather", R"({"city":"Paris"})"), IsCall("get_time", "{}")));
  EXPECT_TRUE(ParseEveryWay(ToolSyntax::kMistral, "[TOOL_CALLS] oops").calls.empty());
}

// Phi-4-mini: <|tool_call|>[...]<|/tool_call|>, or functools[...].
TEST(ToolCallParserTest, ToolCallTokenCalls) {
  EXPECT_THAT(ParseEveryWay(ToolSyntax::kToolCall,
                            "<|tool_call|>[{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                            "\"Paris\"}}]<|/tool_call|>")
                  .calls,
              ElementsAre(IsCall("get_weather", R"({"city":"Paris"})")));
  EXPECT_THAT(
      ParseEveryWay(ToolSyntax::kToolCall, "functools[{\"name\": \"f\", \"arguments\": {}}]").calls,
      ElementsAre(IsCall("f", "{}")));
  const Parsed prose = ParseEveryWay(ToolSyntax::kToolCall, "Use functools.partial here.");
  EXPECT_TRUE(prose.calls.empty());
  EXPECT_EQ(prose.content, "Use functools.partial here.");
}

// Gemma: Python calls opening the answer, as Google's prompt asks.
TEST(ToolCallParserTest, PythonicCalls) {
  const std::vector<std::string> names = {"get_weather", "get_time"};
  EXPECT_THAT(
      ParseEveryWay(ToolSyntax::kPythonic,
                    "[get_weather(city=\"Paris\", unit='celsius', days=3), "
                    "get_time(zone='Europe/Paris', dst=True, extra=None, l=[1, 'a'])]",
                    names)
          .calls,
      ElementsAre(
          IsCall("get_weather", R"({"city":"Paris","unit":"celsius","days":3})"),
          IsCall("get_time", R"({"zone":"Europe/Paris","dst":true,"extra":null,"l":[1,"a"]})")));
  EXPECT_THAT(
      ParseEveryWay(ToolSyntax::kPythonic, "```tool_code\nget_time(zone=\"UTC\")\n```", names)
          .calls,
      ElementsAre(IsCall("get_time", R"({"zone":"UTC"})")));
  for (const std::string text :
       {"[1] The first point.", "The weather is fine.", "get_weatherman(x=1)",
        "[get_weather(city=\"Paris\"", "get_time is a function"}) {
    const Parsed p = ParseEveryWay(ToolSyntax::kPythonic, text, names);
    EXPECT_EQ(p.content, text);
    EXPECT_TRUE(p.calls.empty()) << text;
  }
}

TEST(ToolCallParserTest, RandomIds) {
  const std::string id = RandomToolCallId("call_", 24);
  EXPECT_EQ(id.size(), 29u);
  EXPECT_EQ(id.substr(0, 5), "call_");
  EXPECT_NE(id, RandomToolCallId("call_", 24));
  ToolCallParser p(ToolSyntax::kHermes, {});
  std::vector<ToolCallEvent> events;
  p.Feed("<tool_call>{\"name\": \"f\"}</tool_call>", &events);
  p.Finish(&events);
  ASSERT_EQ(p.calls().size(), 1u);
  EXPECT_EQ(p.calls()[0].id.substr(0, 5), "call_");
}

}  // namespace
}  // namespace llm::client
