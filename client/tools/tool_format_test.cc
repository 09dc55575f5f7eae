#include "client/tools/tool_format.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "common/test_paths.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

std::string RealTemplate(const std::string& name) {
  std::ifstream in(llm::testing::SourceDir() + "/common/jinja/testdata/templates/" + name +
                   ".jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ToolFormat Jinja(const std::string& source) {
  return DetectToolFormat(ChatTemplate::Kind::kJinja, source);
}

// Every real template of common/jinja/testdata: its syntax and prompt style.
TEST(ToolFormatTest, RealTemplates) {
  using P = ToolPromptStyle;
  const std::map<std::string, std::pair<ToolSyntax, P>> want = {
      {"HuggingFaceH4-zephyr-7b-beta", {ToolSyntax::kHermes, P::kSystemBlock}},
      {"HuggingFaceTB-SmolLM2-135M-Instruct", {ToolSyntax::kHermes, P::kSystemBlock}},
      {"HuggingFaceTB-SmolLM3-3B", {ToolSyntax::kHermes, P::kSystemBlock}},
      {"Qwen-QwQ-32B", {ToolSyntax::kHermes, P::kTemplate}},
      {"Qwen-Qwen2.5-7B-Instruct", {ToolSyntax::kHermes, P::kTemplate}},
      {"Qwen-Qwen3-0.6B", {ToolSyntax::kHermes, P::kTemplate}},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", {ToolSyntax::kHermes, P::kSystemBlock}},
      {"google-gemma-2-2b-it", {ToolSyntax::kPythonic, P::kUserBlock}},
      {"google-gemma-3-it", {ToolSyntax::kPythonic, P::kUserBlock}},
      {"meta-llama-Llama-3.1-8B-Instruct", {ToolSyntax::kLlama3, P::kTemplate}},
      {"meta-llama-Llama-3.2-3B-Instruct", {ToolSyntax::kLlama3, P::kTemplate}},
      {"meta-llama-Llama-3.3-70B-Instruct", {ToolSyntax::kLlama3, P::kTemplate}},
      {"microsoft-Phi-3.5-mini-instruct", {ToolSyntax::kHermes, P::kSystemBlock}},
      {"mistralai-Mistral-7B-Instruct-v0.2-v1-system", {ToolSyntax::kHermes, P::kSystemBlock}},
      {"mistralai-Mistral-Nemo-Instruct-2407", {ToolSyntax::kMistral, P::kTemplate}},
  };
  for (const auto& [name, expected] : want) {
    SCOPED_TRACE(name);
    const std::string source = RealTemplate(name);
    ASSERT_FALSE(source.empty());
    const ToolFormat f = Jinja(source);
    EXPECT_EQ(f.syntax, expected.first) << ToolSyntaxName(f.syntax);
    EXPECT_EQ(f.prompt, expected.second);
    EXPECT_FALSE(f.family.empty());
  }
}

TEST(ToolFormatTest, PhiFourMiniReadsToolsFromTheSystemMessage) {
  // Phi-4-mini's published template (abridged to what detection reads).
  const ToolFormat phi4 = Jinja(
      "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and "
      "message['tools'] is not none %}{{ '<|' + message['role'] + '|>' + message['content'] + "
      "'<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% endif %}{% endfor %}");
  EXPECT_EQ(phi4.syntax, ToolSyntax::kToolCall);
  EXPECT_EQ(phi4.prompt, ToolPromptStyle::kSystemMessageTools);
  // Granite's takes `tools` and writes <|tool_call|>.
  const ToolFormat granite =
      Jinja("{% if tools %}{{ tools | tojson }}{% endif %}{{ '<|tool_call|>' }}");
  EXPECT_EQ(granite.syntax, ToolSyntax::kToolCall);
  EXPECT_EQ(granite.prompt, ToolPromptStyle::kTemplate);
}

TEST(ToolFormatTest, UnknownToolSyntaxesAndRawPromptsHaveNone) {
  // DeepSeek R1's, FunctionGemma's: tools in a syntax not parsed here.
  for (const std::string source :
       {"{% if tools %}<｜tool▁calls▁begin｜>{% endif %}",
        "<start_of_turn>{% for tool in tools %}<start_function_declaration>{% endfor %}"}) {
    const ToolFormat f = Jinja(source);
    EXPECT_EQ(f.syntax, ToolSyntax::kNone) << source;
    EXPECT_NE(f.reason.find("does not parse"), std::string::npos) << f.reason;
  }
  const ToolFormat raw = DetectToolFormat(ChatTemplate::Raw());
  EXPECT_EQ(raw.syntax, ToolSyntax::kNone);
  EXPECT_NE(raw.reason.find("without a chat template"), std::string::npos);
  // "tools" inside a longer word is not a mention.
  EXPECT_EQ(Jinja("{{ my_tools_x }}{{ toolset }}").syntax, ToolSyntax::kHermes);
}

TEST(ToolFormatTest, WrittenOutFormatsUseTheHermesBlock) {
  EXPECT_EQ(DetectToolFormat(ChatTemplate::ChatMl()).prompt, ToolPromptStyle::kSystemBlock);
  EXPECT_EQ(DetectToolFormat(ChatTemplate::Llama3()).syntax, ToolSyntax::kHermes);
}

TEST(ToolFormatTest, ToolObjectJson) {
  EXPECT_EQ(ToolObjectJson({"f", "", "", ""}),
            R"({"type": "function", "function": {"name": "f"}})");
  EXPECT_EQ(ToolObjectJson({"f", "Says \"hi\"", R"({"type":"object"})", ""}),
            R"({"type": "function", "function": {"name": "f", "description": "Says \"hi\"", )"
            R"("parameters": {"type":"object"}}})");
  EXPECT_EQ(ToolObjectJson({"f", "", "", "{\"as\": \"sent\"}"}), "{\"as\": \"sent\"}");
}

}  // namespace
}  // namespace llm::client
