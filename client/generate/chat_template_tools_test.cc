// ChatTemplate::Render with tools, tool calls and tool results, against what
// Python's jinja2 renders from the same real templates in transformers'
// environment (testdata/tool_references.json, made by
// testdata/make_tool_references.py), byte for byte; a reference that raised
// must fail here with the same message.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "client/generate/chat_template.h"
#include "client/generate/jinja_json.h"
#include "common/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A reference conversation's messages as the gateway builds them.
std::vector<ChatMessage> Messages(const Json& messages) {
  std::vector<ChatMessage> out;
  for (const Json& m : messages) {
    ChatMessage c;
    c.role = m["role"];
    c.content = m["content"];
    if (m.contains("tool_calls")) {
      for (const Json& t : m["tool_calls"]) {
        c.tool_calls.push_back({t["id"], t["function"]["name"], t["function"]["arguments"].dump()});
      }
    }
    if (m.contains("tool_call_id")) c.tool_call_id = m["tool_call_id"];
    if (m.contains("name")) c.name = m["name"];
    out.push_back(std::move(c));
  }
  return out;
}

TEST(ChatTemplateToolsTest, RealTemplatesRenderToolsAsTransformersDoes) {
  const std::string dir = llm::testing::SourceDir();
  const Json refs = Json::parse(ReadFile(dir + "/client/generate/testdata/tool_references.json"));
  ASSERT_GT(refs["cases"].size(), 0u);
  const absl::Time now = absl::FromUnixSeconds(refs["date_unix_seconds"].get<int64_t>());
  int checked = 0;
  for (const Json& c : refs["cases"]) {
    const std::string name = c["template"];
    const std::string conversation = c["conversation"];
    SCOPED_TRACE(name + " / " + conversation);
    const Json& tokens = refs["tokens"][name];
    absl::StatusOr<ChatTemplate> t = ChatTemplate::FromJinja(
        ReadFile(dir + "/common/jinja/testdata/templates/" + name + ".jinja"), name,
        tokens["bos_token"].is_null() ? "" : tokens["bos_token"].get<std::string>(),
        tokens["eos_token"].is_null() ? "" : tokens["eos_token"].get<std::string>());
    ASSERT_TRUE(t.ok()) << t.status();
    const Json& conv = refs["conversations"][conversation];
    const std::vector<ChatMessage> messages = Messages(conv["messages"]);
    const std::string tools = conv["tools"].is_null() ? "" : conv["tools"].dump();
    absl::StatusOr<std::string> out = t->RenderAt(messages, true, tools, now);
    if (c.contains("error")) {
      ASSERT_FALSE(out.ok());
      EXPECT_THAT(std::string(out.status().message()),
                  HasSubstr("raise_exception: " + c["error"].get<std::string>()));
    } else {
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(*out, c["output"].get<std::string>());
    }
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(refs["cases"].size()));
}

// A template written for a test.
ChatTemplate Inline(std::string_view source) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromJinja(source, "test", "", "");
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

TEST(ChatTemplateToolsTest, ArgumentsThatAreNotAnObjectReachTheTemplateAsText) {
  const ChatTemplate t = Inline(
      "{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments is string }}:"
      "{{ c.function.arguments | tojson }};{% endfor %}{% endfor %}");
  ChatMessage m{"assistant", ""};
  m.tool_calls = {{"a", "f", "{\"x\": [1, 2.5, null]}"}, {"b", "f", "not json"}, {"c", "f", "[1]"}};
  const std::vector<ChatMessage> messages = {m};
  absl::StatusOr<std::string> out = t.Render(messages, false);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "False:{\"x\": [1, 2.5, null]};True:\"not json\";True:\"[1]\";");
}

TEST(ChatTemplateToolsTest, KeysOnlyWhenTheMessageHasThem) {
  const ChatTemplate t = Inline(
      "{% for m in messages %}{{ 'tool_calls' in m }},{{ m.tool_call_id is defined }},"
      "{{ m.name is defined }},{{ m.tools is defined }};{% endfor %}{{ tools is none }}");
  ChatMessage tool{"tool", "42"};
  tool.tool_call_id = "call_1";
  tool.name = "f";
  ChatMessage system{"system", "s"};
  system.tools = "[]";
  const std::vector<ChatMessage> messages = {{"user", "hi"}, tool, system};
  absl::StatusOr<std::string> out = t.Render(messages, false);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "False,False,False,False;False,True,True,False;False,False,False,True;True");
}

TEST(ChatTemplateToolsTest, ToolsMustBeAJsonArray) {
  const ChatTemplate t = Inline("{{ tools | length }}");
  const std::vector<ChatMessage> messages = {{"user", "hi"}};
  EXPECT_EQ(*t.Render(messages, false, R"([{"type": "function"}, {}])"), "2");
  EXPECT_FALSE(t.Render(messages, false, R"({"type": "function"})").ok());
  EXPECT_FALSE(t.Render(messages, false, "[").ok());
}

TEST(JinjaJsonTest, KeepsKeyOrderAndPythonsRepeatedKeyRule) {
  absl::StatusOr<jinja::Value> v =
      JinjaFromJson(R"({"b": 1, "a": {"y": true, "x": null}, "b": 2})");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->Repr(), "{'b': 2, 'a': {'y': True, 'x': None}}");
  EXPECT_EQ(JinjaFromJson("[1, -2, 3.5, \"\\u00e9\"]")->Repr(), "[1, -2, 3.5, 'é']");
  EXPECT_EQ(JinjaFromJson("18446744073709551615")->kind(), jinja::Value::Kind::kFloat);
}

TEST(JinjaJsonTest, RefusesBadTextAndDeepNesting) {
  EXPECT_FALSE(JinjaFromJson("").ok());
  EXPECT_FALSE(JinjaFromJson("{\"a\": 1} x").ok());
  EXPECT_FALSE(JinjaFromJson(std::string("{}\0", 3)).ok());
  EXPECT_TRUE(JinjaFromJson(std::string(64, '[') + std::string(64, ']')).ok());
  absl::StatusOr<jinja::Value> deep =
      JinjaFromJson(std::string(100000, '[') + std::string(100000, ']'));
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(std::string(deep.status().message()), HasSubstr("deeper than 64"));
}

}  // namespace
}  // namespace llm::client
