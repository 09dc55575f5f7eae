// ToolCallConstraint's structural tags compiled by xgrammar itself and run
// against model-like answers: each family's calls are accepted, text where
// a choice allows none, other tools' names, arguments outside the schema
// and a second call under parallel_tool_calls false are refused. Built only
// where the build has xgrammar (client/constrain: the xgrammar::xgrammar
// target).
#include <xgrammar/xgrammar.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "client/tools/tool_constraint.h"
#include "gtest/gtest.h"

namespace llm::client {
namespace {

const std::vector<ToolSpec> kTools = {
    {"get_weather", "",
     R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], )"
     R"("additionalProperties": false})",
     ""},
    {"get_time", "",
     R"({"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]})", ""},
};

// A vocabulary of the 128 ASCII characters, EOS (128) and three control
// tokens; xgrammar needs a control token's text to match it by id.
constexpr int32_t kEos = 128, kToolCalls = 129, kToolCallOpen = 130, kToolCallClose = 131;

std::optional<int32_t> ControlId(std::string_view text) {
  if (text == "[TOOL_CALLS]") return kToolCalls;
  if (text == "<|tool_call|>") return kToolCallOpen;
  if (text == "<|/tool_call|>") return kToolCallClose;
  return std::nullopt;
}

struct Step {
  std::string text;
  int32_t token = -1;
};

// Whether the constraint for (syntax, choice) accepts `steps` then EOS, fed
// a token at a time (control tokens by id when `control`).
bool Accepts(ToolSyntax syntax, const ToolChoice& choice, const std::vector<Step>& steps,
             bool control = false) {
  absl::StatusOr<std::optional<std::string>> c =
      ToolCallConstraint(syntax, kTools, choice, control ? ControlTokenId(ControlId) : nullptr);
  EXPECT_TRUE(c.ok() && c->has_value()) << c.status();
  if (!c.ok() || !c->has_value()) return false;
  std::vector<std::string> vocab;
  for (int i = 0; i < 128; ++i) vocab.push_back(std::string(1, static_cast<char>(i)));
  vocab.insert(vocab.end(), {"", "[TOOL_CALLS]", "<|tool_call|>", "<|/tool_call|>"});
  xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, std::nullopt,
                               std::vector<int32_t>{kEos});
  auto grammar = xgrammar::Grammar::FromStructuralTag(**c, info);
  EXPECT_TRUE(std::holds_alternative<xgrammar::Grammar>(grammar)) << **c;
  if (!std::holds_alternative<xgrammar::Grammar>(grammar)) return false;
  xgrammar::GrammarCompiler compiler(info, 1);
  xgrammar::GrammarMatcher m(compiler.CompileGrammar(std::get<xgrammar::Grammar>(grammar)));
  for (const Step& s : steps) {
    if (s.token >= 0) {
      if (!m.AcceptToken(s.token)) return false;
      continue;
    }
    for (char ch : s.text) {
      if (!m.AcceptToken(static_cast<unsigned char>(ch))) return false;
    }
  }
  return m.AcceptToken(kEos);
}

const ToolChoice kAuto{ToolChoiceMode::kAuto, "", true};
const ToolChoice kRequired{ToolChoiceMode::kRequired, "", true};
const ToolChoice kRequiredOne{ToolChoiceMode::kRequired, "", false};
const ToolChoice kTime{ToolChoiceMode::kFunction, "get_time", true};

const std::string kWeather =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const std::string kTimeCall =
    "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}\n</tool_call>";

TEST(ToolConstraintXgrammarTest, Hermes) {
  EXPECT_TRUE(Accepts(ToolSyntax::kHermes, kAuto, {{"The weather is fine."}}));
  EXPECT_TRUE(Accepts(ToolSyntax::kHermes, kAuto, {{"Let me check.\n" + kWeather}}));
  EXPECT_TRUE(Accepts(ToolSyntax::kHermes, kAuto, {{kWeather + "\n" + kTimeCall}}));
  EXPECT_FALSE(
      Accepts(ToolSyntax::kHermes, kAuto,
              {{"<tool_call>\n{\"name\": \"get_wether\", \"arguments\": {}}\n</tool_call>"}}));
  EXPECT_FALSE(Accepts(
      ToolSyntax::kHermes, kAuto,
      {{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 3}}\n</tool_call>"}}));
  EXPECT_TRUE(Accepts(ToolSyntax::kHermes, kRequired, {{kWeather}}));
  EXPECT_FALSE(Accepts(ToolSyntax::kHermes, kRequired, {{"Sure. " + kWeather}}));
  EXPECT_FALSE(Accepts(ToolSyntax::kHermes, kRequired, {}));
  EXPECT_FALSE(Accepts(ToolSyntax::kHermes, kRequiredOne, {{kWeather + "\n" + kTimeCall}}));
  EXPECT_TRUE(Accepts(ToolSyntax::kHermes, kTime, {{kTimeCall}}));
  EXPECT_FALSE(Accepts(ToolSyntax::kHermes, kTime, {{kWeather}}));
}

TEST(ToolConstraintXgrammarTest, MistralControlToken) {
  const std::string one =
      "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"abcDEF123\"}]";
  const std::string two =
      "[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}, {\"name\": "
      "\"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]";
  EXPECT_TRUE(Accepts(ToolSyntax::kMistral, kAuto, {{"Hello"}}, true));
  EXPECT_TRUE(Accepts(ToolSyntax::kMistral, kRequired, {{"", kToolCalls}, {one}}, true));
  EXPECT_TRUE(Accepts(ToolSyntax::kMistral, kRequired, {{"", kToolCalls}, {two}}, true));
  EXPECT_FALSE(Accepts(ToolSyntax::kMistral, kRequiredOne, {{"", kToolCalls}, {two}}, true));
  // The marker spelled out is not the control token.
  EXPECT_FALSE(Accepts(ToolSyntax::kMistral, kRequired, {{"[TOOL_CALLS]" + one}}, true));
  // Where it is text, it is matched as text.
  EXPECT_TRUE(Accepts(ToolSyntax::kMistral, kRequired, {{"[TOOL_CALLS]" + one}}, false));
}

TEST(ToolConstraintXgrammarTest, ToolCallTokens) {
  const std::string list = "[{\"name\": \"get_time\", \"arguments\": {\"zone\": \"UTC\"}}]";
  EXPECT_TRUE(Accepts(ToolSyntax::kToolCall, kRequired,
                      {{"", kToolCallOpen}, {list}, {"", kToolCallClose}}, true));
  EXPECT_TRUE(Accepts(ToolSyntax::kToolCall, kAuto,
                      {{"ok "}, {"", kToolCallOpen}, {list}, {"", kToolCallClose}}, true));
}

TEST(ToolConstraintXgrammarTest, Llama3WholeAnswer) {
  EXPECT_TRUE(Accepts(ToolSyntax::kLlama3, kRequired,
                      {{"{\"name\": \"get_time\", \"parameters\": {\"zone\": \"UTC\"}}"}}));
  EXPECT_FALSE(Accepts(ToolSyntax::kLlama3, kRequired, {{"Hi"}}));
  EXPECT_FALSE(Accepts(ToolSyntax::kLlama3, kTime,
                       {{"{\"name\": \"get_weather\", \"parameters\": {\"city\": \"x\"}}"}}));
}

}  // namespace
}  // namespace llm::client
