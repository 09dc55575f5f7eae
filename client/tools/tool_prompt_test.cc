#include "client/tools/tool_prompt.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

using ::testing::HasSubstr;

ChatTemplate Real(const std::string& name, const std::string& bos, const std::string& eos) {
  std::ifstream in(llm::testing::SourceDir() + "/common/jinja/testdata/templates/" + name +
                   ".jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromJinja(ss.str(), name, bos, eos);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

const std::vector<ToolSpec> kTools = {
    {"get_weather", "The current weather in a city.",
     R"({"type": "object", "properties": {"city": {"type": "string"}, )"
     R"("unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]})",
     ""},
    {"get_time", "", R"({"type": "object", "properties": {"zone": {"type": "string"}}})", ""},
};

ChatMessage Call(std::string content, std::vector<ToolCall> calls) {
  ChatMessage m{"assistant", std::move(content)};
  m.tool_calls = std::move(calls);
  return m;
}
ChatMessage Result(std::string id, std::string content) {
  ChatMessage m{"tool", std::move(content)};
  m.tool_call_id = std::move(id);
  return m;
}

std::string Render(const ChatTemplate& t, const std::vector<ToolSpec>& tools,
                   const std::vector<ChatMessage>& messages) {
  absl::StatusOr<ToolPrompt> p = PrepareToolPrompt(DetectToolFormat(t), tools, messages,
                                                   ExtractChatMlDefaultSystem(t.source()));
  EXPECT_TRUE(p.ok()) << p.status();
  absl::StatusOr<std::string> out = t.Render(p->messages, true, p->tools_json);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

// The Hermes block is Qwen 2.5's: its template writes the same text.
TEST(ToolPromptTest, HermesBlockIsQwensOwnText) {
  const ChatTemplate qwen = Real("Qwen-Qwen2.5-7B-Instruct", "", "<|im_end|>");
  const std::string rendered = Render(qwen, kTools, {{"system", "S"}, {"user", "U"}});
  EXPECT_EQ(rendered, "<|im_start|>system\nS\n\n" + HermesToolBlock(kTools) +
                          "<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
}

// SmolLM2's template knows no tools: with the Hermes block and the history
// written as Qwen 2.5 writes it, the prompt is the one Qwen's template
// makes, byte for byte.
TEST(ToolPromptTest, TemplateWithoutToolsGetsQwensPrompt) {
  const ChatTemplate smol =
      Real("HuggingFaceTB-SmolLM2-135M-Instruct", "<|im_start|>", "<|im_end|>");
  const ChatTemplate qwen = Real("Qwen-Qwen2.5-7B-Instruct", "", "<|im_end|>");
  ASSERT_EQ(DetectToolFormat(smol).prompt, ToolPromptStyle::kSystemBlock);
  const std::vector<std::vector<ChatMessage>> conversations = {
      {{"system", "Be brief."}, {"user", "Weather in Paris?"}},
      {{"system", "Be brief."},
       {"user", "Weather in Paris?"},
       Call("", {{"call_1", "get_weather", R"({"city": "Paris"})"}}),
       Result("call_1", "18 C")},
      {{"system", "Be brief."},
       {"user", "Weather and time in Paris?"},
       Call("Let me look.", {{"a", "get_weather", R"({"city":"Paris","unit":"celsius"})"},
                             {"b", "get_time", R"({"zone": "Europe/Paris"})"}}),
       Result("a", "18 C"),
       Result("b", "14:05"),
       {"assistant", "18 C at 14:05."},
       {"user", "Thanks"}},
  };
  for (const auto& messages : conversations) {
    EXPECT_EQ(Render(smol, kTools, messages), Render(qwen, kTools, messages));
  }
  // Without a system message, SmolLM2's own default one comes first.
  EXPECT_THAT(Render(smol, kTools, {{"user", "Hi"}}),
              ::testing::StartsWith("<|im_start|>system\nYou are a helpful AI assistant named "
                                    "SmolLM, trained by Hugging Face\n\n# Tools\n\n"));
}

TEST(ToolPromptTest, GemmaGetsGooglesPromptInTheFirstUserTurn) {
  const ChatTemplate gemma = Real("google-gemma-3-it", "<bos>", "<eos>");
  ASSERT_EQ(DetectToolFormat(gemma).prompt, ToolPromptStyle::kUserBlock);
  const std::string out =
      Render(gemma, {kTools[1]},
             {{"system", "S"},
              {"user", "Time in Paris?"},
              Call("", {{"c", "get_time", R"({"zone": "Europe/Paris", "dst": true})"}}),
              Result("c", "14:05")});
  EXPECT_EQ(out,
            "<bos><start_of_turn>user\nS\n\nYou have access to functions. If you decide to invoke "
            "any of the function(s),\n you MUST put it in the format of\n"
            "[func_name1(params_name1=params_value1, params_name2=params_value2...), "
            "func_name2(params)]\n\nYou SHOULD NOT include any other text in the response if you "
            "call a function\n[\n  {\n    \"name\": \"get_time\",\n    \"parameters\": {\n"
            "      \"type\": \"object\",\n      \"properties\": {\n        \"zone\": {\n"
            "          \"type\": \"string\"\n        }\n      }\n    }\n  }\n]\nTime in Paris?"
            "<end_of_turn>\n<start_of_turn>model\n[get_time(zone='Europe/Paris', dst=True)]"
            "<end_of_turn>\n<start_of_turn>user\n```tool_output\n14:05\n```<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ToolPromptTest, TemplatesWithToolsGetThemAsTheyAre) {
  const ChatTemplate llama =
      Real("meta-llama-Llama-3.1-8B-Instruct", "<|begin_of_text|>", "<|eot_id|>");
  const std::vector<ChatMessage> messages = {
      {"user", "Weather?"}, Call("", {{"c", "get_weather", R"({"city": "Paris"})"}})};
  absl::StatusOr<ToolPrompt> p = PrepareToolPrompt(DetectToolFormat(llama), kTools, messages);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->messages.size(), 2u);
  EXPECT_EQ(p->messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(p->tools_json,
            "[" + ToolObjectJson(kTools[0]) + ", " + ToolObjectJson(kTools[1]) + "]");
  const std::string out = Render(llama, kTools, messages);
  EXPECT_THAT(out, HasSubstr("\"name\": \"get_weather\""));
  EXPECT_THAT(out, HasSubstr("{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}"));
  // No tools (tool_choice none): the history is still shown, tools are None.
  p = PrepareToolPrompt(DetectToolFormat(llama), {}, messages);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tools_json, "");
}

// Mistral Nemo's template raises on ids that are not 9 letters and digits:
// OpenAI-style ids are mapped, the same for the call and its result.
TEST(ToolPromptTest, MistralGetsNineCharacterIds) {
  const ChatTemplate nemo = Real("mistralai-Mistral-Nemo-Instruct-2407", "<s>", "</s>");
  const std::vector<ChatMessage> messages = {
      {"user", "Weather?"},
      Call("", {{"call_Xy12abcDEF34ghij56klm7890", "get_weather", R"({"city": "Paris"})"},
                {"abcDEF123", "get_time", "{}"}}),
      Result("call_Xy12abcDEF34ghij56klm7890", "18 C"),
      Result("abcDEF123", "noon")};
  const std::string out = Render(nemo, kTools, messages);
  EXPECT_THAT(out, HasSubstr("\"id\": \"abcDEF123\"}]</s>"));
  absl::StatusOr<ToolPrompt> p = PrepareToolPrompt(DetectToolFormat(nemo), kTools, messages);
  ASSERT_TRUE(p.ok());
  const std::string mapped = p->messages[1].tool_calls[0].id;
  EXPECT_EQ(mapped.size(), 9u);
  EXPECT_EQ(p->messages[2].tool_call_id, mapped);
  EXPECT_EQ(p->messages[3].tool_call_id, "abcDEF123");
  EXPECT_THAT(out, HasSubstr("\"call_id\": \"" + mapped + "\"}[/TOOL_RESULTS]"));
}

TEST(ToolPromptTest, PhiFourMiniToolsInTheSystemMessage) {
  ToolFormat phi4;
  phi4.syntax = ToolSyntax::kToolCall;
  phi4.prompt = ToolPromptStyle::kSystemMessageTools;
  const std::vector<ToolSpec> tools = {kTools[1]};
  const std::vector<ChatMessage> messages = {
      {"user", "Time?"}, Call("", {{"c", "get_time", R"({"zone":"UTC"})"}}), Result("c", "12:00")};
  absl::StatusOr<ToolPrompt> p = PrepareToolPrompt(phi4, tools, messages);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->messages.size(), 4u);
  EXPECT_EQ(p->messages[0].role, "system");
  EXPECT_EQ(p->messages[0].tools,
            R"([{"name": "get_time", "parameters": {"type": "object", "properties": )"
            R"({"zone": {"type": "string"}}}}])");
  EXPECT_EQ(p->messages[2].content,
            R"(<|tool_call|>[{"name": "get_time", "arguments": {"zone": "UTC"}}]<|/tool_call|>)");
  EXPECT_EQ(p->messages[3].role, "tool");
  EXPECT_EQ(p->tools_json, "");
}

TEST(ToolPromptTest, NoKnownSyntaxIsAnError) {
  ToolFormat none;
  none.reason = "because";
  const std::vector<ChatMessage> messages = {{"user", "x"}};
  absl::StatusOr<ToolPrompt> p = PrepareToolPrompt(none, kTools, messages);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("because"));
}

TEST(ToolPromptTest, WriteToolCallsPerSyntax) {
  const std::vector<ToolCall> calls = {{"abcDEF123", "f", R"({"a":1,"b":"x"})"}, {"c", "g", ""}};
  EXPECT_EQ(WriteToolCalls(ToolSyntax::kLlama3, calls),
            R"({"name": "f", "parameters": {"a": 1, "b": "x"}}; {"name": "g", "parameters": {}})");
  EXPECT_EQ(WriteToolCalls(ToolSyntax::kMistral, calls),
            R"([TOOL_CALLS][{"name": "f", "arguments": {"a": 1, "b": "x"}, "id": "abcDEF123"}, )"
            R"({"name": "g", "arguments": {}, "id": "c"}])");
  EXPECT_EQ(WriteToolCalls(ToolSyntax::kPythonic, calls), "[f(a=1, b='x'), g()]");
}

}  // namespace
}  // namespace llm::client
